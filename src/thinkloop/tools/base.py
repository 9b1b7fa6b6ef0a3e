"""Moved to :mod:`thinkloop.core.tool` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.tool import *  # noqa: F403
