"""Per-chat missions (Stingyclaw's MISSION.md per group): a chat's own instructions and tool
set. ``missions`` in a channel's settings are the defaults; a mission kept in the store (set
through the gateway: ``PUT /v1/channels/NAME/missions/CHAT``) takes their place for its chat,
and deleting it brings the setting's back."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from thinkloop.api import ProfileBackend
from thinkloop.channels.base import Address
from thinkloop.channels.config import ChannelSettings, Mission

REMOVED = "null"  # the profile table keeps no deletes: a removed mission is stored as this


def _owner(platform: str) -> str:
    # A profile owner no memory layer reads (those are ``user:<id>``), so it never leaks
    # into a prompt.
    return f"channel-missions:{platform}"


class Missions:
    """The missions of the chats, from the settings and from ``store`` (when it keeps
    profiles: SQLite and PostgreSQL do)."""

    def __init__(self, store: Any) -> None:
        self.store: ProfileBackend | None = store if isinstance(store, ProfileBackend) else None

    async def stored(self, platform: str) -> dict[str, Mission]:
        if self.store is None:
            return {}
        found: dict[str, Mission] = {}
        for chat, raw in (await self.store.profile(_owner(platform))).items():
            if raw == REMOVED:
                continue
            try:
                found[chat] = Mission.model_validate_json(raw)
            except ValidationError:  # written by a newer version: the setting's applies
                continue
        return found

    async def of(self, where: Address, settings: ChannelSettings) -> Mission | None:
        """The chat's mission: the stored one, else the setting's, else None."""
        stored = await self.stored(where.platform)
        return stored.get(where.chat) or settings.missions.get(where.chat)

    async def all(self, platform: str, settings: ChannelSettings) -> dict[str, Any]:
        stored = await self.stored(platform)
        rows = {c: {**m.model_dump(), "source": "settings"} for c, m in settings.missions.items()}
        rows.update({c: {**m.model_dump(), "source": "store"} for c, m in stored.items()})
        return rows

    async def put(self, platform: str, chat: str, mission: Mission | None) -> None:
        if self.store is None:
            from thinkloop.errors import ConfigError

            raise ConfigError("this store keeps no missions (it has no profile table)")
        value = REMOVED if mission is None else mission.model_dump_json()
        await self.store.set_facts(_owner(platform), {chat: value})
