"""The channel contract: every chat platform through one suite, each against its wire-protocol
stand-in driven by its client library (python-telegram-bot, slack-sdk, discord.py; the
generic webhook against a receiver of its signed POSTs). The
seeds' policies (allow list, cross-chat sends, scheduled delivery, the message cap, the
transparency nudge) must hold the same on each; the refusals are visible to the sender."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.channels.conftest import env_for, until

from thinkloop.channels.service import ChannelService
from thinkloop.settings import load_settings
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

PLATFORMS = ["telegram", "slack", "discord", "webhook"]


@dataclass
class Chat:
    """One platform as the suite sees it: people write in chats, the bot's texts are read
    back from the stand-in's wire log."""

    platform: str
    service: ChannelService
    write: Callable[[str, str, str], Awaitable[Any]]  # (chat, user, text)
    read: Callable[[str], list[str]]
    home: str  # a chat id of this platform
    other: str  # another chat
    ann: str  # a user
    admin: str  # a user listed in admins

    async def says(self, text: str, user: str | None = None, chat: str | None = None) -> None:
        await self.write(chat or self.home, user or self.ann, text)

    def texts(self, chat: str | None = None) -> list[str]:
        return self.read(chat or self.home)

    async def sees(self, predicate: Callable[[list[str]], bool], chat: str | None = None) -> None:
        await until(lambda: predicate(self.texts(chat)), 20, lambda: self.texts(chat))


def said(text: str | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None) -> Reply:
    return Reply(body=completion(text, calls))


def _env(model: OpenAIServer, home: Path, platform: str, extra: dict[str, str],
         channel: dict[str, Any]) -> dict[str, str]:
    env = {**env_for(model, home), **extra}
    for key, value in channel.items():
        env[f"THINKLOOP_CHANNELS_{platform.upper()}_{key.upper()}"] = \
            value if isinstance(value, str) else json.dumps(value)
    return env


@asynccontextmanager
async def _stand_in(platform: str, box: dict[str, Any]
                    ) -> AsyncIterator[tuple[Any, dict[str, str], dict[str, Any]]]:
    """The stand-in, the environment pointing the adapter at it, and the Chat's fields
    (``box``: where the service will be, for a stand-in that needs to know its port)."""
    if platform == "webhook":
        async with _other_system(box) as found:
            yield found
    elif platform == "telegram":
        from tests.channels.telegram_api import BotAPI

        tg = BotAPI()
        url = await tg.start()
        try:
            yield tg, {"TELEGRAM_BOT_TOKEN": tg.token,
                       "THINKLOOP_CHANNELS_TELEGRAM_API_URL": f"{url}/bot",
                       "THINKLOOP_CHANNELS_TELEGRAM_POLL_TIMEOUT_S": "1"}, dict(
                write=_sync(lambda c, u, t: tg.message(int(c), int(u), t)),
                read=lambda c: tg.texts(int(c)), home="42", other="555", ann="7", admin="1")
        finally:
            await tg.stop()
    elif platform == "slack":
        from tests.channels.slack_api import APP_TOKEN, BOT_TOKEN, SlackAPI

        sl = SlackAPI()
        url = await sl.start()
        try:
            yield sl, {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN,
                       "THINKLOOP_CHANNELS_SLACK_API_URL": f"{url}/api/"}, dict(
                write=lambda c, u, t: sl.message(c, u, t, im=True), read=sl.texts,
                home="D42", other="C555", ann="U7", admin="U1")
        finally:
            await sl.stop()
    else:
        from tests.channels.discord_api import TOKEN, DiscordAPI

        dc = DiscordAPI()
        url = await dc.start()
        try:
            yield dc, {"DISCORD_BOT_TOKEN": TOKEN,
                       "THINKLOOP_CHANNELS_DISCORD_API_URL": f"{url}/api/v10",
                       "THINKLOOP_CHANNELS_DISCORD_CONNECT_TIMEOUT_S": "15"}, dict(
                write=dc.message, read=dc.texts, home="42", other="555", ann="7", admin="1")
        finally:
            await dc.stop()


@asynccontextmanager
async def _other_system(box: dict[str, Any]
                        ) -> AsyncIterator[tuple[Any, dict[str, str], dict[str, Any]]]:
    """The generic webhook's other system: signed POSTs in, a receiver of signed POSTs."""
    import aiohttp
    from aiohttp import web
    from tests.channels.test_webhook import SECRET, Receiver

    from thinkloop.channels.webhook import signed_headers

    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/hook", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    async with aiohttp.ClientSession() as client:
        async def write(chat: str, user: str, text: str) -> None:
            inbound = box["service"].channels["webhook"][0].port
            body = json.dumps({"chat": chat, "sender": user, "text": text}).encode()
            async with client.post(f"http://127.0.0.1:{inbound}/messages", data=body,
                                   headers=signed_headers(SECRET, body)) as r:
                assert r.status == 202

        def read(chat: str) -> list[str]:
            return [p["text"] for p in receiver.posts
                    if p["type"] == "message" and p["chat"] == chat]

        try:
            yield receiver, {"THINKLOOP_CHANNELS_WEBHOOK_URL": f"http://127.0.0.1:{port}/hook",
                             "THINKLOOP_CHANNELS_WEBHOOK_SECRET": SECRET,
                             "THINKLOOP_CHANNELS_WEBHOOK_PORT": "0"}, dict(
                write=write, read=read, home="room-1", other="room-9", ann="ann",
                admin="boss")
        finally:
            await runner.cleanup()


