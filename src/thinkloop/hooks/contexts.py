"""Moved to :mod:`thinkloop.core.contexts` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.contexts import *  # noqa: F403
