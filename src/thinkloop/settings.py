"""Moved to :mod:`thinkloop.core.settings` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.settings import *  # noqa: F403
