"""The gateway's doors against a hostile web page and a hostile client, on a real uvicorn:
another origin, a rebound DNS name, a browser without the page's token, a WebSocket without a
key, a revoked key, a 50 MB body without a key, a body that never ends."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from tests.server.conftest import Stack, start_stack, wait_for
from tests.server.test_runs import calling
from tests.server.test_ws import recv, ws_url
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from thinkloop.testing.openai_server import OpenAIServer

EVIL = "http://evil.example"
RUN = {"agent": "helper", "task": "write a file"}


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer
          ) -> Iterator[Stack]:
    """``--no-auth``, as a person runs it on their own machine."""
    yield from start_stack(tmp_path_factory.mktemp("local"), model_server, no_auth=True,
                           allowed_origins=("http://app.example",))


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer
          ) -> Iterator[Stack]:
    yield from start_stack(tmp_path_factory.mktemp("keyed"), model_server,
                           key_recheck_s=0.2, body_timeout_s=1.0, max_body_bytes=1024 * 1024)


@contextmanager
def page_client(stack: Stack) -> Iterator[httpx.Client]:
    """A browser on the gateway's own page: it loaded ``/`` (and its cookie) first."""
    with httpx.Client(base_url=stack.url, timeout=30, headers={
            "Origin": stack.url, "Sec-Fetch-Site": "same-origin"}) as c:
        page = c.get("/")
        assert page.status_code == 200 and "<title>thinkloop</title>" in page.text
        yield c


def test_another_origin_cannot_drive_a_no_auth_gateway(local: Stack) -> None:
    local.model.clear()
    with page_client(local) as page:
        # The page itself works: its cookie and its origin.
        assert page.post("/v1/runs", json=RUN | {"task": "hello"}).status_code == 202
        wait_for(lambda: local.gateway.server.started and len(local.model.requests) >= 1)
        local.model.clear()
        cookie = dict(page.cookies)
    # Another site's page: the browser adds its Origin (and, SameSite=Strict, no cookie;
    # here it even has the cookie, as a page on another port of localhost would).
    with httpx.Client(base_url=local.url, timeout=30, cookies=cookie,
                      headers={"Origin": EVIL, "Sec-Fetch-Site": "cross-site"}) as evil:
        r = evil.post("/v1/runs", json=RUN)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["message"] == (
            f"requests from '{EVIL}' are not allowed (add the origin to "
            "gateway.allowed_origins)")
        assert evil.post("/v1/runs/x/input", json={"id": "c", "approved": True}
                         ).status_code == 403
        assert evil.post("/v1/chat/completions", json={
            "model": "helper", "messages": [{"role": "user", "content": "hi"}]}
        ).status_code == 403
        # Reading is refused too: a browser request without the page's token.
        evil.cookies.clear()
        r = evil.get("/v1/agents")
        assert r.status_code == 403
        assert "open the gateway's page (/) first" in r.json()["error"]["message"]
        name = next(iter(cookie))
        for forged in ("x", "é" * 43, ""):  # a wrong token is refused, whatever its bytes
            r = evil.get("/v1/agents", headers={"Cookie": f"{name}={forged}".encode()})
            assert r.status_code == 403, forged
    # A configured origin may, with the page's token.
    with httpx.Client(base_url=local.url, timeout=30, cookies=cookie, headers={
            "Origin": "http://app.example", "Sec-Fetch-Site": "cross-site"}) as app:
        assert app.get("/v1/agents").status_code == 200
    time.sleep(0.2)
    assert local.model.requests == []  # no run started


async def test_another_origin_gets_no_websocket(local: Stack) -> None:
    local.model.clear()
    with page_client(local) as page:
        cookie = "; ".join(f"{k}={v}" for k, v in page.cookies.items())
    # Another origin, even with the page's cookie (a page on another port of localhost is
    # the same site: SameSite=Strict sends it): the Origin check alone refuses it.
    for headers in ({}, {"Cookie": cookie}):
        with pytest.raises(InvalidStatus) as refused:
            async with connect(ws_url(local), origin=EVIL,  # type: ignore[arg-type]
                               additional_headers=headers):
                raise AssertionError("the socket opened")
        assert refused.value.response.status_code == 403
    # A browser on the gateway's own page still gets one, with its cookie.
    async with connect(ws_url(local), origin=local.url,  # type: ignore[arg-type]
                       additional_headers={"Cookie": cookie}) as ws:
        await ws.send(json.dumps({"type": "subscribe", "run_id": "nope"}))
        assert (await recv(ws))["status"] == 404
    # Without the page's token, a browser's socket is refused even from the right origin.
    with pytest.raises(InvalidStatus):
        async with connect(ws_url(local), origin=local.url):  # type: ignore[arg-type]
            raise AssertionError("the socket opened")
    assert local.model.requests == []


