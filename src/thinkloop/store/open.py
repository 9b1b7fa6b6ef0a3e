"""``open_store``: pick a backend from a URL, a path or the settings."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit, urlunsplit

from thinkloop.store.base import StoreError
from thinkloop.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from thinkloop.core.settings import Settings
    from thinkloop.store.postgres import PostgresStore

def default_location(settings: Settings | None = None) -> str:
    """The settings' ``database_url``, else ``thinkloop.db`` in their home (loaded if unset)."""
    if settings is None:
        from thinkloop.core.settings import load_settings  # pydantic: not on the CLI's import path

        settings = load_settings()
    return settings.store_location


def open_store(
    url_or_path: str | Path | None = None, *, settings: Settings | None = None
) -> SQLiteStore | PostgresStore:
    """A durable store; it connects (and migrates) lazily on first use.

    ``postgresql://...`` (optionally ``?schema=name``) opens PostgreSQL, ``sqlite:///path``
    or a plain path opens SQLite, ``None`` uses :func:`default_location`.
    """
    target = str(url_or_path) if url_or_path is not None else default_location(settings)
    scheme = urlsplit(target).scheme
    if scheme in ("postgresql", "postgres"):
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        schema = query.pop("schema", [None])[0]
        rest = "&".join(f"{k}={v}" for k, vs in query.items() for v in vs)
        dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment))
        try:
            from thinkloop.store.postgres import PostgresStore
        except ImportError as exc:  # asyncpg is the `postgres` extra
            raise StoreError("PostgreSQL needs asyncpg: pip install 'thinkloop[postgres]'") from exc
        return PostgresStore(dsn, schema=schema)
    if scheme == "sqlite":
        # SQLAlchemy's spelling: sqlite:///relative.db, sqlite:////absolute.db, sqlite:// memory.
        return SQLiteStore(target.removeprefix("sqlite://").removeprefix("/") or ":memory:")
    if scheme and len(scheme) > 1:
        raise StoreError(f"unknown store URL scheme {scheme!r}: use postgresql:// or a file path")
    return SQLiteStore(Path(target).expanduser())
