"""A ``thinkloop serve`` gateway as a :class:`~thinkloop.tui.backend.Backend`, over its REST
API and its per-run SSE streams (resumed with ``Last-Event-ID`` after a dropped connection).

A gateway that cannot be reached makes :attr:`GatewayBackend.online` false (the UI shows a
banner) and every call a :class:`~thinkloop.errors.GatewayUnreachableError`; a stream being
followed waits for the gateway and picks up after the last event it had.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
from httpx_sse import SSEError, aconnect_sse

from thinkloop.core.settings import gateway_token_file, load_settings
from thinkloop.errors import GatewayError, GatewayUnreachableError
from thinkloop.events import Event, from_dict
from thinkloop.tui.backend import (
    AgentInfo,
    MemoryRow,
    MessageRow,
    RunRow,
    SessionRow,
    SpanRow,
    verdict,
)

RETRY_S = 0.5  # between attempts to reach a gateway that went away
TOKEN_HEADER = "X-Thinkloop-Token"


def local_token_file(url: str, home: Path | None = None) -> Path | None:
    """Where a ``--no-auth`` gateway at ``url`` (on this machine) keeps its token, if it does."""
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return gateway_token_file(home or load_settings().home, port)


class GatewayBackend:
    def __init__(self, url: str, key: str | None, *, timeout_s: float = 10.0,
                 home: Path | None = None) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # Without a key: a --no-auth gateway's token, read from its file under THINKLOOP_HOME
        # before every request (the gateway makes a new one each time it starts).
        self.token_file = None if key else local_token_file(self.url, home)
        self.client = httpx.AsyncClient(base_url=self.url, headers=headers,
                                        timeout=httpx.Timeout(timeout_s),
                                        event_hooks={"request": [self._add_token]})
        self._online = True

    async def _add_token(self, request: httpx.Request) -> None:
        if self.token_file is None:
            return
        try:
            token = self.token_file.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return  # a gateway with keys, or one not running: nothing to send
        request.headers[TOKEN_HEADER] = token

    @property
    def label(self) -> str:
        return f"gateway · {self.url}"

    @property
    def online(self) -> bool:
        return self._online

    async def check(self) -> bool:
        try:
            response = await self.client.get("/healthz")
            self._online = response.status_code == 200
        except httpx.TransportError:
            self._online = False
        return self._online

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self.client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            self._online = False
            raise GatewayUnreachableError(f"the gateway at {self.url} is unreachable "
                                          f"({type(exc).__name__})") from None
        self._online = True
        if response.status_code >= 400:
            raise GatewayError(_message(response), response.status_code)
        return response.json()

    async def agents(self) -> list[str]:
        return [a["name"] for a in (await self._call("GET", "/v1/agents"))["agents"]]

    async def agent(self, name: str, model: str | None = None) -> AgentInfo:
        if model is not None:
            raise GatewayError("a gateway's agent keeps the model of its definition; "
                               "choose another agent with /agent NAME")
        data = await self._call("GET", f"/v1/agents/{name}")
        return AgentInfo(name, str(data["model"]), tuple(data["tools"]))

    async def start(self, agent: str, task: str, session: str | None,
                    model: str | None = None) -> str:
        if model is not None:
            raise GatewayError("a gateway's agent keeps the model of its definition")
        body = {"task": task, "agent": agent, "session": session, "stream": True}
        return str((await self._call("POST", "/v1/runs", json=body))["id"])

    async def follow(self, run_id: str, after: int = 0) -> AsyncIterator[tuple[int, Event]]:
        seq = after
        while True:
            try:
                async for item in self._stream(run_id, seq):
                    if item is None:
                        return
                    seq = item[0]
                    yield item
                return
            except (httpx.TransportError, SSEError):
                self._online = False
                await asyncio.sleep(RETRY_S)  # then again, after the last event we had

    async def _stream(self, run_id: str, after: int
                      ) -> AsyncIterator[tuple[int, Event] | None]:
        headers = {"Last-Event-ID": str(after)} if after else {}
        timeout = httpx.Timeout(10.0, read=None)  # a quiet run sends pings only
        async with aconnect_sse(self.client, "GET", f"/v1/runs/{run_id}/events",
                                headers=headers, timeout=timeout) as source:
            if source.response.status_code >= 400:
                await source.response.aread()
                raise GatewayError(_message(source.response), source.response.status_code)
            self._online = True
            async for sse in source.aiter_sse():
                if sse.event == "end":
                    yield None
                    return
                if sse.event == "event" and sse.id:
                    yield int(sse.id), from_dict(orjson.loads(sse.data))

    async def answer(self, run_id: str, input_id: str, *, approved: bool | None = None,
                     text: str | None = None) -> None:
        body: dict[str, Any] = {"id": input_id, "reason": verdict(approved)}
        body.update({"approved": approved} if approved is not None else {"answer": text or ""})
        await self._call("POST", f"/v1/runs/{run_id}/input", json=body)

    async def abort(self, run_id: str) -> None:
        await self._call("POST", f"/v1/runs/{run_id}/abort")

    async def runs(self) -> list[RunRow]:
        return [RunRow(user=None, **r) for r in (await self._call("GET", "/v1/runs"))["runs"]]

    async def sessions(self) -> list[SessionRow]:
        return [SessionRow(s["id"], s["messages"], s["updated_at"])
                for s in (await self._call("GET", "/v1/sessions"))["sessions"]]

    async def messages(self, session: str) -> list[MessageRow]:
        try:
            data = await self._call("GET", f"/v1/sessions/{session}")
        except GatewayError as exc:
            if exc.status == 404:  # a new session: nothing said yet
                return []
            raise
        return [MessageRow(m["role"], m["content"] or "",
                           tuple(f"{c['name']}({orjson.dumps(c['arguments']).decode()})"
                                 for c in m["tool_calls"])) for m in data["messages"]]

    async def memory(self, run_id: str | None = None, only_run: bool = False
                     ) -> list[MemoryRow]:
        params: dict[str, Any] = {"only_run": only_run}
        if run_id:
            params["run"] = run_id
        data = await self._call("GET", "/v1/memory", params=params)
        return [MemoryRow(m["id"], m["owner"], m["kind"], m["key"], m["content"],
                          m["created_at"]) for m in data["memories"]]

    async def trace(self, run_id: str) -> list[SpanRow]:
        data = await self._call("GET", f"/v1/runs/{run_id}/trace")
        return [SpanRow(s["span_id"], s["parent_id"], s["name"], s["start"], s["end"],
                        s["status"], s["attributes"]) for s in data["spans"]]

    async def aclose(self) -> None:
        await self.client.aclose()


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"the gateway answered {response.status_code}"
