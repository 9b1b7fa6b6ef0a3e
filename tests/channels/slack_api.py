"""A Slack stand-in on 127.0.0.1 speaking the real wire protocols: the Web API (``POST
/api/<method>``, form or JSON, ``{"ok": ...}`` answers, ``invalid_auth``, 429 with
``Retry-After``), the external file upload flow, private file downloads, and Socket Mode (a
WebSocket that sends ``hello`` and event envelopes, and takes the client's acks)."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

BOT_TOKEN, APP_TOKEN, BOT_USER = "xoxb-test-bot", "xapp-test-app", "UBOT"


@dataclass
class Call:
    method: str
    params: dict[str, Any]


class SlackAPI:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.refused: list[Call] = []  # answered 429
        self.acks: list[str] = []
        self.files: dict[str, bytes] = {}
        self.uploads: dict[str, bytes] = {}
        self.fail: dict[str, list[int]] = {}
        self._sockets: list[web.WebSocketResponse] = []
        self._ts = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application(client_max_size=20 * 1024 * 1024)
        app.router.add_post("/api/{method}", self._method)
        app.router.add_get("/link", self._socket)
        app.router.add_post("/upload/{file}", self._upload)
        app.router.add_get("/files/{file}", self._file)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        for ws in self._sockets:
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # --- what people do ------------------------------------------------------------------

    def ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    async def event(self, event: dict[str, Any]) -> None:
        await self._push("events_api", {"type": "event_callback", "team_id": "T1",
                                        "event": event})

    async def message(self, channel: str, user: str, text: str, *, im: bool = False,
                      thread: str | None = None, mention: bool = False,
                      files: list[dict[str, Any]] | None = None) -> str:
        ts = self.ts()
        base = {"channel": channel, "user": user, "ts": ts,
                "channel_type": "im" if im else "channel"}
        if thread:
            base["thread_ts"] = thread
        if files:
            base.update(subtype="file_share", files=files)
        body = f"<@{BOT_USER}> {text}" if mention else text
        await self.event({**base, "type": "message", "text": body})
        if mention:
            await self.event({**base, "type": "app_mention", "text": body})
        return ts

    def file(self, name: str, data: bytes) -> dict[str, Any]:
        fid = f"F{len(self.files) + 1}"
        self.files[fid] = data
        return {"id": fid, "name": name, "mimetype": "text/plain",
                "url_private_download": f"{self.url}/files/{fid}"}

    async def press(self, channel: str, user: str, value: str, thread: str | None) -> None:
        await self._push("interactive", {
            "type": "block_actions", "user": {"id": user}, "channel": {"id": channel},
            "message": {"ts": self.ts(), "thread_ts": thread},
            "actions": [{"action_id": "thinkloop_0", "value": value, "type": "button"}]})

    async def _push(self, kind: str, payload: dict[str, Any]) -> None:
        from tests.channels.conftest import until

        await until(lambda: bool(self._sockets))
        envelope = {"envelope_id": uuid.uuid4().hex, "type": kind, "payload": payload,
                    "accepts_response_payload": False, "retry_attempt": 0}
        await self._sockets[-1].send_str(json.dumps(envelope))

    # --- what the app did ----------------------------------------------------------------

    def posts(self, channel: str | None = None) -> list[dict[str, Any]]:
        return [c.params for c in self.calls if c.method == "chat.postMessage"
                and (channel is None or c.params.get("channel") == channel)]

    def texts(self, channel: str | None = None) -> list[str]:
        return [str(p.get("text")) for p in self.posts(channel)]

    # --- the wire ------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            return dict(await request.json())
        form = await request.post()
        return {k: v for k, v in form.items() if isinstance(v, str)}

    async def _method(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        want = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if token != want:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        pending = self.fail.get(method)
        if pending:
            retry = pending.pop(0)
            self.refused.append(Call(method, params))
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429,
                                     headers={"Retry-After": str(retry)})
        self.calls.append(Call(method, params))
        return web.json_response({"ok": True, **self._result(method, params)})

    def _result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"user_id": BOT_USER, "bot_id": "B1", "team_id": "T1", "user": "thinky"}
        if method == "apps.connections.open":
            return {"url": self.url.replace("http", "ws") + "/link"}
        if method == "chat.postMessage":
            return {"channel": params.get("channel"), "ts": self.ts(), "message": {}}
        if method == "files.getUploadURLExternal":
            fid = f"U{len(self.uploads) + 1}"
            return {"upload_url": f"{self.url}/upload/{fid}", "file_id": fid}
        if method == "files.completeUploadExternal":
            files = json.loads(params["files"]) if isinstance(params["files"], str) \
                else params["files"]
            return {"files": [{"id": f["id"]} for f in files]}
        return {}

    async def _upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        if request.content_type.startswith("multipart/"):
            form = await request.post()
            field = next(iter(form.values()))
            data = field.file.read() if isinstance(field, web.FileField) else str(field).encode()
        self.uploads[request.match_info["file"]] = data
        return web.Response(text="OK - uploaded")

    async def _file(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
            return web.Response(status=403)
        return web.Response(body=self.files[request.match_info["file"]])

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1}))
        self._sockets.append(ws)
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                data = json.loads(msg.data)
                if "envelope_id" in data:
                    self.acks.append(data["envelope_id"])
        return ws
