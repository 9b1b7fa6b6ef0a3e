"""Moved to :mod:`thinkloop.core.model` (the vocabulary); this path re-exports it for one
release."""

from thinkloop.core.model import *  # noqa: F403
