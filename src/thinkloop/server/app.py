"""``create_app``: the FastAPI application behind ``thinkloop serve``."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from thinkloop.api import validation_summary
from thinkloop.core.settings import Settings, gateway_token_file, load_settings
from thinkloop.core.tool import Tool
from thinkloop.server.config import GatewayConfig
from thinkloop.server.doors import Doors, cookie_name, publish_token, withdraw_token
from thinkloop.server.errors import HANDLERS, error, error_response
from thinkloop.server.gateway import FleetFactory, Gateway
from thinkloop.server.lanes import Lanes
from thinkloop.server.sse import stop_streams_on_exit

PAGE = Path(__file__).with_name("static") / "index.html"


def validation_message(exc: RequestValidationError) -> str:
    return validation_summary(exc, root="body", skip=("body",))


# What runs beside the API while it serves, given the app (its gateway: app.state.gateway); it
# may add routes of its own (a chat platform's webhook).
Service = Callable[[FastAPI], AbstractAsyncContextManager[Any]]


def create_app(config: GatewayConfig | None = None, *, store: Any = None,
               settings: Settings | None = None, tools: Sequence[Tool] = (),
               services: Sequence[Service] = (),
               fleet: FleetFactory | None = None) -> FastAPI:
    """The gateway app. ``store``: an open durable store (default: ``open_store(url)``,
    opened at startup and closed at shutdown); ``tools``: your own tools, which every agent
    gets besides the built-in ones its definition names; ``services``: what runs beside the
    API for as long as it serves, given the gateway (chat channels); ``fleet``: workers to
    hand runs to (``thinkloop.workers.fleet.fleet_factory``; None: runs execute here)."""
    from thinkloop.server.openai_api import router as openai_router
    from thinkloop.server.operator import router as operator_router
    from thinkloop.server.routes import router as rest_router
    from thinkloop.server.streams import router as stream_router

    settings = settings or load_settings()  # read once, when the app is made
    cfg = config or GatewayConfig.from_settings(settings)

    token = secrets.token_urlsafe(32)  # this process's (--no-auth): see server/doors.py
    token_file = gateway_token_file(settings.home, cfg.port) if cfg.no_auth else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = store is None
        if owned:
            from thinkloop.api import open_store

            db: Any = open_store(cfg.store_url, settings=settings)
        else:
            db = store
        gateway = Gateway(cfg, db, settings, tools, fleet)
        app.state.gateway = gateway
        if token_file is not None:
            publish_token(token_file, token)
        exiting = asyncio.get_running_loop().create_task(stop_streams_on_exit(gateway.streams))
        try:
            async with AsyncExitStack() as stack:
                for service in services:
                    await stack.enter_async_context(service(app))
                yield
        finally:
            exiting.cancel()
            await gateway.aclose()
            if owned:
                await db.aclose()
            if token_file is not None:
                withdraw_token(token_file, token)

    app = FastAPI(title="thinkloop gateway", lifespan=lifespan, docs_url="/docs",
                  redoc_url=None)
    app.state.token_file = token_file
    asked_each_second(app)
    # The doors first, then the fast lanes of the two requests every run makes (lanes.py).
    app.add_middleware(Lanes)
    app.add_middleware(Doors, config=cfg, token=token)
    app.include_router(rest_router)
    app.include_router(stream_router)
    app.include_router(openai_router)
    app.include_router(operator_router)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "authentication_error" if exc.status_code == 401 else "invalid_request_error"
        return error(exc.status_code, str(exc.detail), kind, dict(exc.headers or {}))

    for cls in HANDLERS:
        app.add_exception_handler(cls, _handled)

    @app.get("/", include_in_schema=False)
    async def page(request: Request) -> HTMLResponse:
        response = HTMLResponse(PAGE.read_text(encoding="utf-8"))
        if cfg.no_auth:  # what lets this page, and no other, call the gateway
            response.set_cookie(cookie_name(request.scope), token, httponly=True,
                                samesite="strict")
        return response

    @app.get("/healthz")
    async def healthz(request: Request) -> dict[str, Any]:
        gw: Gateway = request.app.state.gateway
        if gw.fleet is None:
            return {"status": "ok", "active_runs": gw.live.active_count}
        fleet = await gw.fleet.health()
        status = "ok" if fleet.get("queue") == "ok" and fleet.get("store") == "ok" else "degraded"
        return {"status": status, "active_runs": gw.live.active_count, **fleet}

    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        gw: Gateway = request.app.state.gateway
        extra = await gw.fleet.metrics() if gw.fleet is not None else {}
        return Response(gw.metrics.render() + _lines(extra),
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    return app


class _Switch:
    """FastAPI's OpenTelemetry instrumentation (its ``_native_telemetry``) asked whether it is
    on once every ``every_s``, not on every request: the answer looks up three global
    providers, 6% of the gateway's CPU under load (py-spy). A provider installed meanwhile
    is seen within ``every_s``."""

    def __init__(self, inner: Any, every_s: float = 1.0) -> None:
        self.inner, self.every_s = inner, every_s
        self._on, self._until = False, float("-inf")

    def enabled(self) -> bool:
        now = time.monotonic()
        if now >= self._until:
            self._on, self._until = bool(self.inner.enabled()), now + self.every_s
        return self._on

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def asked_each_second(app: FastAPI) -> None:
    """Put :class:`_Switch` over ``app``'s instrumentation, if its FastAPI has one."""
    inner = getattr(app, "_native_telemetry", None)
    if inner is not None and callable(getattr(inner, "enabled", None)):
        setattr(app, "_native_telemetry", _Switch(inner))  # noqa: B010 (FastAPI types it)


async def _handled(_: Request, exc: Exception) -> Response:
    response = error_response(exc)
    if response is None:  # not one of the table's: registered only for those
        raise exc
    return response


def _lines(values: dict[str, float]) -> bytes:
    """Fleet-wide figures, in the Prometheus text format (gauges read at scrape time)."""
    out, typed = [], set()
    for name, value in sorted(values.items()):
        base = name.partition("{")[0]
        if base not in typed:
            typed.add(base)
            out.append(f"# TYPE {base} gauge")
        out.append(f"{name} {value}")
    return ("\n".join(out) + "\n").encode() if out else b""
