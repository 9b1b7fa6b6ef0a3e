"""Moved to :mod:`thinkloop.core.protocol` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.protocol import *  # noqa: F403
