"""The generic webhook channel, both ways and HMAC-signed: another system POSTs people's
messages to ``http://HOST:PORT/messages`` and receives the agent's at ``url``.

Every body either way is signed with the shared secret: ``X-Thinkloop-Timestamp: <unix s>``
and ``X-Thinkloop-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">``. A request
with a wrong signature, or a timestamp more than ``max_skew_s`` away, is refused (401).

In: ``{"chat": "room-1", "sender": "ann", "text": "hi", "thread": null, "choice": null,
"files": [{"name": "a.txt", "mime": "text/plain", "data_b64": "..."}]}``.
Out: ``{"type": "message"|"choice"|"voice", "chat": ..., "thread": ..., "text": ...,
"choices": [{"label": ..., "data": ...}], "audio_b64": ...}``; a 429 is retried after its
``Retry-After``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import time
from collections.abc import Sequence
from typing import Any

from thinkloop.channels.base import Address, Attachment, Choice, Deliver, Inbound
from thinkloop.channels.config import WebhookSettings
from thinkloop.errors import ChannelError, ConfigError

log = logging.getLogger("thinkloop.channels.webhook")
SIGNATURE, TIMESTAMP = "X-Thinkloop-Signature", "X-Thinkloop-Timestamp"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def signed_headers(secret: str, body: bytes, now: float | None = None) -> dict[str, str]:
    ts = str(int(time.time() if now is None else now))
    return {TIMESTAMP: ts, SIGNATURE: sign(secret, ts, body),
            "Content-Type": "application/json"}


class WebhookAdapter:
    platform = "webhook"

    def __init__(self, settings: WebhookSettings) -> None:
        if settings.secret is None or not settings.secret.get_secret_value():
            raise ConfigError("the webhook channel needs a shared secret: set "
                              "THINKLOOP_CHANNELS_WEBHOOK_SECRET")
        if not settings.url:
            raise ConfigError("the webhook channel needs channels.webhook.url (where the "
                              "agent's messages are POSTed)")
        self.settings = settings
        self.max_len = settings.max_len
        self.secret = settings.secret.get_secret_value()
        self.port = 0
        self._runner: Any = None
        self._session: Any = None
        self._deliver: Deliver | None = None

    async def start(self, deliver: Deliver) -> None:
        import aiohttp
        from aiohttp import web

        self._deliver = deliver
        app = web.Application(client_max_size=self.settings.max_body_bytes)
        app.router.add_post("/messages", self._receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.settings.host, self.settings.port)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise ChannelError(f"the webhook channel cannot listen on {self.settings.host}:"
                               f"{self.settings.port}: {exc}") from None
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        log.info("webhook: listening on %s:%d", self.settings.host, self.port)

    def _verified(self, headers: Any, body: bytes) -> bool:
        ts = headers.get(TIMESTAMP, "")
        given = headers.get(SIGNATURE, "")
        if not ts.isdigit() or abs(time.time() - int(ts)) > self.settings.max_skew_s:
            return False
        return hmac.compare_digest(given, sign(self.secret, ts, body))

    async def _receive(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.read()
        if not self._verified(request.headers, body):
            return web.json_response({"error": "bad or missing signature"}, status=401)
        try:
            msg = _inbound(await request.json())
        except (ValueError, TypeError, KeyError, binascii.Error) as exc:
            return web.json_response({"error": f"bad message: {exc}"}, status=400)
        if self._deliver is not None:
            asyncio.get_running_loop().create_task(self._deliver(msg))
        return web.json_response({"accepted": True}, status=202)

    async def _post(self, payload: dict[str, Any]) -> None:
        import orjson

        body = orjson.dumps(payload)
        for attempt in range(self.settings.max_retries + 1):
            async with self._session.post(self.settings.url, data=body,
                                          headers=signed_headers(self.secret, body)) as r:
                if r.status < 300:
                    return
                if r.status != 429 or attempt == self.settings.max_retries:
                    raise ChannelError(f"webhook {self.settings.url} answered HTTP {r.status}")
                wait = r.headers.get("Retry-After", "1")
                await asyncio.sleep(float(wait) if wait.replace(".", "", 1).isdigit() else 1.0)

    async def send_text(self, to: Address, text: str) -> None:
        await self._post({"type": "message", "chat": to.chat, "thread": to.thread, "text": text})

    async def send_choice(self, to: Address, text: str, choices: Sequence[Choice]) -> bool:
        await self._post({"type": "choice", "chat": to.chat, "thread": to.thread, "text": text,
                          "choices": [{"label": label, "data": d} for label, d in choices]})
        return True

    async def send_voice(self, to: Address, audio: bytes) -> None:
        await self._post({"type": "voice", "chat": to.chat, "thread": to.thread,
                          "audio_b64": base64.b64encode(audio).decode()})

    async def typing(self, to: Address) -> None:
        await self._post({"type": "typing", "chat": to.chat, "thread": to.thread})

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()


def _inbound(data: Any) -> Inbound:
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    chat, sender = str(data["chat"]), str(data["sender"])
    files = tuple(Attachment(str(f.get("name") or "file"), str(f.get("mime") or
                             "application/octet-stream"), base64.b64decode(f["data_b64"]))
                  for f in data.get("files") or ())
    thread = data.get("thread")
    return Inbound(Address("webhook", chat, str(thread) if thread else None), sender,
                   str(data.get("text") or ""), str(data.get("sender_name") or sender), files,
                   choice=data.get("choice"))