def test_a_rebound_dns_name_is_refused(local: Stack) -> None:
    local.model.clear()
    port = local.gateway.port
    with httpx.Client(base_url=local.url, timeout=30,
                      headers={"Host": f"evil.example:{port}"}) as rebound:
        r = rebound.post("/v1/runs", json=RUN)
        assert r.status_code == 400
        assert r.json()["error"]["message"] == (
            f"this gateway does not answer to Host 'evil.example:{port}' (add the name to "
            "gateway.allowed_hosts)")
        assert rebound.get("/v1/agents").status_code == 400
        assert rebound.get("/").status_code == 400  # no page, so no token either
    # Programs on the machine (curl, the openai client) send neither Origin nor a cookie.
    for host in ("127.0.0.1", "localhost"):
        with httpx.Client(base_url=local.url, timeout=30,
                          headers={"Host": f"{host}:{port}"}) as program:
            assert program.get("/v1/agents").status_code == 200
    assert local.model.requests == []


async def test_a_websocket_without_a_valid_key_is_refused_at_the_handshake(
    keyed: Stack
) -> None:
    for headers in ({}, {"Authorization": "Bearer tlk_0000_forged"}):
        with pytest.raises(InvalidStatus) as refused:
            async with connect(ws_url(keyed), additional_headers=headers):
                raise AssertionError("the socket opened")
        assert refused.value.response.status_code == 403


