"""A real gateway for the tests: uvicorn on 127.0.0.1 in a thread of its own, a SQLite store,
agents from a YAML file, and the loopback OpenAI-compatible server as every agent's model."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from thinkloop.server import GatewayConfig, create_app
from thinkloop.server.auth import create_key
from thinkloop.server.connections import uvicorn_config
from thinkloop.store.sqlite import SQLiteStore
from thinkloop.testing.openai_server import OpenAIServer

# The `server` extra (CI installs it with `all`): an environment without it collects none of
# the gateway's tests rather than failing them.
MISSING = [m for m in ("fastapi", "uvicorn", "sse_starlette", "prometheus_client", "websockets")
           if importlib.util.find_spec(m) is None]
collect_ignore_glob = ["test_*.py"] if MISSING else []

AGENTS = """
agents:
  helper:
    description: Arithmetic and notes
    model: openai:fake
    tools: [calculator]
    memory: false
    max_steps: 6
  worker:
    description: Runs shell commands, asking first
    model: openai:fake
    tools: [shell, calculator]
    memory: false
    approve: ask
    ask_before: [calculator]
    max_steps: 6
  asker:
    model: openai:fake
    tools: [ask_human, send_message]
    memory: false
    approve: auto
  keeper:
    description: Remembers (the memory tools, for the OpenAI endpoint's state tests)
    model: openai:fake
    tools: [calculator]
    max_steps: 4
  bench:
    model: openai:steps-3
    tools: none
    memory: false
    guards: false
"""


class Gateway:
    """uvicorn serving ``create_app`` on a free loopback port, in a background thread."""

    def __init__(self, config: GatewayConfig, store_path: Path, http: str = "auto",
                 **options: Any) -> None:
        self.config = config
        self.store_path = store_path
        self.store = SQLiteStore(store_path)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._sock = sock
        config = config.model_copy(update={"port": self.port})
        app = create_app(config, store=self.store)
        self.token_file: Path | None = app.state.token_file
        import uvicorn

        # The limits `thinkloop serve` runs with (thinkloop.server.connections).
        # (``http``: the parser, uvicorn_config's choice by default; ``options``: uvicorn's.)
        self.server = uvicorn.Server(uvicorn_config(app, config, http=http, lifespan="on",
                                                    timeout_graceful_shutdown=5, **options))
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        async def main() -> None:
            try:
                await self.server.serve(sockets=[self._sock])
            finally:
                await self.store.aclose()

        asyncio.run(main())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Gateway:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the gateway did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(15)

    def key(self, user: str, *roles: str) -> str:
        """A real API key, made the way `thinkloop keys create` makes one."""
        async def make() -> str:
            store = SQLiteStore(self.store_path)
            try:
                return await create_key(store, user, roles or ("user",))
            finally:
                await store.aclose()

        # A thread of its own: async tests call this from inside their event loop.
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(lambda: asyncio.run(make())).result()


@dataclass
class Stack:
    gateway: Gateway
    model: OpenAIServer

    @property
    def url(self) -> str:
        return self.gateway.url

    def client(self, key: str | None) -> httpx.Client:
        """A program's client: with ``key``, or on a --no-auth gateway with its token."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if key is None and self.gateway.token_file is not None:
            headers["X-Thinkloop-Token"] = self.gateway.token_file.read_text().strip()
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def model_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
        os.environ["OPENAI_BASE_URL"] = srv.base_url
        os.environ["OPENAI_API_KEY"] = "sk-test"
        try:
            yield srv
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def start_stack(tmp: Path, model: OpenAIServer, uvicorn: dict[str, Any] | None = None,
                **config: Any) -> Iterator[Stack]:
    agents = tmp / "agents.yaml"
    agents.write_text(AGENTS)
    cfg = GatewayConfig(agents_file=agents, approval_timeout_s=20, **config)
    with Gateway(cfg, tmp / "gateway.db", **(uvicorn or {})) as gw:
        yield Stack(gw, model)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer
          ) -> Iterator[Stack]:
    yield from start_stack(tmp_path_factory.mktemp("gw"), model_server)


def wait_for(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)
