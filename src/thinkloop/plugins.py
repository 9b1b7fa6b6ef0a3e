"""Moved to :mod:`thinkloop.core.plugins` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.plugins import *  # noqa: F403
