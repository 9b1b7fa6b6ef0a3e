"""The transport seam: POST JSON bytes, read bytes or SSE ``data``, failures as typed errors.

Two transports fit it. :func:`default_transport` picks the small ``httptools`` client
(:mod:`thinkloop.models.h1`) when ``httptools`` is installed (the ``perf`` extra): by
measurement (benchmarks/transport.py) it costs a fifth to a third of aiohttp's client CPU
per request. :class:`HttpTransport` is one pooled aiohttp session per provider and event
loop: against the same server it stays flat at 200 concurrent runs, where httpx 0.28 and
httpx2 pay 2-9 ms per request in their connection pools (benchmarks/overhead.py).
"""

from __future__ import annotations

import asyncio
import codecs
import email.utils
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from thinkloop.core.errors import (
    ContextOverflowError,
    ModelAuthError,
    ModelConnectionError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelTimeoutError,
)
from thinkloop.lifetime import close_at_loop_exit, forget_at_loop_exit

if TYPE_CHECKING:
    # aiohttp and httpx-sse cost ~300 ms to import; they load on the first request instead.
    import aiohttp

_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context length",
    "too many tokens",
    "prompt is too long",
    "exceeds the context window",
    "context window",
)


class Transport(Protocol):
    """What a model client needs from HTTP."""

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> bytes: ...

    def post_sse(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> AsyncIterator[str]: ...

    def post_sse_batches(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> AsyncIterator[list[str]]:
        """The SSE ``data`` payloads, a list per network read (or per event, where the
        transport cannot tell reads apart): a streaming model folds each list at once."""
        ...

    async def aclose(self) -> None: ...


def default_transport() -> Transport:
    """The ``httptools`` client when it is installed, else the aiohttp one."""
    try:
        from thinkloop.models.h1 import H1Transport
    except ImportError:
        return HttpTransport()
    return H1Transport()


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` (OpenAI) or ``retry-after`` (seconds or an
    HTTP date), as the openai SDK reads them."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(float(raw_ms) / 1000, 0.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def http_error(status: int, body: str, headers: Mapping[str, str]) -> ModelHTTPError:
    """Map a non-2xx answer to the most specific error class."""
    retry_after = retry_after_s(headers)
    if status in (401, 403):
        return ModelAuthError(status, body)
    if status == 429:
        return ModelRateLimitError(status, body, retry_after=retry_after)
    lowered = body.lower()
    if status in (400, 413) and any(m in lowered for m in _OVERFLOW_MARKERS):
        return ContextOverflowError(status, body)
    return ModelHTTPError(status, body, retry_after=retry_after)


class _TextAdapter:
    """Lets httpx-sse's EventSource read an aiohttp response."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.headers = response.headers

    async def aiter_text(self) -> AsyncIterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        async for chunk in self._response.content.iter_any():
            yield decoder.decode(chunk)
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail


class HttpTransport:
    """POST JSON bytes, get bytes back or a stream of SSE ``data`` payloads."""

    def __init__(self, *, connect_timeout_s: float = 10.0, max_connections: int = 0) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # One ClientTimeout per timeout value: runs send thousands of requests with the same.
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    def _client(self) -> aiohttp.ClientSession:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            # A session is bound to its event loop; run_sync starts a fresh loop each call.
            connector = aiohttp.TCPConnector(limit=self.max_connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector
            )
            self._loop = loop
            close_at_loop_exit(self, self.aclose)  # no "Unclosed client session" at exit
        return self._session

    def _timeout(self, timeout_s: float) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(timeout_s)
        if timeout is None:
            import aiohttp

            timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=self.connect_timeout_s)
            if len(self._timeouts) < 16:  # a handful of values in practice; never unbounded
                self._timeouts[timeout_s] = timeout
        return timeout

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> bytes:
        import aiohttp

        try:
            async with self._client().post(
                url, data=body, headers=headers, timeout=self._timeout(timeout_s)
            ) as resp:
                data = await resp.read()
                if resp.status >= 400:
                    raise http_error(resp.status, data.decode("utf-8", "replace"), resp.headers)
                return data
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise ModelTimeoutError(f"no answer from {url} within {timeout_s:g}s") from exc
        except aiohttp.ClientError as exc:
            raise ModelConnectionError(f"cannot reach {url}: {exc}") from exc

    async def post_sse(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> AsyncIterator[str]:
        import aiohttp
        from httpx_sse import EventSource

        try:
            async with self._client().post(
                url, data=body, headers={**headers, "accept": "text/event-stream"},
                timeout=self._timeout(timeout_s),
            ) as resp:
                if resp.status >= 400:
                    text = (await resp.read()).decode("utf-8", "replace")
                    raise http_error(resp.status, text, resp.headers)
                source = EventSource(_TextAdapter(resp))  # type: ignore[arg-type]
                async for sse in source.aiter_sse():
                    if sse.data == "[DONE]":
                        break
                    if sse.data:
                        yield sse.data
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise ModelTimeoutError(f"no answer from {url} within {timeout_s:g}s") from exc
        except aiohttp.ClientError as exc:
            raise ModelConnectionError(f"cannot reach {url}: {exc}") from exc

    async def post_sse_batches(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> AsyncIterator[list[str]]:
        """One event per list: httpx-sse hands the events over one at a time."""
        async for data in self.post_sse(url, body, headers, timeout_s):
            yield [data]

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            forget_at_loop_exit(self)
            await session.close()

    def __del__(self) -> None:
        # Sessions left open at interpreter exit warn loudly; close the connector quietly.
        session: Any = self._session
        if session is not None and not session.closed and session.connector is not None:
            session.connector._close()
