"""The generic webhook channel end to end: signed POSTs in to the channel's endpoint, signed
POSTs out to a receiver on 127.0.0.1, a real agent on the loopback model server."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from tests.channels.conftest import env_for, until

from thinkloop.channels.service import ChannelService
from thinkloop.channels.webhook import SIGNATURE, TIMESTAMP, sign, signed_headers
from thinkloop.settings import load_settings
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

SECRET = "hook-secret-123"


class Receiver:
    """The other system: keeps each verified POST; 429s the next ``busy`` ones."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.busy = 0
        self.refused = 0
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        ts = request.headers[TIMESTAMP]
        assert request.headers[SIGNATURE] == sign(SECRET, ts, body)
        if self.busy:
            self.busy -= 1
            self.refused += 1
            return web.Response(status=429, headers={"Retry-After": "1"})
        self.posts.append(json.loads(body))
        return web.Response(status=204)

    def texts(self, kind: str = "message") -> list[str]:
        return [p["text"] for p in self.posts if p["type"] == kind]


def said(text: str | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None) -> Reply:
    return Reply(body=completion(text, calls))


@asynccontextmanager
async def serving(model: OpenAIServer, home: Path, store: Any, **channel: Any
                  ) -> AsyncIterator[tuple[Receiver, str, aiohttp.ClientSession]]:
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/hook", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    env = env_for(model, home)
    values = {"URL": f"http://127.0.0.1:{port}/hook", "SECRET": SECRET, "PORT": "0",
              "TYPING_EVERY_S": "0.2", **channel}
    for key, value in values.items():
        env[f"THINKLOOP_CHANNELS_WEBHOOK_{key.upper()}"] = \
            value if isinstance(value, str) else json.dumps(value)
    service = ChannelService(load_settings(env=env, cwd=home), store, ["webhook"],
                             agents_file=home / "agents.yaml")
    await service.start()
    adapter: Any = service.channels["webhook"][0]
    try:
        async with aiohttp.ClientSession() as client:
            yield receiver, f"http://127.0.0.1:{adapter.port}/messages", client
    finally:
        await service.stop()
        await runner.cleanup()
        model.clear()


async def post(client: aiohttp.ClientSession, url: str, payload: dict[str, Any],
               secret: str = SECRET, now: float | None = None) -> int:
    body = json.dumps(payload).encode()
    async with client.post(url, data=body, headers=signed_headers(secret, body, now)) as r:
        return r.status


async def test_a_signed_message_is_answered_signed_and_the_next_continues_the_session(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (receiver, url, client):
        model.enqueue(said("Hello from the agent."), said("Still me."))
        assert await post(client, url, {"chat": "room-1", "sender": "ann", "text": "hi"}) == 202
        await until(lambda: receiver.texts() == ["Hello from the agent."])
        assert any(p["type"] == "typing" for p in receiver.posts)
        assert await post(client, url, {"chat": "room-1", "sender": "ann", "text": "again"}) \
            == 202
        await until(lambda: "Still me." in receiver.texts())
        assert "Hello from the agent." in json.dumps(model.requests[-1])
    assert len(await store.load("webhook:room-1")) >= 4


async def test_a_bad_or_stale_signature_is_refused_and_starts_nothing(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (receiver, url, client):
        msg = {"chat": "room-1", "sender": "ann", "text": "hi"}
        assert await post(client, url, msg, secret="wrong") == 401
        assert await post(client, url, msg, now=time.time() - 3600) == 401
        async with client.post(url, json=msg) as r:  # no signature at all
            assert r.status == 401
        assert model.requests == [] and receiver.posts == []


async def test_an_approval_with_buttons_and_a_429_retried(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store, agent="shell") as (receiver, url, client):
        model.enqueue(said(calls=[("shell", {"command": "echo hooked"})]), said("Ran it."))
        await post(client, url, {"chat": "ops", "sender": "bob", "text": "run echo"})
        await until(lambda: receiver.texts("choice"))
        choice = next(p for p in receiver.posts if p["type"] == "choice")
        assert [c["label"] for c in choice["choices"]] == ["Approve", "Deny"]
        receiver.busy = 1
        await post(client, url, {"chat": "ops", "sender": "bob",
                                 "choice": choice["choices"][0]["data"]})
        await until(lambda: "Ran it." in receiver.texts())
        assert receiver.refused == 1 and "hooked" in json.dumps(model.requests[-1])


async def test_ask_human_is_answered_by_a_signed_post(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (receiver, url, client):
        model.enqueue(said(calls=[("ask_human", {"question": "Which size?"})]),
                      said("Ordering size M."))
        await post(client, url, {"chat": "shop", "sender": "cy", "text": "order a shirt"})
        await until(lambda: "Which size?" in receiver.texts())
        await post(client, url, {"chat": "shop", "sender": "cy", "text": "M"})
        await until(lambda: "Ordering size M." in receiver.texts())
        assert "The user answered: M" in json.dumps(model.requests[-1])


TEAM = """
agents:
  front:
    description: Talks to customers first
    model: openai:fake
    tools: none
    memory: false
    team: [billing]
  billing:
    description: Invoices, refunds and payments
    model: openai:fake
    tools: none
    memory: false
"""


async def test_a_chat_handed_to_a_teammate_is_answered_by_it_next(
        model: OpenAIServer, home: Path, store: Any) -> None:
    (home / "agents.yaml").write_text(TEAM)
    async with serving(model, home, store, agent="front") as (receiver, url, client):
        model.enqueue(said(calls=[("handoff", {"to": "billing", "reason": "a refund"})]),
                      said("Billing takes over."), said("Your refund is on its way."))
        await post(client, url, {"chat": "desk", "sender": "ann", "text": "refund please"})
        await until(lambda: "Billing takes over." in receiver.texts())
        assert "agent=front" in json.dumps(model.requests[0])
        await post(client, url, {"chat": "desk", "sender": "ann", "text": "when?"})
        await until(lambda: "Your refund is on its way." in receiver.texts())
        last = json.dumps(model.requests[-1])
        assert "agent=billing" in last and "refund please" in last
    moved = await store.handoff("webhook:desk")
    assert moved is not None and (moved.agent, moved.from_agent) == ("billing", "front")
