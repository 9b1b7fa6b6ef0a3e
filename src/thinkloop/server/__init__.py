"""The gateway: ``thinkloop serve`` (FastAPI + uvicorn), a thin shell over the library.

``create_app(GatewayConfig(...))`` builds the ASGI app: REST runs and sessions, SSE and
WebSocket events, an OpenAI-compatible ``/v1/chat/completions``, ``/metrics``, ``/healthz`` and
a web page at ``/``. Needs the ``server`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thinkloop.server.config import GatewayConfig

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["GatewayConfig", "create_app"]


def create_app(config: GatewayConfig | None = None, **kwargs: Any) -> FastAPI:
    from thinkloop.server.app import create_app as build

    return build(config, **kwargs)
