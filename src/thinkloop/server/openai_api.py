"""``POST /v1/chat/completions``: an agent behind the OpenAI Chat Completions API, so any
OpenAI client can call it as if it were a model (``model`` names the agent).

The last message is the task. Like every client of this API expects, a request is stateless:
earlier user/assistant turns become the run's history through a transient session (deleted
afterwards) and the run has no user, so no memory is read or written. A request that names a
session keeps state: ``session`` in the body (``extra_body`` in the openai client), the
``X-Thinkloop-Session`` header, or the standard ``user`` field (its value names the session).
The named session is continued (earlier turns are not resent) and the caller's memory is used.
Streaming sends the model's text as it comes, step after step.

On a gateway with a queue the run goes to the workers like any other (``Gateway.submit``):
its text comes from the run's event stream, its answer and usage from its final view, the
same for a run here or on a worker.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, Header
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from thinkloop.core.errors import ConfigError
from thinkloop.core.types import (
    UNSAVED,  # ended with no answer: the API reports a failure
    Message,
)
from thinkloop.server.auth import Principal
from thinkloop.server.deps import caller, gateway
from thinkloop.server.fleet import Followed
from thinkloop.server.gateway import SESSION_ID, Gateway, session_key

router = APIRouter(prefix="/v1")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(str(p.get("text", "")) for p in self.content
                           if p.get("type") == "text")
        return self.content or ""


class ChatRequest(BaseModel):
    # Sampling parameters (temperature, ...) are the agent's to choose: accepted, unused.
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=64)
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream: bool = False
    session: str | None = Field(None, min_length=1, max_length=128)
    user: str | None = Field(None, min_length=1, max_length=256)
    stream_options: dict[str, Any] | None = None


def _history(messages: list[ChatMessage]) -> tuple[list[Message], str]:
    last = messages[-1]
    if last.role != "user" or not last.text().strip():
        raise ConfigError("the last message must be a user message with text")
    earlier = [Message.user(m.text()) if m.role == "user" else Message.assistant(m.text())
               for m in messages[:-1] if m.role in ("user", "assistant") and m.text()]
    return earlier, last.text()


@router.get("/models")
async def models(_: Annotated[Principal, Depends(caller)],
                 gw: Annotated[Gateway, Depends(gateway)]) -> dict[str, Any]:
    return {"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": "thinkloop"}
        for name, _spec in await gw.router.names()]}


def named_session(body: ChatRequest, header: str | None) -> str | None:
    """The session a request names (body, then header, then ``user``), or None: stateless."""
    if body.session or header:
        return body.session or header
    if body.user is None:
        return None
    if SESSION_ID.fullmatch(body.user):
        return body.user
    # Any string is a valid OpenAI ``user``; a session id is not: the same user, the same id.
    return "user-" + hashlib.sha256(body.user.encode()).hexdigest()[:32]


@router.post("/chat/completions", response_model=None)
async def chat_completions(
    body: ChatRequest, who: Annotated[Principal, Depends(caller)],
    gw: Annotated[Gateway, Depends(gateway)],
    x_thinkloop_session: Annotated[str | None, Header(max_length=128)] = None,
) -> JSONResponse | EventSourceResponse:
    earlier, task = _history(body.messages)
    session, transient = named_session(body, x_thinkloop_session), None
    stateless = session is None
    if stateless and earlier:
        transient = session = f"oai-{uuid.uuid4().hex}"
        await gw.router.get(body.model)  # an unknown agent fails before anything is written
        await gw.store.append(session_key(who.user, session), earlier)
    try:
        run = await gw.submit(who, body.model, task, session, stream=body.stream,
                              remember=not stateless)
    except BaseException:
        await _drop(gw, who, transient)
        raise
    # Its caller cannot answer a question or approve a call: ask_human and approvals are told
    # so at once instead of waiting out the run's timeout (marked before the run's first await).
    gw.hub.unattended.add(run.id)
    cid = f"chatcmpl-{run.id}"
    if body.stream:
        usage = bool((body.stream_options or {}).get("include_usage"))
        return EventSourceResponse(_chunks(gw, who, run, cid, body.model, usage, transient),
                                   ping=15)
    try:
        async for _ in run.follow():
            pass
        view = await _final(gw, who, run)
    finally:
        await _drop(gw, who, transient, run.id)
    if view["status"] in UNSAVED or "text" not in view:
        return JSONResponse({"error": {"message": _failure(view), "type": "agent_error",
                                       "code": view["status"]}}, status_code=502)
    return JSONResponse({
        "id": cid, "object": "chat.completion", "created": int(run.created_at),
        "model": body.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": view["text"]},
                     "finish_reason": "stop"}],
        "usage": _usage(view),
        "thinkloop": {"run_id": run.id, "status": view["status"],
                      "steps": len(view.get("steps") or ())},
    })


async def _final(gw: Gateway, who: Principal, run: Followed) -> dict[str, Any]:
    """The ended run's view (its answer, usage, error), wherever it executed."""
    return (await gw.run(who, run.id)).view()


def _failure(view: dict[str, Any]) -> str:
    return str(view.get("error") or f"the run ended {view['status']}")


def _usage(view: dict[str, Any]) -> dict[str, int]:
    u = view.get("usage") or {}
    i, o = int(u.get("input_tokens", 0)), int(u.get("output_tokens", 0))
    return {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}


async def _chunks(gw: Gateway, who: Principal, run: Followed, cid: str, model: str,
                  include_usage: bool, transient: str | None) -> AsyncIterator[str]:
    created = int(run.created_at)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return orjson.dumps({"id": cid, "object": "chat.completion.chunk", "created": created,
                             "model": model, "choices": [{"index": 0, "delta": delta,
                                                          "finish_reason": finish}]}).decode()

    try:
        yield chunk({"role": "assistant", "content": ""})
        step_with_text = -1
        async for _, data in run.follow():
            event = orjson.loads(data)
            if event["type"] != "chunk" or event["payload"].get("kind") != "text":
                continue
            text = event["payload"].get("content") or ""
            if step_with_text not in (-1, event["step"]):
                text = "\n\n" + text  # a new step's text starts a new paragraph
            step_with_text = event["step"]
            yield chunk({"content": text})
        view = await _final(gw, who, run)
        if view["status"] in UNSAVED or "text" not in view:
            yield orjson.dumps({"error": {"message": _failure(view), "type": "agent_error",
                                          "code": view["status"]}}).decode()
            return
        yield chunk({}, "stop")
        if include_usage:
            yield orjson.dumps({"id": cid, "object": "chat.completion.chunk",
                                "created": created, "model": model, "choices": [],
                                "usage": _usage(view)}).decode()
        yield "[DONE]"
    finally:
        await _drop(gw, who, transient, run.id)


async def _drop(gw: Gateway, who: Principal, transient: str | None,
                run_id: str | None = None) -> None:
    gw.hub.unattended.discard(run_id or "")
    if transient is not None:
        await gw.store.delete_session(session_key(who.user, transient))
