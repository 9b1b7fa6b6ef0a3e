"""Moved to :mod:`thinkloop.core.events` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.events import *  # noqa: F403
