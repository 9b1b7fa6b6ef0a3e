"""A Discord stand-in on 127.0.0.1 speaking the real protocols: REST under ``/api/v10``
(``Authorization: Bot <token>``, 401 for a wrong one, 429 with ``retry_after``), and the
gateway WebSocket (HELLO, IDENTIFY -> READY, heartbeats acknowledged, dispatched events)."""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

TOKEN = "discord-test-token"
BOT = {"id": "999", "username": "thinky", "discriminator": "0", "avatar": None,
       "global_name": "Thinky", "bot": True}
STAMP = "2026-11-26T12:00:00.000000+00:00"


@dataclass
class Call:
    method: str
    path: str
    body: dict[str, Any]


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """JSON as Discord sends it: ``Content-Type: application/json`` exactly (no charset),
    which is what discord.py checks before it parses a body."""
    return web.Response(body=json.dumps(data).encode(), status=status,
                        headers={**(headers or {}), "Content-Type": "application/json"})


class DiscordAPI:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.refused: list[Call] = []
        self.fail: dict[str, list[float]] = {}  # "POST messages" -> retry_after of next 429s
        self.files: dict[str, bytes] = {}
        self.identified = asyncio.Event()
        self._ws: web.WebSocketResponse | None = None
        self._seq = itertools.count(2)
        self._ids = itertools.count(1000)
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application(client_max_size=20 * 1024 * 1024)
        app.router.add_get("/gw", self._gateway)
        app.router.add_get("/cdn/{name}", self._file)
        app.router.add_route("*", "/api/v10/{path:.+}", self._rest)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # --- what people do ------------------------------------------------------------------

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        await self.identified.wait()
        assert self._ws is not None
        await self._ws.send_str(json.dumps({"op": 0, "t": event, "s": next(self._seq),
                                            "d": data}))

    async def message(self, channel: str, user: str, content: str, *, guild: str | None = None,
                      mention: bool = False, files: dict[str, bytes] | None = None) -> None:
        attachments = []
        for name, data in (files or {}).items():
            self.files[name] = data
            attachments.append({"id": str(next(self._ids)), "filename": name, "size": len(data),
                                "url": f"{self.url}/cdn/{name}",
                                "proxy_url": f"{self.url}/cdn/{name}",
                                "content_type": "text/plain"})
        data: dict[str, Any] = {
            "id": str(next(self._ids)), "channel_id": channel, "type": 0, "tts": False,
            "author": {"id": user, "username": f"user{user}", "discriminator": "0",
                       "avatar": None, "global_name": f"User {user}"},
            "content": f"<@{BOT['id']}> {content}" if mention else content,
            "timestamp": STAMP, "edited_timestamp": None, "mention_everyone": False,
            "mentions": [BOT] if mention else [], "mention_roles": [], "embeds": [],
            "attachments": attachments, "pinned": False}
        if guild:
            data["guild_id"] = guild
        await self.dispatch("MESSAGE_CREATE", data)

    async def press(self, channel: str, user: str, custom_id: str) -> None:
        await self.dispatch("INTERACTION_CREATE", {
            "id": str(next(self._ids)), "application_id": "555", "type": 3, "token": "itok",
            "version": 1, "channel_id": channel, "channel": {"id": channel, "type": 1},
            "attachment_size_limit": 10 * 1024 * 1024,
            "app_permissions": "0", "locale": "en-US", "entitlements": [],
            "authorizing_integration_owners": {"1": "7"}, "context": 1,
            "user": {"id": user, "username": f"user{user}", "discriminator": "0",
                     "avatar": None},
            "data": {"custom_id": custom_id, "component_type": 2}})

    # --- what the bot did ----------------------------------------------------------------

    def sent(self, channel: str) -> list[dict[str, Any]]:
        return [c.body for c in self.calls
                if c.method == "POST" and c.path == f"channels/{channel}/messages"]

    def texts(self, channel: str) -> list[str]:
        return [str(b.get("content")) for b in self.sent(channel)]

    # --- the wire ------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bot {TOKEN}":
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        path = request.match_info["path"]
        body: dict[str, Any] = {}
        if request.content_type == "application/json":
            body = await request.json()
        elif request.content_type.startswith("multipart/"):
            form = await request.post()
            body = json.loads(str(form.get("payload_json") or "{}"))
            body["_files"] = [k for k in form if k != "payload_json"]
        call = Call(request.method, path, body)
        kind = f"{request.method} {path.rpartition('/')[2]}"
        if self.fail.get(kind):
            retry = self.fail[kind].pop(0)
            self.refused.append(call)
            return _json(
                {"message": "You are being rate limited.", "retry_after": retry,
                 "global": False}, status=429,
                # Discord's 429s come through its proxy (Via); discord.py treats one without
                # Via as a Cloudflare ban and does not retry it.
                headers={"Retry-After": str(retry), "X-RateLimit-Scope": "user",
                         "Via": "1.1 google"})
        self.calls.append(call)
        if path == "users/@me":
            return _json(BOT)
        if path == "oauth2/applications/@me":
            owner = {"id": "1", "username": "owner", "discriminator": "0", "avatar": None}
            return _json({"id": "555", "name": "thinky", "description": "", "icon": None,
                          "rpc_origins": [], "bot_public": True, "flags": 0,
                          "bot_require_code_grant": False, "owner": owner,
                          "verify_key": "00", "summary": ""})
        if path == "gateway/bot":
            return _json({"url": self.url.replace("http", "ws") + "/gw",
                                      "shards": 1, "session_start_limit": {
                                          "total": 1000, "remaining": 999,
                                          "reset_after": 0, "max_concurrency": 1}})
        if path.endswith("/messages") and request.method == "POST":
            channel = path.split("/")[1]
            return _json({
                "id": str(next(self._ids)), "channel_id": channel, "type": 0,
                "author": BOT, "content": body.get("content") or "", "timestamp": STAMP,
                "edited_timestamp": None, "tts": False, "mention_everyone": False,
                "mentions": [], "mention_roles": [], "embeds": [], "attachments": [],
                "pinned": False})
        return web.Response(status=204)

    async def _file(self, request: web.Request) -> web.Response:
        return web.Response(body=self.files[request.match_info["name"]])

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._ws = ws
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}}))
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            if data["op"] == 1:
                await ws.send_str(json.dumps({"op": 11}))
            elif data["op"] == 2:
                assert data["d"]["token"] == TOKEN
                await ws.send_str(json.dumps({"op": 0, "t": "READY", "s": 1, "d": {
                    "v": 10, "user": BOT, "guilds": [], "session_id": "sess1",
                    "resume_gateway_url": self.url.replace("http", "ws") + "/gw",
                    "shard": [0, 1], "application": {"id": "555", "flags": 0}}}))
                self.identified.set()
        return ws
