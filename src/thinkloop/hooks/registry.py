"""Moved to :mod:`thinkloop.core.registry` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.registry import *  # noqa: F403
