"""Moved to :mod:`thinkloop.core.run` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.run import *  # noqa: F403
