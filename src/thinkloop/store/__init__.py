"""Stores: the Store protocol and its backends."""

from thinkloop.store.base import Store
from thinkloop.store.memory import MemoryStore

__all__ = ["MemoryStore", "Store"]
