"""A Telegram Bot API stand-in on 127.0.0.1 that speaks the real wire protocol: methods at
``/bot<token>/<method>`` with form, JSON or multipart parameters, ``{"ok": ..., "result":
...}`` answers, long-polled ``getUpdates``, files at ``/file/bot<token>/<path>``, 401 for a
wrong token and 429 with ``parameters.retry_after`` when a test asks for one."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

BOT = {"id": 999, "is_bot": True, "first_name": "Thinky", "username": "thinky_bot",
       "can_join_groups": True, "can_read_all_group_messages": False,
       "supports_inline_queries": False}


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)  # when it arrived


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


class BotAPI:
    def __init__(self, token: str = "123456:TEST-token") -> None:
        self.token = token
        self.calls: list[Call] = []
        self.updates: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}
        self.fail: dict[str, list[int]] = {}  # method -> retry_after of the next 429s
        self._ids = itertools.count(1)
        self._messages = itertools.count(100)
        self._new = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application(client_max_size=20 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._method)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # --- what people do ---------------------------------------------------------------------

    def _push(self, update: dict[str, Any]) -> dict[str, Any]:
        update["update_id"] = next(self._ids)
        self.updates.append(update)
        self._new.set()
        return update

    def message(self, chat: int, user: int, text: str = "", *, chat_type: str = "private",
                **extra: Any) -> dict[str, Any]:
        msg = {"message_id": next(self._messages), "date": int(time.time()),
               "chat": {"id": chat, "type": chat_type},
               "from": {"id": user, "is_bot": False, "first_name": f"User{user}"}, **extra}
        if text:
            msg["text"] = text
        return self._push({"message": msg})

    def document(self, chat: int, user: int, name: str, data: bytes, caption: str = "",
                 mime: str = "text/plain") -> dict[str, Any]:
        file_id = f"doc{len(self.files)}"
        self.files[file_id] = data
        doc = {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_name": name,
               "mime_type": mime, "file_size": len(data)}
        return self.message(chat, user, caption=caption, document=doc)

    def press(self, chat: int, user: int, data: str) -> dict[str, Any]:
        message = {"message_id": next(self._messages), "date": int(time.time()),
                   "chat": {"id": chat, "type": "private"}, "from": BOT, "text": "buttons"}
        return self._push({"callback_query": {
            "id": f"cq{len(self.updates)}", "chat_instance": "ci", "data": data,
            "from": {"id": user, "is_bot": False, "first_name": f"User{user}"},
            "message": message}})

    async def post_webhook(self, update: dict[str, Any], secret: str | None = None) -> int:
        """Deliver ``update`` the way Telegram does to a bot in webhook mode: a POST to the URL
        of its setWebhook, with its secret token in X-Telegram-Bot-Api-Secret-Token."""
        import aiohttp

        hook = self.sent("setWebhook")[-1].params
        token = hook.get("secret_token", "") if secret is None else secret
        async with aiohttp.ClientSession() as http, http.post(
                hook["url"], json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": token}) as r:
            return r.status

    # --- what the bot did ----------------------------------------------------------------

    def sent(self, method: str = "sendMessage", chat: int | None = None) -> list[Call]:
        return [c for c in self.calls if c.method == method
                and (chat is None or str(c.params.get("chat_id")) == str(chat))]

    def texts(self, chat: int | None = None) -> list[str]:
        return [str(c.params.get("text")) for c in self.sent("sendMessage", chat)]

    async def wait_for(self, predicate: Any, timeout_s: float = 15.0) -> None:
        from tests.channels.conftest import until

        await until(predicate, timeout_s,
                    lambda: [(c.method, c.params) for c in self.calls][-12:])

    # --- the wire --------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> tuple[dict[str, Any], dict[str, bytes]]:
        params: dict[str, Any] = dict(request.query)
        files: dict[str, bytes] = {}
        if request.content_type == "application/json":
            params.update(await request.json())
        elif request.can_read_body:
            form = await request.post()
            for key, value in form.items():
                if isinstance(value, web.FileField):
                    files[key] = value.file.read()
                else:
                    params[key] = _value(str(value))
        return params, files

    @staticmethod
    def _ok(result: Any) -> web.Response:
        return web.json_response({"ok": True, "result": result})

    async def _method(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401,
                                      "description": "Unauthorized"}, status=401)
        method = request.match_info["method"]
        params, files = await self._params(request)
        if method == "getUpdates":
            return self._ok(await self._get_updates(params))
        self.calls.append(Call(method, params, files))
        pending = self.fail.get(method)
        if pending:
            retry = pending.pop(0)
            return web.json_response({
                "ok": False, "error_code": 429, "parameters": {"retry_after": retry},
                "description": f"Too Many Requests: retry after {retry}"}, status=429)
        return self._ok(self._result(method, params))

    def _result(self, method: str, params: dict[str, Any]) -> Any:
        if method == "getMe":
            return BOT
        if method in ("sendMessage", "sendVoice"):
            out = {"message_id": next(self._messages), "date": int(time.time()),
                   "chat": {"id": int(params["chat_id"]), "type": "private"}, "from": BOT}
            if method == "sendMessage":
                out["text"] = params.get("text", "")
            else:
                out["voice"] = {"file_id": "v1", "file_unique_id": "v1", "duration": 1}
            return out
        if method == "getFile":
            fid = params["file_id"]
            return {"file_id": fid, "file_unique_id": f"u{fid}",
                    "file_size": len(self.files[fid]), "file_path": f"documents/{fid}"}
        return True  # sendChatAction, answerCallbackQuery, deleteWebhook, setWebhook, ...

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        while True:
            ready = [u for u in self.updates if u["update_id"] >= offset]
            left = deadline - time.monotonic()
            if ready or left <= 0:
                return ready
            self._new.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._new.wait(), left)

    async def _file(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        fid = request.match_info["path"].rpartition("/")[2]
        return web.Response(body=self.files[fid])
