"""Stores: the Store protocol and its backends (in-process, SQLite, PostgreSQL)."""

from thinkloop.store.base import (
    ApprovalStore,
    Compacting,
    DurableStore,
    MemoryBackend,
    MemoryRecord,
    ProfileBackend,
    SessionAdmin,
    SessionInfo,
    SessionLocking,
    Store,
    StoreError,
)
from thinkloop.store.inprocess import MemoryStore
from thinkloop.store.open import default_location, open_store
from thinkloop.store.sqlite import SQLiteStore


def __getattr__(name: str) -> object:
    # asyncpg is optional (the `postgres` extra): import its backend only when asked for.
    if name == "PostgresStore":
        from thinkloop.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(name)


__all__ = [
    "ApprovalStore",
    "Compacting",
    "DurableStore",
    "MemoryBackend",
    "MemoryRecord",
    "MemoryStore",
    "PostgresStore",
    "ProfileBackend",
    "SQLiteStore",
    "SessionAdmin",
    "SessionInfo",
    "SessionLocking",
    "Store",
    "StoreError",
    "default_location",
    "open_store",
]
