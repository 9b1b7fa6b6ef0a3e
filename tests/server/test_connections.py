"""Cheap floods against a real ``thinkloop serve`` (its own process, 512 open files at most,
on 127.0.0.1): 1,100 half-sent requests, and a client holding every place it may. The
gateway keeps its file descriptors, drops what is half-sent, and always answers /healthz."""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from tests.server.conftest import Gateway, wait_for

from thinkloop.server import GatewayConfig

FD_LIMIT = 512  # the gateway's: 1,100 connections exhausted it before
FLOOD = 1100
HALF_SENT = b"GET /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@pytest.fixture(scope="module", autouse=True)
def _enough_files_here() -> None:
    # This process holds the flood's sockets: it needs more than the gateway gets.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 4096)
    assert want >= FLOOD + 200, f"the tests need {FLOOD + 200} open files; the limit is {hard}"
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


@contextmanager
def serving(tmp_path: Path, **settings: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``thinkloop serve --no-auth`` with ``settings`` (THINKLOOP_GATEWAY_<NAME>)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("THINKLOOP_", "OPENAI_", "ANTHROPIC_"))}
    env.update({"THINKLOOP_HOME": str(tmp_path), "THINKLOOP_MODEL": "openai:fake",
                "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    env.update({f"THINKLOOP_GATEWAY_{k.upper()}": v for k, v in settings.items()})
    proc = subprocess.Popen(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", "serve",
         "--no-auth", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, preexec_fn=_limit_files)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "serve did not come up"
            time.sleep(0.1)
        yield base, proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def open_fds(proc: subprocess.Popen[str]) -> int:
    return len(os.listdir(f"/proc/{proc.pid}/fd"))


class Peak:
    """The most files ``proc`` held while the block ran (sampled every few ms)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.most = proc, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.most = max(self.most, open_fds(self.proc))
            time.sleep(0.002)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.2)  # what was accepted last is admitted (or not) by now
        self._stop.set()
        self._thread.join()


def half_sent(base: str, n: int) -> list[socket.socket]:
    """``n`` connections that each send part of a request head, opened 16 at a time (a
    connect that finds the gateway's accept queue full waits a second for the kernel)."""
    port = int(base.rsplit(":", 1)[1])

    def one(_: int) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(HALF_SENT)
        return s

    with ThreadPoolExecutor(16) as pool:
        return list(pool.map(one, range(n)))


def closed_by_server(socks: list[socket.socket], within_s: float) -> int:
    """How many of ``socks`` the server closed (end of file or reset) within ``within_s``."""
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    closed, deadline = 0, time.monotonic() + within_s
    while closed < len(socks) and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=max(0.0, deadline - time.monotonic())):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096)
            except (ConnectionResetError, BlockingIOError):
                data = b""
            if not data:
                sel.unregister(sock)
                closed += 1
    sel.close()
    return closed


@pytest.mark.parametrize("settings", [{}, {"per_client_connections": "5000"}],
                         ids=["per-client-cap", "fd-budget"])
def test_slowloris_neither_exhausts_files_nor_stops_healthz(
    tmp_path: Path, settings: dict[str, str]
) -> None:
    with serving(tmp_path, header_timeout_s="2", **settings) as (base, proc):
        peak = Peak(proc)
        with peak:
            socks = half_sent(base, FLOOD)
        try:
            assert peak.most < FD_LIMIT - 32, peak.most  # never at the limit
            # The cap (64 from one address) or the budget (512 - 128 reserved - 8 for
            # /healthz - 3 * 64 accepted before admission = 184) holds once what was
            # accepted is admitted: the oldest half-sent made room (and about 30 files are
            # the gateway's own).
            most = 110 if not settings else 250
            wait_for(lambda: open_fds(proc) < most, 5)
            started = time.monotonic()
            r = httpx.get(base + "/healthz", timeout=5)
            assert r.status_code == 200 and r.json()["status"] == "ok"
            assert time.monotonic() - started < 2
            # Every half-sent request is dropped: evicted, or after header_timeout_s (2 s).
            assert closed_by_server(socks, within_s=8) == FLOOD
        finally:
            for s in socks:
                s.close()
        assert httpx.get(base + "/v1/agents", timeout=5).status_code == 200
        assert proc.poll() is None


def test_a_client_holding_every_place_leaves_room_for_healthz(tmp_path: Path) -> None:
    with serving(tmp_path, per_client_connections="16") as (base, _):
        port = int(base.rsplit(":", 1)[1])
        # The process's token (a --no-auth gateway refuses a change without it, at once).
        token = (tmp_path / "gateway" / f"{port}.token").read_text().encode()
        busy = []
        try:
            for _ in range(16):  # bodies that keep coming: requests being served
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(b"POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"X-Thinkloop-Token: " + token + b"\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
                busy.append(s)
            time.sleep(0.3)
            with httpx.Client(base_url=base, timeout=5) as c:
                assert c.get("/healthz").status_code == 200
            with httpx.Client(base_url=base, timeout=5) as c:
                r = c.get("/v1/agents")
                assert r.status_code == 503 and r.headers["retry-after"] == "1"
                assert "connection limit" in r.json()["error"]["message"]
        finally:
            for s in busy:
                s.close()
        time.sleep(0.3)
        assert httpx.get(base + "/v1/agents", timeout=5).status_code == 200


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_a_head_growing_past_its_cap_is_refused_on_either_parser(tmp_path: Path,
                                                                  http: str) -> None:
    """A head still arriving past ``max_header_bytes`` is answered 400 and closed, before it
    completes (its memory is bounded), on either of uvicorn's parsers: h11 caps it itself,
    httptools has no cap (the guarded protocol counts). A complete head over the cap is the
    doors' 431 (test_doors)."""
    pytest.importorskip(http)
    cfg = GatewayConfig(no_auth=True, max_header_bytes=4096, header_timeout_s=30)
    with Gateway(cfg, tmp_path / "gateway.db", http=http) as gw, \
            socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        got = b""
        with contextlib.suppress(OSError):  # the gateway may close while this still sends
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: ")
            for _ in range(40):  # 40 KB, a kilobyte at a time, never ending the head
                s.sendall(b"a" * 1024)
                time.sleep(0.01)
        with contextlib.suppress(OSError):
            while chunk := s.recv(4096):
                got += chunk
        assert got.startswith(b"HTTP/1.1 400 "), got[:200]
        # And the gateway still serves.
        assert httpx.get(gw.url + "/healthz", timeout=10).status_code == 200


class _FakeTransport:
    def __init__(self) -> None:
        self.closed = False
        self.looked = 0  # how often the budget asked whether it is closing

    def is_closing(self) -> bool:
        self.looked += 1
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_protocol(self) -> object:
        return None


def test_the_budget_walks_the_open_connections_only_at_a_cap() -> None:
    """Below its caps an admission looks at no other connection (it walked them all, twice:
    quadratic in the connections a burst opens); at a cap the closed ones still make room."""
    from typing import Any, cast

    from thinkloop.server.connections import ConnectionBudget, _Conn

    budget = ConnectionBudget(total=300, per_client=200)
    conns = [_Conn("10.0.0.1", cast(Any, _FakeTransport()), cast(Any, None), 0.0)
             for _ in range(200)]
    for conn in conns:
        assert budget.admit(conn) == "ok"
    assert sum(cast(Any, c.transport).looked for c in conns) == 0
    # At the client's cap: a connection closed without telling (an upgraded one) makes room.
    cast(Any, conns[0].transport).closed = True
    newcomer = _Conn("10.0.0.1", cast(Any, _FakeTransport()), cast(Any, None), 0.0)
    assert budget.admit(newcomer) == "ok"
    assert len(budget) == 200 and budget.evicted == 0
    budget.release(cast(Any, newcomer.transport))
    budget.release(cast(Any, newcomer.transport))  # twice: counted once
    assert len(budget) == 199
