"""One error shape for every endpoint, and which of thinkloop's errors answers what: the
application's exception handlers and the fast lanes (``lanes.py``) answer from this table."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.responses import JSONResponse

from thinkloop.core.errors import (
    ConfigError,
    ConflictError,
    NotFoundError,
    RequestError,
    RunLimitError,
    UnknownAgentError,
)


def error(status: int, message: str, kind: str = "invalid_request_error",
          headers: dict[str, str] | None = None) -> JSONResponse:
    """One error shape for every endpoint (OpenAI's, so its clients show the message)."""
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}},
                        status_code=status, headers=headers)


def _not_found(exc: Exception) -> JSONResponse:
    return error(404, str(exc), "not_found_error")


def _conflict(exc: Exception) -> JSONResponse:
    # ConflictError, and the rest of the caller's RequestErrors (a paused session, ...).
    return error(409, str(exc), "conflict_error")


def _limited(exc: Exception) -> JSONResponse:
    return error(429, str(exc), "rate_limit_error", {"Retry-After": "1"})


def _bad(exc: Exception) -> JSONResponse:
    return error(400, str(exc))


# Looked up along the error's class hierarchy, most specific first (as Starlette looks up its
# exception handlers): an UnknownAgentError is a ConfigError, but answers 404.
HANDLERS: dict[type[Exception], Callable[[Exception], JSONResponse]] = {
    NotFoundError: _not_found,
    UnknownAgentError: _not_found,
    ConflictError: _conflict,
    RequestError: _conflict,
    RunLimitError: _limited,
    ConfigError: _bad,
}


def error_response(exc: Exception) -> JSONResponse | None:
    """The answer to ``exc`` raised by a route, or None when it is not one of the table's
    (a bug: the server's 500)."""
    for cls in type(exc).__mro__:
        handler = HANDLERS.get(cls)
        if handler is not None:
            return handler(exc)
    return None