async def test_revoking_a_key_closes_its_open_websockets(keyed: Stack) -> None:
    ana, ben = keyed.gateway.key("ana"), keyed.gateway.key("ben")
    async with connect(ws_url(keyed), additional_headers={"Authorization": f"Bearer {ana}"}
                       ) as a_ws, connect(ws_url(keyed), additional_headers={
                           "Authorization": f"Bearer {ben}"}) as b_ws:
        await asyncio.to_thread(revoke, keyed, ana)
        frame = await asyncio.wait_for(recv(a_ws), 10)
        assert frame == {"type": "error", "status": 401, "message": "the API key was revoked"}
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(a_ws.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
        # Another key's socket stays open and answers.
        await b_ws.send(json.dumps({"type": "subscribe", "run_id": "nope"}))
        assert (await asyncio.wait_for(recv(b_ws), 10))["status"] == 404
    with pytest.raises(InvalidStatus):  # and the revoked key opens no new one
        async with connect(ws_url(keyed), additional_headers={"Authorization": f"Bearer {ana}"}):
            raise AssertionError("the socket opened")


def revoke(stack: Stack, key: str) -> None:
    """``thinkloop keys revoke`` in a process of its own, on the gateway's store."""
    env = {**os.environ, "THINKLOOP_DATABASE_URL": str(stack.gateway.store_path)}
    revoked = subprocess.run([
        sys.executable, "-c", "from thinkloop.cli.app import main; main()", "keys",
        "revoke", key.split("_")[1]], capture_output=True, text=True, timeout=60, env=env)
    assert revoked.returncode == 0, revoked.stderr


def test_revoking_a_key_ends_its_open_event_streams(keyed: Stack) -> None:
    keyed.model.clear()
    keyed.model.enqueue(calling("c1", "calculator", {"expression": "1+1"}))
    key = keyed.gateway.key("cy")
    with keyed.client(key) as c:
        run_id = c.post("/v1/runs", json={"agent": "worker", "task": "add"}).json()["id"]
        frames: list[str] = []
        started: float | None = None
        with c.stream("GET", f"/v1/runs/{run_id}/events") as r:
            for line in r.iter_lines():
                frames.append(line)
                if "approval.requested" in line:  # the run waits for a person now
                    revoke(keyed, key)
                    started = time.monotonic()
        assert started is not None and time.monotonic() - started < 5
        assert frames[-3:-1] == ["event: error",
                                 'data: {"status":401,"message":"the API key was revoked"}']
        assert c.get(f"/v1/runs/{run_id}").status_code == 401
    with keyed.client(keyed.gateway.key("cy")) as c:  # the run is cy's: a new key aborts it
        assert c.post(f"/v1/runs/{run_id}/abort").status_code == 202


def raw(stack: Stack, head: str, body: bytes = b"", wait_s: float = 5.0) -> bytes:
    """Send ``head`` and part of a body, then read what comes back within ``wait_s``."""
    with socket.create_connection(("127.0.0.1", stack.gateway.port), timeout=wait_s) as s:
        s.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        got = b""
        deadline = time.monotonic() + wait_s
        while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            got += chunk
        return got


def head(stack: Stack, length: int, *extra: str) -> str:
    lines = ["POST /v1/runs HTTP/1.1", f"Host: 127.0.0.1:{stack.gateway.port}",
             "Content-Type: application/json", f"Content-Length: {length}", *extra]
    return "\n".join(lines) + "\n"


def test_a_50_mb_body_without_a_key_is_refused_unread(keyed: Stack) -> None:
    # Only 64 KB of the 50 MB are sent: an answer now means the rest was never waited for.
    started = time.monotonic()
    got = raw(keyed, head(keyed, 50 * 1024 * 1024), b"x" * 65536)
    assert got.startswith(b"HTTP/1.1 401 "), got[:200]
    assert b"an API key is required" in got
    assert time.monotonic() - started < 3


def test_a_small_refused_body_is_read_before_the_refusal(keyed: Stack) -> None:
    """The body comes after a pause: the gateway waits for it (up to 64 KB) and then answers,
    so the client meets the 401, not a socket reset by the bytes it was still sending."""
    body = b'{"task": "' + b"x" * 30_000 + b'"}'
    with socket.create_connection(("127.0.0.1", keyed.gateway.port), timeout=5) as s:
        s.sendall(head(keyed, len(body)).replace("\n", "\r\n").encode() + b"\r\n"
                  + body[:100])
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):
            s.recv(1)  # no answer yet: the rest of the body is awaited
        s.settimeout(5)
        s.sendall(body[100:])
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 401 "), got[:200]
    assert got.rstrip().endswith(b"}")


def test_an_oversized_or_slow_body_with_a_key_is_refused(keyed: Stack) -> None:
    key = keyed.gateway.key("ana")
    auth = f"Authorization: Bearer {key}"
    got = raw(keyed, head(keyed, 50 * 1024 * 1024, auth), b"x" * 1024)
    assert got.startswith(b"HTTP/1.1 413 "), got[:200]
    assert b"gateway.max_body_bytes" in got
    # Chunked, with no length declared: cut off once past the limit.
    chunk = b"x" * 300_000
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(5))
    got = raw(keyed, "\n".join(["POST /v1/runs HTTP/1.1", f"Host: 127.0.0.1:{keyed.gateway.port}",
                               "Transfer-Encoding: chunked", auth]) + "\n", chunked)
    assert got.startswith(b"HTTP/1.1 413 "), got[:200]
    # A body that stops coming: 408 after body_timeout_s (1 s here), not a held connection.
    started = time.monotonic()
    got = raw(keyed, head(keyed, 100, auth), b'{"task": ', wait_s=6)
    assert got.startswith(b"HTTP/1.1 408 "), got[:200]
    assert 0.9 < time.monotonic() - started < 4


def test_an_oversized_head_is_refused(keyed: Stack) -> None:
    got = raw(keyed, head(keyed, 2, "X-Filler: " + "a" * 40_000), b"{}")
    assert got.startswith(b"HTTP/1.1 431 "), got[:200]
    assert b"gateway.max_header_bytes" in got


