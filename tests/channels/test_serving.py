"""Channels as a user starts them: ``thinkloop channel telegram`` (a real process) and
``thinkloop serve --channel telegram`` (inside the gateway, sharing its store)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.channels.conftest import env_for, until
from tests.channels.telegram_api import BotAPI

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

SRC = str(Path(__file__).resolve().parents[2] / "src")


async def _cli(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    full = {**os.environ, **env, "PYTHONPATH": SRC}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "thinkloop", *args, env=full,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def test_thinkloop_channel_telegram_answers_and_records_the_run(
        model: OpenAIServer, home: Path) -> None:
    api = BotAPI()
    url = await api.start()
    env = env_for(model, home, api_url=f"{url}/bot", poll_timeout_s="1")
    env["TELEGRAM_BOT_TOKEN"] = api.token
    proc = await _cli(env, "channel", "telegram", "--agents", str(home / "agents.yaml"))
    try:
        model.enqueue(Reply(body=completion("Hi from the CLI.")))
        await api.wait_for(lambda: api.sent("getUpdates") or len(api.calls) >= 2, 30)
        api.message(42, 7, "hello")
        await api.wait_for(lambda: "Hi from the CLI." in api.texts(42), 30)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 20)
        await api.stop()
        model.clear()
    assert proc.returncode == 0, err.decode()
    assert api.token not in err.decode()  # the token is never printed
    runs = await _cli(env, "runs", "--json")
    out, _ = await runs.communicate()
    assert b"telegram:42" in out  # the run is in the store: `thinkloop runs` lists it


async def test_a_wrong_token_stops_the_command_with_one_clear_line(
        model: OpenAIServer, home: Path) -> None:
    api = BotAPI()
    url = await api.start()
    env = env_for(model, home, api_url=f"{url}/bot")
    env["TELEGRAM_BOT_TOKEN"] = "1:definitely-wrong-secret"
    proc = await _cli(env, "channel", "telegram")
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    await api.stop()
    text = err.decode().strip()
    assert proc.returncode == 2
    assert text.splitlines() == [
        "error: telegram refused the bot token (TELEGRAM_BOT_TOKEN): check it with "
        "@BotFather"], text
    assert "definitely-wrong-secret" not in text


async def test_the_gateway_serves_a_channel_with_its_own_store(
        model: OpenAIServer, home: Path, store: Any) -> None:
    from thinkloop.channels.service import gateway_service
    from thinkloop.server import GatewayConfig, create_app
    from thinkloop.settings import load_settings

    api = BotAPI()
    url = await api.start()
    env = env_for(model, home, api_url=f"{url}/bot", poll_timeout_s="1")
    env["TELEGRAM_BOT_TOKEN"] = api.token
    settings = load_settings(env=env, cwd=home)
    agents = home / "agents.yaml"
    app = create_app(GatewayConfig(agents_file=agents), store=store, settings=settings,
                     services=[gateway_service(["telegram"], agents)])
    try:
        async with app.router.lifespan_context(app):
            model.enqueue(Reply(body=completion("Served by the gateway.")))
            api.message(42, 7, "hello")
            await api.wait_for(lambda: "Served by the gateway." in api.texts(42))
            gateway = app.state.gateway
            await api.wait_for(lambda: len(gateway.runs) == 0)
    finally:
        await api.stop()
        model.clear()
    runs = await store.list_runs(None, None, 10)
    assert [r.session_id for r in runs] == ["telegram:42"]


async def test_in_webhook_mode_telegram_posts_updates_to_the_gateway(
        model: OpenAIServer, home: Path, store: Any) -> None:
    import socket

    import uvicorn

    from thinkloop.channels.service import gateway_service
    from thinkloop.server import GatewayConfig, create_app
    from thinkloop.settings import load_settings

    api = BotAPI()
    url = await api.start()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    hook = f"http://127.0.0.1:{port}/v1/channels/telegram/webhook"
    env = env_for(model, home, api_url=f"{url}/bot", mode="webhook", webhook_url=hook,
                  webhook_secret="hook-secret")
    env["TELEGRAM_BOT_TOKEN"] = api.token
    agents = home / "agents.yaml"
    app = create_app(GatewayConfig(agents_file=agents), store=store,
                     settings=load_settings(env=env, cwd=home),
                     services=[gateway_service(["telegram"], agents)])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        await until(lambda: server.started, 20)
        assert api.sent("setWebhook")[0].params["url"] == hook
        assert api.sent("getUpdates") == []  # no polling in webhook mode
        model.enqueue(Reply(body=completion("Hooked in.")))
        update = api.message(42, 7, "hello")
        assert await api.post_webhook(update, secret="wrong") == 401
        assert await api.post_webhook(update) == 200
        await api.wait_for(lambda: api.texts(42) == ["Hooked in."])
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 20)
        sock.close()
        await api.stop()
        model.clear()


async def test_webhook_mode_outside_the_gateway_says_where_to_serve_it(
        model: OpenAIServer, home: Path) -> None:
    env = env_for(model, home, mode="webhook")
    env["TELEGRAM_BOT_TOKEN"] = "1:x"
    proc = await _cli(env, "channel", "telegram")
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert "thinkloop serve --channel telegram" in err.decode()


def _slack_signed(secret: str, body: bytes) -> dict[str, str]:
    """Headers as Slack signs an Events API request (v0 HMAC-SHA256 of "v0:<ts>:<body>")."""
    import hashlib
    import hmac
    import time

    ts = str(int(time.time()))
    mac = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={mac}",
            "Content-Type": "application/json"}


async def test_slack_events_api_behind_the_gateway(
        model: OpenAIServer, home: Path, store: Any) -> None:
    import json
    import socket

    import aiohttp
    import uvicorn
    from tests.channels.slack_api import BOT_TOKEN, SlackAPI

    from thinkloop.channels.service import gateway_service
    from thinkloop.server import GatewayConfig, create_app
    from thinkloop.settings import load_settings

    api = SlackAPI()
    url = await api.start()
    env = {**env_for(model, home), "SLACK_BOT_TOKEN": BOT_TOKEN,
           "SLACK_SIGNING_SECRET": "sign-me", "THINKLOOP_CHANNELS_SLACK_MODE": "events",
           "THINKLOOP_CHANNELS_SLACK_API_URL": f"{url}/api/"}
    agents = home / "agents.yaml"
    app = create_app(GatewayConfig(agents_file=agents), store=store,
                     settings=load_settings(env=env, cwd=home),
                     services=[gateway_service(["slack"], agents)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    hook = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/channels/slack/webhook"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        await until(lambda: server.started, 20)
        model.enqueue(Reply(body=completion("Hello over HTTP.")))
        check = json.dumps({"type": "url_verification", "challenge": "abc"}).encode()
        event = json.dumps({"type": "event_callback", "event_id": "Ev1", "event": {
            "type": "message", "channel": "D5", "channel_type": "im", "user": "U7",
            "text": "hi", "ts": "1700000000.000100"}}).encode()
        async with aiohttp.ClientSession() as http:
            async with http.post(hook, data=check, headers=_slack_signed("sign-me", check)) as r:
                assert (r.status, await r.json()) == (200, {"challenge": "abc"})
            async with http.post(hook, data=event, headers=_slack_signed("wrong", event)) as r:
                assert r.status == 401
            async with http.post(hook, data=event, headers=_slack_signed("sign-me", event)) as r:
                assert r.status == 200
        await until(lambda: api.texts("D5") == ["Hello over HTTP."], what=lambda: api.calls)
        assert not any(c.method == "apps.connections.open" for c in api.calls)
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 20)
        sock.close()
        await api.stop()
        model.clear()


async def test_serve_with_a_refused_token_says_so_in_one_line(
        model: OpenAIServer, home: Path) -> None:
    api = BotAPI()
    url = await api.start()
    env = env_for(model, home, api_url=f"{url}/bot")
    env["TELEGRAM_BOT_TOKEN"] = "1:definitely-wrong-secret"
    proc = await _cli(env, "serve", "--no-auth", "--port", "0", "--channel", "telegram")
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    await api.stop()
    text = err.decode().strip()
    assert proc.returncode == 2, text
    assert "Traceback" not in text and "definitely-wrong-secret" not in text
    assert text.splitlines()[-1] == (
        "error: telegram refused the bot token (TELEGRAM_BOT_TOKEN): check it with "
        "@BotFather"), text
    assert len(text.splitlines()) == 2, text  # "thinkloop gateway on ..." and the error


async def test_a_rest_abort_ends_a_telegram_run_and_the_chat_is_told(
        model: OpenAIServer, home: Path, store: Any) -> None:
    import socket

    import aiohttp
    import uvicorn

    from thinkloop.channels.service import gateway_service
    from thinkloop.server import GatewayConfig, create_app
    from thinkloop.settings import load_settings

    api = BotAPI()
    url = await api.start()
    env = env_for(model, home, api_url=f"{url}/bot", poll_timeout_s="1")
    env["TELEGRAM_BOT_TOKEN"] = api.token
    agents = home / "agents.yaml"
    app = create_app(GatewayConfig(agents_file=agents, no_auth=True), store=store,
                     settings=load_settings(env=env, cwd=home),
                     services=[gateway_service(["telegram"], agents)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        await until(lambda: server.started, 20)
        model.enqueue(Reply(body=completion(None, [("ask_human", {"question": "There?"})])))
        api.message(42, 7, "wait for me")
        await api.wait_for(lambda: "There?" in api.texts(42))
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/runs") as r:  # what the page lists
                [listed] = [x for x in (await r.json())["runs"] if x["status"] == "running"]
            assert listed["session"] == "telegram:42"
            async with http.get(f"{base}/runs/{listed['id']}") as r:
                assert (await r.json())["status"] == "running"
            token = {"X-Thinkloop-Token": app.state.token_file.read_text()}  # --no-auth's
            async with http.post(f"{base}/runs/{listed['id']}/abort", headers=token) as r:
                assert r.status == 202, await r.text()
            await api.wait_for(lambda: any("cancelled" in t for t in api.texts(42)), 20)
            async with http.get(f"{base}/runs/{listed['id']}") as r:
                view = await r.json()
        assert view["status"] == "cancelled"
        assert view["events"] > 0  # its events were numbered for the page as they came
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 20)
        sock.close()
        await api.stop()
        model.clear()


async def test_missions_are_kept_in_the_store_and_edited_through_the_gateway(
        model: OpenAIServer, home: Path, store: Any) -> None:
    import socket

    import aiohttp
    import uvicorn

    from thinkloop.channels.service import gateway_service
    from thinkloop.server import GatewayConfig, create_app
    from thinkloop.settings import load_settings

    api = BotAPI()
    url = await api.start()
    default = {"43": {"instructions": "You are the book club's bot."}}
    env = env_for(model, home, api_url=f"{url}/bot", poll_timeout_s="1", missions=default)
    env["TELEGRAM_BOT_TOKEN"] = api.token
    agents = home / "agents.yaml"
    app = create_app(GatewayConfig(agents_file=agents, no_auth=True), store=store,
                     settings=load_settings(env=env, cwd=home),
                     services=[gateway_service(["telegram"], agents)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/channels/telegram/missions"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))

    def system(i: int) -> str:
        return str(model.requests[i]["messages"][0]["content"])

    try:
        await until(lambda: server.started, 20)
        token = {"X-Thinkloop-Token": app.state.token_file.read_text()}  # --no-auth's
        async with aiohttp.ClientSession(headers=token) as http:
            chess = {"instructions": "You are the chess club's bot.", "tools": ["calculator"]}
            async with http.put(f"{base}/42", json=chess) as r:
                assert r.status == 200, await r.text()
            async with http.put(f"{base}/42", json={"mission": "x"}) as r:
                assert r.status in (400, 422)  # one clear error, nothing stored
            async with http.get(base) as r:
                listed = (await r.json())["missions"]
            assert listed["42"]["source"] == "store" and listed["43"]["source"] == "settings"
            model.enqueue(Reply(body=completion("Chess it is.")),
                          Reply(body=completion("Books it is.")))
            api.message(42, 7, "hello")
            await api.wait_for(lambda: "Chess it is." in api.texts(42))
            api.message(43, 7, "hello")
            await api.wait_for(lambda: "Books it is." in api.texts(43))
            assert "chess club" in system(0) and "book club" in system(1)
            assert {t["function"]["name"] for t in model.requests[0]["tools"]} == \
                {"calculator", "send_voice"}
            async with http.delete(f"{base}/42") as r:
                assert r.status == 200
            model.enqueue(Reply(body=completion("Plain again.")))
            api.message(42, 7, "hello again")
            await api.wait_for(lambda: "Plain again." in api.texts(42))
            assert "chess club" not in system(-1)
            async with http.get(base.replace("telegram", "slack")) as r:
                assert r.status == 404
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 20)
        sock.close()
        await api.stop()
        model.clear()
    # Kept in the store (the profile table), where a restarted gateway finds it.
    assert await store.profile("channel-missions:telegram") == {"42": "null"}  # deleted
