"""Request plumbing shared by the routers: the gateway and the caller."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import HTTPException, Request

from thinkloop.server.auth import LOCAL_USER, Principal, authenticate, key_from_headers
from thinkloop.server.doors import PRINCIPAL
from thinkloop.server.gateway import Gateway

LOCAL = Principal(LOCAL_USER, ("user", "admin"))


async def gateway(request: Request) -> Gateway:
    # async: FastAPI runs a plain ``def`` dependency in its thread pool, a thread hop (and a
    # worker thread's stack) for every request.
    return _gateway(request)


def _gateway(request: Request) -> Gateway:
    gw: Gateway = request.app.state.gateway
    return gw


async def identify(gw: Gateway, headers: Mapping[str, str],
                   scope: Mapping[str, Any] | None = None) -> Principal | None:
    if gw.config.no_auth:
        return LOCAL
    found: Principal | None = (scope or {}).get(PRINCIPAL)  # the doors checked the key
    if found is not None:
        return found
    key = key_from_headers(headers.get("authorization"), headers.get("x-api-key"))
    return await authenticate(gw.store, key)


async def caller(request: Request) -> Principal:
    who = await identify(_gateway(request), request.headers, request.scope)
    if who is None:
        missing = not (request.headers.get("authorization") or request.headers.get("x-api-key"))
        raise HTTPException(401, "an API key is required (Authorization: Bearer KEY)" if missing
                            else "invalid API key", headers={"WWW-Authenticate": "Bearer"})
    return who


async def admin(request: Request) -> Principal:
    who = await caller(request)
    if not who.admin:
        raise HTTPException(403, "this needs the admin role")
    return who
