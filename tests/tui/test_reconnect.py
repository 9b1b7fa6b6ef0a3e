"""A gateway that goes away and comes back: the app says so in a banner, keeps running, and
picks up again on the same port and store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.tui.conftest import Gateway, running, say, shot, until

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.tui.app import ThinkloopApp
from thinkloop.tui.remote import GatewayBackend
from thinkloop.tui.widgets import Banner, Turn


@pytest.fixture
def own_gateway(tmp_path: Path, model_server: OpenAIServer, agents_file: Path
                ) -> Iterator[Gateway]:
    gw = Gateway(tmp_path, agents_file)
    gw.start()
    yield gw
    gw.stop()


def turns(app: ThinkloopApp) -> list[Turn]:
    return list(app.screen.query(Turn))


async def test_the_app_survives_the_gateway_going_away(
        own_gateway: Gateway, model_server: OpenAIServer, tmp_path: Path) -> None:
    model_server.clear()
    gw = own_gateway
    app = ThinkloopApp(GatewayBackend(gw.url, gw.key("rae")), agent="helper", session="s1")
    async with running(app) as pilot:
        banner = app.screen.query_one(Banner)
        model_server.enqueue(Reply(body=completion("First answer, before the outage.")),
                             Reply(body=completion("never sent"), delay_s=5))
        await say(pilot, "hello")
        await until(pilot, lambda: bool(turns(app)) and "completed" in turns(app)[0].classes)
        assert not banner.display

        await say(pilot, "a long one")  # in progress when the gateway goes
        await until(pilot, lambda: len(turns(app)) == 2)
        await asyncio.to_thread(gw.stop)
        await until(pilot, lambda: banner.display, timeout_s=10)
        text = shot(app, tmp_path, "gateway-away")
        assert f"cannot reach gateway · {gw.url}" in text
        await say(pilot, "/tools")  # a call while it is away: one line, the app goes on
        await until(pilot, lambda: "unreachable" in shot(app, tmp_path, "away-call"))
        assert app.is_running

        await asyncio.to_thread(gw.start)  # back, same port, same store (keys, sessions)
        await until(pilot, lambda: not banner.display, timeout_s=10)
        # The run that was going died with its gateway: the turn says so, once it is back.
        await until(pilot, lambda: {"lost", "cancelled"} & set(turns(app)[1].classes),
                    timeout_s=10)
        model_server.clear()
        model_server.enqueue(Reply(body=completion("Second answer, after it came back.")))
        await say(pilot, "again")
        await until(pilot, lambda: len(turns(app)) == 3 and "completed" in turns(app)[2].classes)
        assert "Second answer, after it came back." in shot(app, tmp_path, "reconnected")
    said = [m.get("content") for m in model_server.requests[-1]["messages"]]
    assert "hello" in said and "First answer, before the outage." in said
