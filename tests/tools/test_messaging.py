from __future__ import annotations

import asyncio
import io
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from tests.tools.helpers import approving, call

from thinkloop.agent import Agent
from thinkloop.core.channel import (
    CallbackChannel,
    Channel,
    ChannelError,
    ConsoleChannel,
    Outgoing,
    WebhookChannel,
)
from thinkloop.models.scripted import ScriptedModel, reply
from thinkloop.models.scripted import call as model_call
from thinkloop.tools.base import ToolContext
from thinkloop.tools.builtin.messaging import messaging_tools


async def test_console_channel_send_and_ask() -> None:
    out = io.StringIO()
    ch = ConsoleChannel(inp=io.StringIO("blue\n"), out=out)
    assert isinstance(ch, Channel)
    tools = messaging_tools([ch])
    sent = await call(tools, "send_message", text="hello", recipient="bob")
    assert sent.content == "message sent via console to bob"
    asked = await call(tools, "ask_human", question="Favourite colour?")
    assert asked.content == "The user answered: blue"
    assert out.getvalue() == "[agent] (to bob) hello\n[agent] Favourite colour?\n> "
    closed = await call(tools, "ask_human", question="Again?")
    assert closed.is_error and "console closed before an answer" in closed.content


async def test_console_ask_times_out() -> None:
    r, w = os.pipe()
    with os.fdopen(r) as inp, os.fdopen(w, "w") as writer:
        ch = ConsoleChannel(inp=inp, out=io.StringIO())
        with pytest.raises(ChannelError, match=r"no answer on the console within 0\.2s"):
            await ch.ask(Outgoing("?"), timeout_s=0.2)
        writer.write("\n")  # let the reader thread finish
        writer.flush()


@pytest_asyncio.fixture(loop_scope="function")
async def hook() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        received.append(body)
        if body["type"] == "question" and "inline" in body["text"]:
            return web.json_response({"answer": "inline yes"})
        return web.json_response({"ok": True})

    app = web.Application()
    app.add_routes([web.post("/hook", handler)])
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/hook", received
    await runner.cleanup()


async def test_webhook_channel(hook: tuple[str, list[dict[str, Any]]]) -> None:
    url, received = hook
    ch = WebhookChannel(url)
    tools = messaging_tools([ch])
    r = await call(tools, "send_message", text="report ready")
    assert r.content == "message sent via webhook"
    assert received[0] == {"type": "message", "text": "report ready", "recipient": None,
                           "run_id": "run1", "user_id": "alice", "session_id": None, "meta": {}}
    inline = await call(tools, "ask_human", question="inline ok?")
    assert inline.content == "The user answered: inline yes"

    async def answer_later() -> None:
        while len(received) < 3:  # noqa: ASYNC110 - the webhook server records, we poll
            await asyncio.sleep(0.01)
        assert ch.answer(received[2]["id"], "later yes")

    late, _ = await asyncio.gather(ch.ask(Outgoing("later ok?"), 5), answer_later())
    assert late == "later yes"
    assert not ch.answer(received[2]["id"], "too late")
    with pytest.raises(ChannelError, match="unreachable"):
        await WebhookChannel("http://127.0.0.1:9/none").send(Outgoing("x"))


async def test_send_policy_and_unknown_channel_in_a_run() -> None:
    delivered: list[tuple[str, Outgoing]] = []

    def channel(name: str) -> CallbackChannel:
        async def on_send(m: Outgoing) -> None:
            delivered.append((name, m))
        return CallbackChannel(on_send, name=name)

    def policy(ctx: ToolContext, name: str) -> str | None:
        return "cross-channel send blocked" if name != "telegram" else None

    tools = messaging_tools([channel("telegram"), channel("discord")], policy=policy)
    assert "Channels: telegram, discord." in tools[0].description
    model = ScriptedModel([
        reply("", model_call("send_message", text="hi", channel="discord"),
              model_call("send_message", text="hi", channel="sms"),
              model_call("send_message", text="hi")),
        "done",
    ])
    result = await Agent(model, tools=tools, guard=approving()).run("notify", user_id="u1")
    contents = [r.content for r in result.steps[0].results]
    assert contents == [
        "Error: send to 'discord' blocked: cross-channel send blocked",
        "Error: unknown channel 'sms'; available: telegram, discord",
        "message sent via telegram",
    ]
    assert [(n, m.text, m.user_id, m.run_id) for n, m in delivered] == [
        ("telegram", "hi", "u1", result.run_id)]
    no_ask = await call(tools, "ask_human", question="?")
    assert no_ask.is_error and "cannot ask questions" in no_ask.content
