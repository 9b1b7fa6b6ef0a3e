"""The gateway under a slowloris flood: N half-sent requests from one address.

``thinkloop serve --no-auth`` runs in its own process held to ``--fd-limit`` open files; this
client opens N connections (16 at a time) that each send part of a request head, then asks
``/healthz`` and waits for the gateway to drop the half-sent ones. Two configurations: the
default per-client cap (64), and the cap lifted so that the fd budget does the work. Prints
one row each: how long the flood took to open, the most files the gateway held during it,
what it held once settled, how long ``/healthz`` took, and how many half-sent requests were
closed and when (``nan`` ms: no answer within 10 s).

Usage: python benchmarks/gateway_flood.py [--connections 1100] [--fd-limit 512]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx

HALF_SENT = b"GET /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@contextlib.contextmanager
def serving(fd_limit: int, **settings: str) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("THINKLOOP_")}
    env.update({"THINKLOOP_HOME": tempfile.mkdtemp(), "THINKLOOP_MODEL": "openai:fake",
                "OPENAI_API_KEY": "unused", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    env.update({f"THINKLOOP_GATEWAY_{k.upper()}": v for k, v in settings.items()})
    proc = subprocess.Popen(
        [sys.executable, "-m", "thinkloop", "serve", "--no-auth", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit)))
    try:
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        yield port, proc
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def flood(port: int, pid: int, n: int) -> dict[str, float]:
    most, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                most[0] = max(most[0], fds(pid))
            time.sleep(0.002)

    def one(_: int) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(HALF_SENT)
        return s

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    with ThreadPoolExecutor(16) as pool:
        socks = list(pool.map(one, range(n)))
    opened = time.monotonic() - started
    time.sleep(0.5)
    stop.set()
    sampler.join()
    settled = fds(pid)
    t0 = time.monotonic()
    try:
        ok = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    except httpx.HTTPError:  # no answer in 10 s: the gateway is out of files
        ok = False
    healthz_ms = (time.monotonic() - t0) * 1000 if ok else float("nan")
    closed, took = dropped(socks, within_s=10)
    for s in socks:
        s.close()
    return {"open_s": opened, "peak": most[0], "settled": settled, "healthz_ms": healthz_ms,
            "closed": closed, "closed_s": took}


def dropped(socks: list[socket.socket], within_s: float) -> tuple[int, float]:
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    closed, started = 0, time.monotonic()
    while closed < len(socks) and time.monotonic() - started < within_s:
        for key, _ in sel.select(timeout=0.5):
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
    return closed, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=1100)
    parser.add_argument("--fd-limit", type=int, default=512)
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, args.connections + 1024), hard))
    rows = []
    for name, settings in (("per-client cap 64", {}),
                           ("fd budget", {"per_client_connections": "100000"})):
        with serving(args.fd_limit, header_timeout_s="2", **settings) as (port, proc):
            rows.append((name, flood(port, proc.pid, args.connections)))
    print(f"{args.connections} half-sent requests, gateway held to {args.fd_limit} files, "
          "header_timeout_s=2")
    print(f"{'configuration':<20}{'open s':>8}{'peak fds':>10}{'settled':>9}"
          f"{'healthz ms':>12}{'closed':>8}{'in s':>7}")
    for name, r in rows:
        print(f"{name:<20}{r['open_s']:>8.2f}{r['peak']:>10.0f}{r['settled']:>9.0f}"
              f"{r['healthz_ms']:>12.0f}{r['closed']:>8.0f}{r['closed_s']:>7.2f}")


if __name__ == "__main__":
    main()
