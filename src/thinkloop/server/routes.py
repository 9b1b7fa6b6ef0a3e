"""REST endpoints under ``/v1``: runs, sessions, inputs and agents."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from thinkloop.core.errors import NotFoundError
from thinkloop.core.spec import BOOTSTRAP_FILE_MAX, BOOTSTRAP_FILES, USER_FILES
from thinkloop.server.agents import DEFAULT_AGENT, file_view, parse_definition
from thinkloop.server.auth import Principal
from thinkloop.server.deps import admin, caller, gateway
from thinkloop.server.fleet import Followed
from thinkloop.server.gateway import Gateway
from thinkloop.server.inputs import Answer
from thinkloop.server.sse import wants_stream

router = APIRouter(prefix="/v1")
Caller = Annotated[Principal, Depends(caller)]
Admin = Annotated[Principal, Depends(admin)]
GW = Annotated[Gateway, Depends(gateway)]


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=200_000)
    agent: str = Field(DEFAULT_AGENT, min_length=1, max_length=64)
    session: str | None = Field(None, min_length=1, max_length=128)
    # Stream the model's text as ``chunk`` events (off: one event per model reply).
    stream: bool = True
    # With workers: queued runs of a higher priority start first (one process: no queue).
    priority: int = Field(0, ge=-100, le=100)


class InputRequest(BaseModel):
    """An answer to what a run waits on: ``approved`` for an approval (the event
    ``approval.requested`` names its ``id``), ``answer`` for a question (``input.requested``)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=100)
    approved: bool | None = None
    answer: str | None = Field(None, max_length=100_000)
    reason: str = Field("", max_length=2000)

    @model_validator(mode="after")
    def _one(self) -> InputRequest:
        if (self.approved is None) == (self.answer is None):
            raise ValueError("give exactly one of 'approved' (an approval) or 'answer' "
                             "(a question)")
        return self


STREAMED: dict[int | str, dict[str, Any]] = {200: {
    "description": "With `Accept: text/event-stream`: the run's events as server-sent events, "
                   "from its first (`id` is the event's number, as on `GET "
                   "/v1/runs/{id}/events`), then an `end` frame; `Location` names the run.",
    "headers": {"Location": {"description": "the run: `/v1/runs/{id}`",
                             "schema": {"type": "string"}}},
    "content": {"text/event-stream": {"schema": {"type": "string"}}}}}


@router.post("/runs", status_code=202, response_model=None, responses=STREAMED)
async def start_run(body: RunRequest, request: Request, who: Caller,
                    gw: GW) -> dict[str, Any] | Response:
    """Start a run. Answers 202 with its id at once; or, asked with `Accept:
    text/event-stream`, 200 with its event stream (one request instead of this and `GET
    /v1/runs/{id}/events`): the same events and ids, so a cut stream resumes with `GET
    /v1/runs/{id}/events` and `Last-Event-ID`; the run's id is in the `Location` header
    and in every event. A refusal (a 429 over the run limits, a 404 for an unknown agent)
    is the usual JSON error, before any stream starts."""
    run = await submit(gw, who, body)
    if wants_stream(request.headers.get("accept")):
        from thinkloop.server.streams import started_stream

        return await started_stream(gw, who, run, request.headers)
    return started(run, body)


async def submit(gw: Gateway, who: Principal, body: RunRequest) -> Followed:
    return await gw.submit(who, body.agent, body.task, body.session, body.stream,
                           priority=body.priority)


def started(run: Followed, body: RunRequest) -> dict[str, Any]:
    """What ``POST /v1/runs`` answers (the route and its fast lane)."""
    return {"id": run.id, "status": run.status, "agent": run.agent, "session": run.session,
            "priority": body.priority, "events": f"/v1/runs/{run.id}/events"}


@router.get("/runs/{run_id}")
async def get_run(run_id: str, who: Caller, gw: GW) -> dict[str, Any]:
    run = await gw.run(who, run_id)
    view = run.view()
    view["waiting_for"] = [{"id": i, "kind": k} for i, k in await gw.waiting_for(run)]
    return view


