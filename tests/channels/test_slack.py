"""Slack end to end: slack-sdk's Web API client and Socket Mode client against the Slack
stand-in, the hub, and a real agent on the loopback model server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.channels.conftest import env_for, until
from tests.channels.slack_api import APP_TOKEN, BOT_TOKEN, SlackAPI

from thinkloop.channels.service import ChannelService
from thinkloop.errors import ChannelError
from thinkloop.settings import load_settings
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion


def said(text: str | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None) -> Reply:
    return Reply(body=completion(text, calls))


@asynccontextmanager
async def serving(model: OpenAIServer, home: Path, store: Any, bot: str = BOT_TOKEN,
                  **channel: Any) -> AsyncIterator[tuple[SlackAPI, ChannelService]]:
    api = SlackAPI()
    url = await api.start()
    env = {**env_for(model, home), "SLACK_BOT_TOKEN": bot, "SLACK_APP_TOKEN": APP_TOKEN,
           "THINKLOOP_CHANNELS_SLACK_API_URL": f"{url}/api/"}
    for key, value in channel.items():
        env[f"THINKLOOP_CHANNELS_SLACK_{key.upper()}"] = \
            value if isinstance(value, str) else json.dumps(value)
    service = ChannelService(load_settings(env=env, cwd=home), store, ["slack"],
                             agents_file=home / "agents.yaml")
    try:
        await service.start()
        yield api, service
    finally:
        await service.stop()
        await api.stop()
        model.clear()


async def test_a_mention_starts_a_thread_that_is_its_session(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, service):
        model.enqueue(said("Hi team."), said("Still in the thread."))
        ts = await api.message("C1", "U7", "hello bot", mention=True)
        await until(lambda: api.texts("C1") == ["Hi team."], what=lambda: api.calls)
        assert api.posts("C1")[0]["thread_ts"] == ts  # the answer starts a thread
        assert len(api.acks) == 2  # both envelopes acknowledged
        await api.message("C1", "U7", "and more", thread=ts)  # no mention needed in it
        await until(lambda: "Still in the thread." in api.texts("C1"))
        assert "Hi team." in json.dumps(model.requests[-1])
        await api.message("C1", "U7", "chatter without a mention")
        await until(lambda: len(api.acks) == 4)
        await service.hub.idle()
        assert len(model.requests) == 2  # the chatter started nothing
    assert len(await store.load(f"slack:C1/{ts}")) >= 4


async def test_an_approval_by_button_a_file_in_and_a_429_retried(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store, agent="shell") as (api, _):
        model.enqueue(said(calls=[("shell", {"command": "cat inbox/todo.txt"})]),
                      said("Your todo: ship it."))
        api.fail["chat.postMessage"] = [1]
        await api.message("D1", "U7", "what is in my file?", im=True,
                          files=[api.file("todo.txt", b"ship it\n")])
        await until(lambda: any("blocks" in p for p in api.posts("D1")), what=lambda: api.calls)
        prompt = next(p for p in api.posts("D1") if "blocks" in p)
        buttons = prompt["blocks"][1]["elements"]
        assert [b["text"]["text"] for b in buttons] == ["Approve", "Deny"]
        await api.press("D1", "U7", buttons[0]["value"], None)
        await until(lambda: "Your todo: ship it." in api.texts("D1"), what=lambda: api.calls)
        assert "ship" in json.dumps(model.requests[-1])
        assert "inbox/todo.txt" in json.dumps(model.requests[0])
        assert [c.params["text"] for c in api.refused] == [prompt["text"]]  # made again


async def test_a_wrong_bot_token_is_one_clear_error_at_start(
        model: OpenAIServer, home: Path, store: Any) -> None:
    with pytest.raises(ChannelError, match="slack refused SLACK_BOT_TOKEN: invalid_auth"):
        async with serving(model, home, store, bot="xoxb-wrong"):
            pass


async def test_ask_human_in_a_dm_and_a_cross_chat_send_refused_in_sight(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, _):
        send = ("send_message", {"text": "psst", "recipient": "slack:C9"})
        model.enqueue(said(calls=[("ask_human", {"question": "Which report?"})]),
                      said(calls=[send]), *[said("Could not tell C9.")] * 3)
        await api.message("D3", "U7", "send the report", im=True)
        await until(lambda: "Which report?" in api.texts("D3"))
        await api.message("D3", "U7", "the weekly one", im=True)
        await until(lambda: "Could not tell C9." in api.texts("D3"), what=lambda: api.calls)
        assert "The user answered: the weekly one" in json.dumps(model.requests[1])
        assert api.texts("C9") == []
        assert any("Refused" in t and "slack:C9" in t for t in api.texts("D3"))
