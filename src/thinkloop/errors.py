"""Moved to :mod:`thinkloop.core.errors` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.errors import *  # noqa: F403