@router.post("/runs/{run_id}/abort", status_code=202)
async def abort_run(run_id: str, who: Caller, gw: GW) -> dict[str, Any]:
    run = await gw.abort(who, run_id)
    return {"id": run.id, "status": "cancelling"}


@router.post("/runs/{run_id}/input")
async def answer_run(run_id: str, body: InputRequest, who: Caller, gw: GW) -> dict[str, Any]:
    kind = await gw.answer(who, run_id, body.id,
                     Answer(body.approved, body.answer, body.reason))
    return {"id": body.id, "kind": kind, "accepted": True}


@router.get("/runs/{run_id}/trace")
async def run_trace(run_id: str, who: Caller, gw: GW) -> dict[str, Any]:
    run = await gw.run(who, run_id)
    return await gw.trace(run)


@router.post("/sessions/{session_id}/abort", status_code=202)
async def abort_session(session_id: str, who: Caller, gw: GW) -> dict[str, Any]:
    return {"session": session_id, "aborted": await gw.abort_session(who, session_id)}


@router.get("/sessions/{session_id}")
async def get_session(session_id: str, who: Caller, gw: GW) -> dict[str, Any]:
    return await gw.session(who, session_id)


class ScheduleRequest(BaseModel):
    """A cron schedule of runs (``thinkloop worker``s fire it; a sixth cron field is seconds)."""

    model_config = ConfigDict(extra="forbid")

    cron: str = Field(min_length=9, max_length=200)
    task: str = Field(min_length=1, max_length=200_000)
    agent: str = Field(DEFAULT_AGENT, min_length=1, max_length=64)
    session: str | None = Field(None, min_length=1, max_length=128)
    priority: int = Field(0, ge=-100, le=100)
    # ``platform:chat``: where its runs deliver their answer, the only places they message.
    deliver_to: list[str] = Field(default_factory=list, max_length=20)


@router.get("/schedules")
async def list_schedules(who: Caller, gw: GW) -> dict[str, Any]:
    return {"schedules": await gw.fleet_of("schedules").schedules(who.user)}


@router.post("/schedules", status_code=201)
async def add_schedule(body: ScheduleRequest, who: Caller, gw: GW) -> dict[str, Any]:
    if not await gw.router.definitions.exists(body.agent):
        raise NotFoundError(f"no agent named {body.agent!r}")
    return await gw.fleet_of("schedules").add_schedule(
        who.user, body.cron, body.agent, body.task, body.session, body.priority,
        tuple(body.deliver_to))


@router.delete("/schedules/{schedule_id}")
async def remove_schedule(schedule_id: str, who: Caller, gw: GW) -> dict[str, Any]:
    if not await gw.fleet_of("schedules").remove_schedule(who.user, schedule_id):
        raise NotFoundError(f"no schedule {schedule_id!r}")
    return {"id": schedule_id, "deleted": True}


@router.get("/agents")
async def list_agents(_: Caller, gw: GW) -> dict[str, Any]:
    return {"agents": [{"name": n, "description": s.description, "model": s.model,
                        "tools": s.tools if s.tools is not None else "default",
                        "fallbacks": s.fallbacks, "approve": s.approve or "ask"}
                       for n, s in await gw.router.names()]}


@router.put("/agents/{name}")
async def put_agent(name: str, body: dict[str, Any], _: Admin, gw: GW) -> dict[str, Any]:
    spec = parse_definition(name, body)
    await gw.store.put_agent(name, spec.model_dump_json(exclude_defaults=True))
    gw.router.invalidate(name)
    return {"name": name, "definition": orjson.loads(spec.model_dump_json())}


@router.delete("/agents/{name}")
async def delete_agent(name: str, _: Admin, gw: GW) -> dict[str, Any]:
    if not await gw.store.delete_agent(name):
        raise NotFoundError(f"no agent {name!r} in the store")
    gw.router.invalidate(name)
    return {"name": name, "deleted": True}


class FileBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(max_length=BOOTSTRAP_FILE_MAX)


async def _spec(gw: Gateway, name: str) -> Any:
    spec = await gw.router.definitions.get(name)
    if spec is None:
        raise NotFoundError(f"no agent named {name!r}")
    return spec


