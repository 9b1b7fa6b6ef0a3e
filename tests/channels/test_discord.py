"""Discord end to end: discord.py's REST client and gateway client against the Discord
stand-in, the hub, and a real agent on the loopback model server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.channels.conftest import env_for, until
from tests.channels.discord_api import TOKEN, DiscordAPI

from thinkloop.channels.service import ChannelService
from thinkloop.errors import ChannelError
from thinkloop.settings import load_settings
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion


def said(text: str | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None) -> Reply:
    return Reply(body=completion(text, calls))


@asynccontextmanager
async def serving(model: OpenAIServer, home: Path, store: Any, token: str = TOKEN,
                  **channel: Any) -> AsyncIterator[tuple[DiscordAPI, ChannelService]]:
    api = DiscordAPI()
    url = await api.start()
    env = {**env_for(model, home), "DISCORD_BOT_TOKEN": token,
           "THINKLOOP_CHANNELS_DISCORD_API_URL": f"{url}/api/v10",
           "THINKLOOP_CHANNELS_DISCORD_CONNECT_TIMEOUT_S": "15"}
    for key, value in channel.items():
        env[f"THINKLOOP_CHANNELS_DISCORD_{key.upper()}"] = \
            value if isinstance(value, str) else json.dumps(value)
    service = ChannelService(load_settings(env=env, cwd=home), store, ["discord"],
                             agents_file=home / "agents.yaml")
    try:
        await service.start()
        yield api, service
    finally:
        await service.stop()
        await api.stop()
        model.clear()


async def test_a_dm_is_answered_and_a_server_channel_needs_a_mention(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, service):
        model.enqueue(said("Hello in DM."), said("Second in DM."), said("Hi server."))
        await api.message("101", "7", "hello")
        await until(lambda: api.texts("101") == ["Hello in DM."], what=lambda: api.calls)
        assert any(c.path == "channels/101/typing" for c in api.calls)
        await api.message("101", "7", "and again")
        await until(lambda: "Second in DM." in api.texts("101"))
        assert "Hello in DM." in json.dumps(model.requests[-1])
        await api.message("201", "7", "chatter", guild="301")
        await api.message("201", "7", "hello bot", guild="301", mention=True)
        await until(lambda: api.texts("201") == ["Hi server."])
        await service.hub.idle()
        assert len(model.requests) == 3  # the chatter started nothing
    assert len(await store.load("discord:101")) >= 4


async def test_an_approval_by_button_a_file_in_and_a_429_retried(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store, agent="shell") as (api, _):
        model.enqueue(said(calls=[("shell", {"command": "cat inbox/plan.txt"})]),
                      said("The plan: launch."))
        api.fail["POST messages"] = [0.3]
        await api.message("102", "7", "read my plan", files={"plan.txt": b"launch\n"})
        await until(lambda: any(b.get("components") for b in api.sent("102")),
                    what=lambda: api.calls)
        prompt = next(b for b in api.sent("102") if b.get("components"))
        buttons = prompt["components"][0]["components"]
        assert [b["label"] for b in buttons] == ["Approve", "Deny"]
        await api.press("102", "7", buttons[0]["custom_id"])
        await until(lambda: "The plan: launch." in api.texts("102"), what=lambda: api.calls)
        assert any(c.path.endswith("/callback") for c in api.calls)  # the press acknowledged
        assert "inbox/plan.txt" in json.dumps(model.requests[0])
        assert "launch" in json.dumps(model.requests[-1])
        assert len(api.refused) == 1


async def test_a_wrong_token_is_one_clear_error_at_start(
        model: OpenAIServer, home: Path, store: Any) -> None:
    with pytest.raises(ChannelError, match=r"discord refused the bot token \(DISCORD_BOT_TOKEN"):
        async with serving(model, home, store, token="wrong"):
            pass


async def test_ask_human_and_a_cross_chat_send_refused_in_sight(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, _):
        send = ("send_message", {"text": "psst", "recipient": "discord:909"})
        model.enqueue(said(calls=[("ask_human", {"question": "Which day?"})]),
                      said(calls=[send]), *[said("Could not tell 909.")] * 3)
        await api.message("103", "7", "plan it")
        await until(lambda: "Which day?" in api.texts("103"))
        await api.message("103", "7", "Friday")
        await until(lambda: "Could not tell 909." in api.texts("103"), what=lambda: api.calls)
        assert "The user answered: Friday" in json.dumps(model.requests[1])
        assert api.texts("909") == []
        assert any("Refused" in t and "discord:909" in t for t in api.texts("103"))