async def test_no_auth_changes_need_the_process_token_from_any_client(
    local: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only browsers: a program (or a page's request a browser forwards without its
    headers) that changes state must show the token only the person's own programs can read."""
    local.model.clear()
    assert local.gateway.token_file is not None
    token = local.gateway.token_file.read_text()
    assert local.gateway.token_file.stat().st_mode & 0o777 == 0o600
    async with httpx.AsyncClient(base_url=local.url, timeout=30) as program:
        assert (await program.get("/v1/agents")).status_code == 200  # reading needs none
        for headers in ({}, {"X-Thinkloop-Token": "forged"}, {"Authorization": "Bearer x"}):
            # Refused before its body reaches the application, on the same connection each
            # time: the gateway reads the small body first, so the answer is never a reset.
            r = await program.post("/v1/runs", json=RUN, headers=headers)
            assert r.status_code == 403, r.text
            assert "X-Thinkloop-Token" in r.json()["error"]["message"]
        assert (await program.post("/v1/runs/x/abort")).status_code == 403
        with pytest.raises(InvalidStatus):
            async with connect(ws_url(local)):
                raise AssertionError("the socket opened")
        assert local.model.requests == []
        # With the token, as a header or as the openai client's key, the program may.
        r = await program.post("/v1/runs", json=RUN | {"task": "hello"},
                               headers={"X-Thinkloop-Token": token})
        assert r.status_code == 202, r.text
        r = await program.post("/v1/runs", json=RUN | {"task": "hello"},
                               headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 202, r.text
    async with connect(ws_url(local), additional_headers={"X-Thinkloop-Token": token}) as ws:
        await ws.send(json.dumps({"type": "subscribe", "run_id": "nope"}))
        assert (await recv(ws))["status"] == 404
    # The terminal UI reads the token from THINKLOOP_HOME by itself.
    from thinkloop.tui.remote import GatewayBackend

    monkeypatch.setenv("THINKLOOP_HOME", str(local.gateway.token_file.parent.parent))
    backend = GatewayBackend(local.url, None)
    try:
        run_id = await backend.start("helper", "hello again", None)
        assert run_id
    finally:
        await backend.aclose()


def _post_run(stack: Stack, *lines: str) -> bytes:
    body = json.dumps(RUN | {"task": "hello"}).encode()
    return raw(stack, "\n".join(["POST /v1/runs HTTP/1.1", "Content-Type: application/json",
                                 f"Content-Length: {len(body)}", *lines]) + "\n", body)


@pytest.mark.parametrize("repeated", ["host", "origin", "token", "cookie"])
def test_a_repeated_header_the_doors_read_is_refused(local: Stack, repeated: str) -> None:
    """Each pair holds a refused value and an accepted one: the doors once read the last of
    a repeated header and the application the first, so either order could slip a value
    past the check. Whichever comes first, the request is refused before it runs."""
    assert local.gateway.token_file is not None
    token, port = local.gateway.token_file.read_text(), local.gateway.port
    name = f"thinkloop_page_{port}"
    lines = {"host": ["Host: evil.example", f"Host: 127.0.0.1:{port}"],
             "origin": [f"Origin: {EVIL}", f"Origin: {local.url}"],
             "token": ["X-Thinkloop-Token: forged", f"X-Thinkloop-Token: {token}"],
             "cookie": [f"Cookie: {name}=forged; {name}={token}"]}[repeated]
    local.model.clear()
    for order in (lines, lines[::-1]) if len(lines) > 1 else (lines,):
        first = [] if repeated == "host" else [f"Host: 127.0.0.1:{port}"]
        token_line = [] if repeated in ("token", "cookie") else [f"X-Thinkloop-Token: {token}"]
        got = _post_run(local, *first, *token_line, *order)
        assert got.startswith(b"HTTP/1.1 400 "), got[:300]
        assert b"more than once" in got, got
    assert local.model.requests == []


def test_a_repeated_api_key_is_refused(keyed: Stack) -> None:
    key, port = keyed.gateway.key("ana"), keyed.gateway.port
    keyed.model.clear()
    for headers in (["Authorization: Bearer forged", f"Authorization: Bearer {key}"],
                    [f"X-Api-Key: {key}", "X-Api-Key: forged"]):
        for order in (headers, headers[::-1]):
            got = _post_run(keyed, f"Host: 127.0.0.1:{port}", *order)
            assert got.startswith(b"HTTP/1.1 400 "), got[:300]
            assert b"more than once" in got, got
    assert keyed.model.requests == []