def _sync(fn: Callable[[str, str, str], Any]) -> Callable[[str, str, str], Awaitable[Any]]:
    async def write(chat: str, user: str, text: str) -> Any:
        return fn(chat, user, text)

    return write


@asynccontextmanager
async def serving(platform: str, model: OpenAIServer, home: Path, store: Any,
                  **channel: Any) -> AsyncIterator[Chat]:
    box: dict[str, Any] = {}
    async with _stand_in(platform, box) as (_, extra, fields):
        settings = load_settings(env=_env(model, home, platform, extra, channel), cwd=home)
        service = box["service"] = ChannelService(settings, store, [platform],
                                                  agents_file=home / "agents.yaml")
        try:
            await service.start()
            yield Chat(platform, service, **fields)
        finally:
            await service.stop()
            model.clear()


@pytest.fixture(params=PLATFORMS)
def platform(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def request_text(model: OpenAIServer, index: int = -1) -> str:
    return json.dumps(model.requests[index])


async def test_a_sender_off_the_allow_list_is_told_and_no_run_starts(
        platform: str, model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(platform, model, home, store, allow_users=["someone-else"]) as chat:
        await chat.says("let me in")
        await chat.sees(lambda t: any("allow list" in x for x in t))
        assert f"id {chat.ann}" in chat.texts()[0]
        assert model.requests == []


async def test_a_send_to_another_chat_is_refused_unless_an_admin_started_the_run(
        platform: str, model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(platform, model, home, store, admins=["U1", "1", "boss"]) as chat:
        send = ("send_message", {"text": "psst", "recipient": f"{platform}:{chat.other}"})
        model.enqueue(said(calls=[send]), *[said("I could not send it.")] * 3)
        await chat.says("tell the other chat psst")
        await chat.sees(lambda t: "I could not send it." in t)
        assert chat.texts(chat.other) == []
        assert any("Refused" in t and f"{platform}:{chat.other}" in t for t in chat.texts())
        assert "send refused" in request_text(model)
        model.clear()
        model.enqueue(said(calls=[send]), said("Sent."))
        await chat.says("tell the other chat psst", user=chat.admin)
        await chat.sees(lambda t: "Sent." in t)
        assert chat.texts(chat.other) == ["psst"]


async def test_a_scheduled_run_delivers_only_where_its_schedule_says(
        platform: str, model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(platform, model, home, store) as chat:
        model.enqueue(said(calls=[("send_message", {"text": "x", "recipient": chat.other})]),
                      *[said("Daily report: all good.")] * 3)
        await chat.service.hub.start_scheduled(platform, "daily report", [chat.home])
        await chat.sees(lambda t: "Daily report: all good." in t)
        await chat.service.hub.idle()
        assert chat.texts(chat.other) == []
        assert "scheduled run delivers only where its schedule says" in request_text(model)


async def test_at_most_n_messages_per_run_and_the_sender_sees_the_refusal(
        platform: str, model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(platform, model, home, store, max_messages="2") as chat:
        calls = [("send_message", {"text": f"update {i}"}) for i in range(3)]
        model.enqueue(said(calls=calls), *[said("Finished.")] * 3)
        await chat.says("work")
        await chat.sees(lambda t: "Finished." in t)
        texts = chat.texts()
        assert "update 0" in texts and "update 1" in texts and "update 2" not in texts
        assert any("Refused" in t and "more than 2 messages" in t for t in texts)
        # The message guard itself caps at the channel's 2 (not its own default of 10).
        assert "Message limit reached: at most 2 messages" in request_text(model)


async def test_the_channel_cap_above_the_guards_default_is_the_only_cap(
        platform: str, model: OpenAIServer, home: Path, store: Any) -> None:
    fast = {"chat_rate_per_s": "200"} if platform == "telegram" else {}  # 1 a second there
    async with serving(platform, model, home, store, max_messages="12", **fast) as chat:
        calls = [("send_message", {"text": f"note {i}"}) for i in range(11)]
        model.enqueue(said(calls=calls), said("All noted."))
        await chat.says("take notes")
        await chat.sees(lambda t: "All noted." in t)
        notes = sorted(t for t in chat.texts() if t.startswith("note "))  # (sent in parallel)
        assert notes == sorted(f"note {i}" for i in range(11))
        assert "Message limit reached" not in request_text(model)


async def test_the_transparency_nudge_comes_after_the_channels_silent_steps(
        platform: str, model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(platform, model, home, store, transparency_after="2") as chat:
        steps = [said(calls=[("calculator", {"expression": f"{i}+1"})]) for i in range(2)]
        model.enqueue(*steps, said("Sums done."))
        await chat.says("add things")
        await chat.sees(lambda t: "Sums done." in t)
        assert "TRANSPARENCY" not in request_text(model, -2)
        assert "TRANSPARENCY ALERT: You have been working for 2 steps" in request_text(model)
