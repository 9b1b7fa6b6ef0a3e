"""Slack through slack-sdk: events arrive over Socket Mode (no public URL needed), or, behind
the gateway, from the Events API (``mode = "events"``, requests verified by the signing
secret); the answer goes out with the Web API. A thread is a session: a mention in a channel
starts a thread under it, and later messages in that thread continue it without a mention; in
a direct message every message counts. Approvals are Block Kit buttons. The Web API base URL
is a setting (the tests point it at a stand-in); 429s are retried by the SDK's rate-limit
handler (``Retry-After``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from thinkloop.channels.base import Address, Attachment, Choice, Deliver, Inbound
from thinkloop.channels.config import SlackSettings
from thinkloop.errors import ChannelError, ConfigError

log = logging.getLogger("thinkloop.channels.slack")
MAX_LEN = 3900  # Slack advises at most 4,000 characters per message


class SlackAdapter:
    platform = "slack"
    max_len = MAX_LEN

    def __init__(self, settings: SlackSettings) -> None:
        if settings.bot_token is None:
            raise ConfigError("the slack channel needs SLACK_BOT_TOKEN (xoxb-...)")
        if settings.mode == "socket" and settings.app_token is None:
            raise ConfigError("the slack channel needs SLACK_APP_TOKEN (xapp-..., Socket Mode), "
                              "or mode = events with SLACK_SIGNING_SECRET behind the gateway")
        if settings.mode == "events" and settings.signing_secret is None:
            raise ConfigError("channels.slack.mode = events needs SLACK_SIGNING_SECRET")
        self.settings = settings
        self.web: Any = None
        self.socket: Any = None
        self.bot_user = ""
        self.threads: set[str] = set()  # "channel/ts" of threads the agent is part of
        self._deliver: Deliver | None = None

    async def start(self, deliver: Deliver) -> None:
        from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
        from slack_sdk.socket_mode.aiohttp import SocketModeClient
        from slack_sdk.web.async_client import AsyncWebClient

        s = self.settings
        retry = AsyncRateLimitErrorRetryHandler(max_retry_count=s.max_retries)
        self.web = AsyncWebClient(_secret(s.bot_token), base_url=s.api_url,
                                  retry_handlers=[retry])
        try:
            auth = await self._checked("SLACK_BOT_TOKEN", self.web.auth_test())
            self.bot_user = str(auth["user_id"])
            self._deliver = deliver
            if s.mode == "events":
                log.info("slack: events by the Events API, as %s", self.bot_user)
                return
            opened = await self._checked("SLACK_APP_TOKEN", self.web.apps_connections_open(
                app_token=_secret(s.app_token)))
        except OSError as exc:
            raise ChannelError(f"cannot reach the Slack API at {s.api_url}: {exc}") from None
        self.socket = SocketModeClient(_secret(s.app_token), web_client=self.web)
        self.socket.wss_uri = opened["url"]  # checked above: connect() would retry forever
        self.socket.socket_mode_request_listeners.append(self._on_request)
        await self.socket.connect()
        log.info("slack: connected by Socket Mode as %s", self.bot_user)

    @property
    def webhook_route(self) -> Any:
        """The gateway's handler of the Events API (mode = events), else None: requests are
        verified by their signature, answered at once, and handled in the background."""
        if self.settings.mode != "events":
            return None
        from slack_sdk.signature import SignatureVerifier
        from starlette.responses import JSONResponse, Response

        verifier = SignatureVerifier(_secret(self.settings.signing_secret))

        async def slack_events(request: Any) -> Response:
            body = await request.body()
            if not verifier.is_valid_request(body, dict(request.headers)):
                return Response(status_code=401)
            if request.headers.get("X-Slack-Retry-Num"):
                return Response(status_code=200)  # handled the first time it came
            kind, payload = _event_body(body, request.headers.get("content-type", ""))
            if kind == "url_verification":
                return JSONResponse({"challenge": payload.get("challenge")})
            asyncio.get_running_loop().create_task(self._handle(kind, payload))
            return Response(status_code=200)

        return slack_events

    async def _handle(self, kind: str, payload: dict[str, Any]) -> None:
        try:
            msg = await self._inbound(kind, payload)
        except Exception as exc:  # one odd event must not stop the others
            log.warning("slack: event not understood: %s", exc)
            return
        if msg is not None and self._deliver is not None:
            await self._deliver(msg)

    @staticmethod
    async def _checked(token: str, call: Any) -> Any:
        from slack_sdk.errors import SlackApiError

        try:
            return await call
        except SlackApiError as exc:
            raise ChannelError(f"slack refused {token}: {exc.response.get('error')}") from None

    async def _on_request(self, client: Any, req: Any) -> None:
        from slack_sdk.socket_mode.response import SocketModeResponse

        await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        asyncio.get_running_loop().create_task(self._handle(req.type, req.payload))

    async def _inbound(self, kind: str, payload: dict[str, Any]) -> Inbound | None:
        if kind == "interactive":
            action = (payload.get("actions") or [{}])[0]
            channel = payload.get("channel", {}).get("id", "")
            message = payload.get("message", {})
            thread = message.get("thread_ts") or None
            return Inbound(Address("slack", channel, thread), payload["user"]["id"], "",
                           choice=str(action.get("value", "")))
        if kind != "events_api":
            return None
        event = payload.get("event", {})
        if event.get("type") not in ("message", "app_mention") or event.get("bot_id") \
                or event.get("subtype") not in (None, "file_share"):
            return None
        return await self._message(event)

    async def _message(self, event: dict[str, Any]) -> Inbound | None:
        channel, ts = str(event["channel"]), str(event["ts"])
        direct = event.get("channel_type") == "im"
        mention = f"<@{self.bot_user}>"
        text = str(event.get("text") or "")
        root = event.get("thread_ts")
        if event["type"] == "message" and not direct and mention in text:
            return None  # the app_mention event of the same message is the one handled
        thread = None if direct and not root else str(root or ts)
        known = f"{channel}/{thread}" in self.threads
        addressed = direct or event["type"] == "app_mention" or known
        if thread and addressed:
            self.threads.add(f"{channel}/{thread}")
        files = tuple([await self._download(f) for f in event.get("files") or ()])
        return Inbound(Address("slack", channel, thread), str(event.get("user", "")),
                       text.replace(mention, "").strip(), attachments=files,
                       addressed=addressed)

    async def _download(self, f: dict[str, Any]) -> Attachment:
        import aiohttp

        url = f.get("url_private_download") or f["url_private"]
        headers = {"Authorization": f"Bearer {_secret(self.settings.bot_token)}"}
        async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as r:
            if r.status != 200:
                raise ChannelError(f"slack file {f.get('name')}: HTTP {r.status}")
            data = await r.read()
        return Attachment(str(f.get("name") or "file"), str(f.get("mimetype") or ""), data)

    async def send_text(self, to: Address, text: str) -> None:
        await self.web.chat_postMessage(channel=to.chat, text=text, thread_ts=to.thread)

    async def send_choice(self, to: Address, text: str, choices: Sequence[Choice]) -> bool:
        buttons = [{"type": "button", "text": {"type": "plain_text", "text": label},
                    "value": data, "action_id": f"thinkloop_{i}"}
                   for i, (label, data) in enumerate(choices)]
        blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": text}},
                  {"type": "actions", "elements": buttons}]
        await self.web.chat_postMessage(channel=to.chat, text=text, blocks=blocks,
                                        thread_ts=to.thread)
        return True

    async def send_voice(self, to: Address, audio: bytes) -> None:
        name = "voice.ogg" if audio[:4] == b"OggS" else "voice.wav"
        await self.web.files_upload_v2(channel=to.chat, thread_ts=to.thread, content=audio,
                                       filename=name, title="Voice message")

    async def typing(self, to: Address) -> None:
        return None  # the Web API has no typing indicator for bots

    async def stop(self) -> None:
        if self.socket is not None:
            await self.socket.close()


def _event_body(body: bytes, content_type: str) -> tuple[str, dict[str, Any]]:
    """(kind, payload) of an Events API request: an event callback or URL check (JSON), or an
    interaction (a form with its JSON in ``payload``) -- the kinds Socket Mode names."""
    import json
    from urllib.parse import parse_qs

    if content_type.startswith("application/x-www-form-urlencoded"):
        form = parse_qs(body.decode())
        return "interactive", json.loads(form.get("payload", ["{}"])[0])
    data = json.loads(body or b"{}")
    kind = str(data.get("type", ""))
    return ("url_verification" if kind == "url_verification" else "events_api"), data


def _secret(value: Any) -> str:
    return value.get_secret_value() if value is not None else ""
