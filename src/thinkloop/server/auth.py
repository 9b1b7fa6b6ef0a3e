"""API keys: created once and shown once, stored only as SHA-256 hashes, each naming a user
and roles. A request carries its key as ``Authorization: Bearer KEY`` (what the openai client
sends) or ``X-API-Key: KEY``."""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from thinkloop.api import GatewayStore
from thinkloop.core.errors import ConfigError

KEY_PREFIX = "tlk_"
USER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
ROLES = frozenset({"user", "admin"})
LOCAL_USER = "local"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: a user id and roles (``admin`` may define agents)."""

    user: str
    roles: tuple[str, ...] = ("user",)

    @property
    def admin(self) -> bool:
        return "admin" in self.roles


def hash_key(key: str) -> str:
    # Keys are 256 random bits: a plain hash is enough (no dictionary to guess from).
    return hashlib.sha256(key.encode()).hexdigest()


async def create_key(store: GatewayStore, user: str, roles: Sequence[str] = ("user",)) -> str:
    """A new key for ``user``; the only time the key itself exists outside the caller."""
    if not USER_ID.fullmatch(user):
        raise ConfigError(f"invalid user id {user!r}: letters, digits and ._@- (at most 128)")
    unknown = set(roles) - ROLES
    if unknown or not roles:
        raise ConfigError(f"roles must be among {', '.join(sorted(ROLES))}")
    key_id = secrets.token_hex(4)
    key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    await store.add_api_key(key_id, hash_key(key), user, tuple(roles))
    return key


def key_from_headers(authorization: str | None, x_api_key: str | None) -> str | None:
    if x_api_key:
        return x_api_key.strip()
    if authorization and authorization[:7].lower() == "bearer ":
        return authorization[7:].strip()
    return None


async def authenticate(store: GatewayStore, key: str | None) -> Principal | None:
    if not key or not key.startswith(KEY_PREFIX) or len(key) > 200:
        return None
    record = await store.api_key(hash_key(key))
    return Principal(record.user_id, record.roles) if record else None
