"""The terminal UI driven headless (``App.run_test``) on live runs of the loopback model, in
process and through a real gateway (uvicorn on 127.0.0.1, restartable on the same port)."""

from __future__ import annotations

import asyncio
import html
import importlib.util
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

MISSING = [m for m in ("textual", "fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
collect_ignore_glob = ["test_*.py"] if MISSING else []

from thinkloop.testing.openai_server import OpenAIServer  # noqa: E402

AGENTS = """
agents:
  helper:
    model: openai:fake
    tools: [calculator]
    memory: false
    max_steps: 6
  careful:
    model: openai:fake
    tools: [calculator]
    memory: false
    ask_before: [calculator]
    max_steps: 6
  asker:
    model: openai:fake
    tools: [ask_human]
    memory: false
    approve: auto
  slow:
    model: openai:steps-3
    tools: none
    memory: false
  noter:
    model: openai:fake
    tools: [calculator]
    memory: true
    approve: auto
"""


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


@pytest.fixture
def model(model_server: OpenAIServer) -> OpenAIServer:
    model_server.clear()
    return model_server


@pytest.fixture(scope="module")
def agents_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agents") / "agents.yaml"
    path.write_text(AGENTS)
    return path


class Gateway:
    """``thinkloop serve``'s app under uvicorn in a thread; ``stop`` then ``start`` again on
    the same port and store (a gateway that went away and came back)."""

    def __init__(self, tmp: Path, agents: Path) -> None:
        self.db = tmp / "gateway.db"
        self.agents = agents
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.server: Any = None
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        import uvicorn

        from thinkloop.server import GatewayConfig, create_app
        from thinkloop.store.sqlite import SQLiteStore

        store = SQLiteStore(self.db)
        cfg = GatewayConfig(agents_file=self.agents, approval_timeout_s=20, port=self.port)
        app = create_app(cfg, store=store)
        self.server = uvicorn.Server(uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on",
            timeout_graceful_shutdown=2))

        def serve() -> None:
            async def main() -> None:
                try:
                    await self.server.serve()
                finally:
                    await store.aclose()

            asyncio.run(main())

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the gateway did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(15)

    def key(self, user: str) -> str:
        from thinkloop.server.auth import create_key
        from thinkloop.store.sqlite import SQLiteStore

        async def make() -> str:
            store = SQLiteStore(self.db)
            try:
                return await create_key(store, user, ("user",))
            finally:
                await store.aclose()

        with ThreadPoolExecutor(1) as pool:
            return pool.submit(lambda: asyncio.run(make())).result()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer,
            agents_file: Path) -> Iterator[Gateway]:
    gw = Gateway(tmp_path_factory.mktemp("gw"), agents_file)
    gw.start()
    try:
        yield gw
    finally:
        gw.stop()


MakeApp = Callable[..., Any]


@pytest.fixture(params=["local", "gateway"])
def make_app(request: pytest.FixtureRequest, model: OpenAIServer, agents_file: Path
             ) -> MakeApp:
    """``make_app(agent=..., session=..., start=...)``: the app on this test's backend."""
    from thinkloop.tui.app import ThinkloopApp

    if request.param == "local":
        from thinkloop.settings import load_settings
        from thinkloop.store.open import open_store
        from thinkloop.tui.local import LocalBackend

        def local(**kw: Any) -> ThinkloopApp:
            settings = load_settings()
            backend = LocalBackend(settings, open_store(settings=settings),
                                   agents_file=agents_file, user=kw.pop("user", "ana"))
            return ThinkloopApp(backend, **kw)

        return local
    gw: Gateway = request.getfixturevalue("gateway")
    key = gw.key(f"user-{uuid.uuid4().hex[:8]}")  # each test sees only its own runs

    def remote(**kw: Any) -> ThinkloopApp:
        from thinkloop.tui.remote import GatewayBackend

        kw.pop("user", None)
        return ThinkloopApp(GatewayBackend(gw.url, key), **kw)

    return remote


async def until(pilot: Any, condition: Callable[[], object], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)


def svg_text(path: str | Path) -> str:
    """The visible text of a Textual SVG screenshot, one line per terminal row."""
    svg = Path(path).read_text(encoding="utf-8")
    rows: dict[str, list[str]] = {}
    for m in re.finditer(r'<text[^>]*\by="([\d.]+)"[^>]*>(.*?)</text>', svg, re.S):
        rows.setdefault(m.group(1), []).append(html.unescape(m.group(2)))
    lines = ["".join(parts).replace("\xa0", " ")
             for _, parts in sorted(rows.items(), key=lambda kv: float(kv[0]))]
    return "\n".join(lines)


def shot(app: Any, tmp_path: Path, name: str) -> str:
    path = app.save_screenshot(f"{name}.svg", path=str(tmp_path))
    return svg_text(path)


@asynccontextmanager
async def running(app: Any, size: tuple[int, int] = (80, 24)) -> AsyncIterator[Any]:
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        yield pilot


async def say(pilot: Any, text: str) -> None:
    prompt = pilot.app.screen.query_one("#prompt")
    prompt.value = text
    prompt.focus()
    await pilot.press("enter")
