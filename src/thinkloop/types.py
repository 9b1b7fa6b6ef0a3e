"""Moved to :mod:`thinkloop.core.types` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.types import *  # noqa: F403