@router.get("/agents/{name}/files")
async def list_agent_files(name: str, _: Caller, gw: GW) -> dict[str, Any]:
    spec = await _spec(gw, name)
    views = [file_view(gw.settings, name, spec, f) for f in BOOTSTRAP_FILES]
    return {"agent": name, "type": spec.type,
            "files": [{"name": v["name"], "source": v["source"], "chars": len(v["content"])}
                      for v in views]}


@router.get("/agents/{name}/files/{file}")
async def get_agent_file(name: str, file: str, _: Caller, gw: GW) -> dict[str, Any]:
    return file_view(gw.settings, name, await _spec(gw, name), file)


@router.put("/agents/{name}/files/{file}")
async def put_agent_file(name: str, file: str, body: FileBody, _: Admin,
                         gw: GW) -> dict[str, Any]:
    """Keep the file in the store: the agent's next run reads it (its cached build is
    dropped now)."""
    file_view(gw.settings, name, await _spec(gw, name), file)  # a known file name
    await gw.store.put_agent_file(name, file, body.content)
    gw.router.invalidate(name)
    return file_view(gw.settings, name, await _spec(gw, name), file)


@router.delete("/agents/{name}/files/{file}")
async def delete_agent_file(name: str, file: str, _: Admin, gw: GW) -> dict[str, Any]:
    """Back to the file on disk (or the template)."""
    if not await gw.store.delete_agent_file(name, file):
        raise NotFoundError(f"agent {name!r} keeps no {file} in the store")
    gw.router.invalidate(name)
    return file_view(gw.settings, name, await _spec(gw, name), file)


# --- an open agent's files of the caller (managed mode: kept in the store per user) ---------


async def _open_spec(gw: Gateway, name: str, file: str | None = None) -> Any:
    spec = await _spec(gw, name)
    if spec.type != "open":
        raise NotFoundError(f"agent {name!r} is predefined: its bootstrap files are the "
                            f"agent's own (/v1/agents/{name}/files); only an open agent keeps "
                            "them per user")
    if file is not None and file not in USER_FILES:
        raise NotFoundError(f"no per-user file {file!r}; one of {', '.join(USER_FILES)}")
    return spec


async def _my_file(gw: Gateway, name: str, spec: Any, user: str, file: str) -> dict[str, Any]:
    mine = await gw.store.user_files(name, user)
    if file in mine:
        return {"agent": name, "user": user, "name": file, "content": mine[file],
                "source": "user"}
    # Not seeded yet: what the user's first run will copy from the agent.
    view = file_view(gw.settings, name, spec, file)
    return {**view, "user": user, "source": f"agent:{view['source']}"}


@router.get("/agents/{name}/me/files")
async def list_my_files(name: str, who: Caller, gw: GW) -> dict[str, Any]:
    """The caller's own copy of an open agent's files (never another user's)."""
    spec = await _open_spec(gw, name)
    views = [await _my_file(gw, name, spec, who.user, f) for f in USER_FILES]
    return {"agent": name, "user": who.user,
            "files": [{"name": v["name"], "source": v["source"], "chars": len(v["content"])}
                      for v in views]}


@router.get("/agents/{name}/me/files/{file}")
async def get_my_file(name: str, file: str, who: Caller, gw: GW) -> dict[str, Any]:
    return await _my_file(gw, name, await _open_spec(gw, name, file), who.user, file)


@router.put("/agents/{name}/me/files/{file}")
async def put_my_file(name: str, file: str, body: FileBody, who: Caller,
                      gw: GW) -> dict[str, Any]:
    """Edit the caller's own copy: their next run reads it; nobody else's changes."""
    spec = await _open_spec(gw, name, file)
    await gw.store.put_user_file(name, who.user, file, body.content)
    return await _my_file(gw, name, spec, who.user, file)


@router.delete("/agents/{name}/me/files/{file}")
async def delete_my_file(name: str, file: str, who: Caller, gw: GW) -> dict[str, Any]:
    """Drop the caller's copy: their next run seeds it again from the agent's."""
    spec = await _open_spec(gw, name, file)
    if not await gw.store.delete_user_file(name, who.user, file):
        raise NotFoundError(f"you keep no {file} of agent {name!r}")
    return await _my_file(gw, name, spec, who.user, file)
