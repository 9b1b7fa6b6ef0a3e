"""The gateway's routes of the chat channels' missions (``thinkloop serve --channel``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path

from thinkloop.channels.config import ChannelSettings, Mission
from thinkloop.channels.missions import Missions
from thinkloop.errors import NotFoundError
from thinkloop.server.auth import Principal
from thinkloop.server.deps import admin, caller

Caller = Annotated[Principal, Depends(caller)]
Admin = Annotated[Principal, Depends(admin)]
ChatId = Annotated[str, Path(min_length=1, max_length=200)]


def mission_routes(missions: Missions, channels: dict[str, ChannelSettings]) -> Any:
    """``/v1/channels/NAME/missions``: list (any key), set and delete (admin keys)."""
    router = APIRouter(prefix="/v1/channels")

    def served(platform: str) -> ChannelSettings:
        if platform not in channels:
            raise NotFoundError(f"no channel {platform!r} is served here")
        return channels[platform]

    @router.get("/{platform}/missions")
    async def list_missions(platform: str, who: Caller) -> dict[str, Any]:
        return {"missions": await missions.all(platform, served(platform))}

    @router.put("/{platform}/missions/{chat}")
    async def put_mission(platform: str, chat: ChatId, body: Mission,
                          who: Admin) -> dict[str, Any]:
        served(platform)
        await missions.put(platform, chat, body)
        return {"chat": chat, **body.model_dump(), "source": "store"}

    @router.delete("/{platform}/missions/{chat}")
    async def delete_mission(platform: str, chat: ChatId, who: Admin) -> dict[str, Any]:
        served(platform)
        await missions.put(platform, chat, None)
        return {"chat": chat, "deleted": True}

    return router
