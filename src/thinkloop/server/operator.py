"""Read endpoints for operators (``thinkloop ui --gateway``): the caller's runs with their
numbers as they go, sessions, memory layers (filtered by run) and an agent's tools.

Everything is the caller's own: runs they started, sessions under their namespace, memories
of ``user:<them>``.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from thinkloop.api import RunRecord, run_memories
from thinkloop.core.tool import READ_MORE
from thinkloop.errors import NotFoundError
from thinkloop.server.auth import Principal
from thinkloop.server.deps import caller, gateway
from thinkloop.server.fleet import Followed
from thinkloop.server.gateway import Gateway
from thinkloop.server.live import LiveRun

router = APIRouter(prefix="/v1")
Caller = Annotated[Principal, Depends(caller)]
GW = Annotated[Gateway, Depends(gateway)]


def _live(gw: Gateway, run: LiveRun) -> dict[str, Any]:
    state = run.handle.state
    u = state.usage
    return {"id": run.id, "agent": run.agent, "status": run.status, "session": run.session,
            "task": state.task, "steps": len(state.steps), "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens, "cost_usd": u.cost_usd,
            "started_at": run.created_at, "ended_at": run.finished_at,
            "waiting": len(gw.hub.pending(run.id))}


def _stored(r: RunRecord, user: str) -> dict[str, Any]:
    session = r.session_id.removeprefix(f"{user}:") if r.session_id else None
    return {"id": r.id, "agent": r.agent, "status": r.status, "session": session,
            "task": r.task, "steps": r.steps, "input_tokens": r.input_tokens,
            "output_tokens": r.output_tokens, "cost_usd": r.cost_usd,
            "started_at": r.started_at, "ended_at": r.ended_at, "waiting": 0}


async def _remote(gw: Gateway, run: Followed, stored: dict[str, Any] | None,
                  user: str) -> dict[str, Any]:
    view = run.view()
    row = dict(stored) if stored is not None else {
        "id": run.id, "agent": run.agent, "session": run.session, "task": "", "steps": 0,
        "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0,
        "started_at": run.created_at, "ended_at": None}
    waiting = len(await gw.waiting_for(run))
    # A running run waiting for an answer (an approval, a question) shows as such.
    row.update(status="waiting" if waiting and run.status == "running" else run.status,
               worker=view.get("worker"), waiting=waiting, priority=view.get("priority", 0))
    return row


async def _records(gw: Gateway, user: str, limit: int) -> list[RunRecord]:
    list_runs = getattr(gw.store, "list_runs", None)
    if list_runs is None:
        return []
    return [r for r in await list_runs(None, None, limit) if r.user_id == user]


@router.get("/runs")
async def list_runs(who: Caller, gw: GW,
                    limit: Annotated[int, Query(ge=1, le=500)] = 50) -> dict[str, Any]:
    """The caller's runs, newest first: those in this gateway as they go, then recorded."""
    rows = {r["id"]: r for r in (_stored(rec, who.user)
                                 for rec in await _records(gw, who.user, limit))}
    for run in gw.live.of_user(who.user, who.admin):  # a run's own numbers, as they go
        rows[run.id] = _live(gw, run)
    if gw.fleet is not None:  # runs queued or executing on workers, as Redis has them now
        for remote in await gw.fleet.active_runs(who.user):
            rows[remote.id] = await _remote(gw, remote, rows.get(remote.id), who.user)
    ordered = sorted(rows.values(), key=lambda r: r["started_at"], reverse=True)
    return {"runs": ordered[:limit]}


@router.get("/sessions")
async def list_sessions(who: Caller, gw: GW) -> dict[str, Any]:
    prefix = f"{who.user}:"
    return {"sessions": [{"id": i.id.removeprefix(prefix), "messages": i.messages,
                          "updated_at": i.updated_at}
                         for i in await gw.store.list_sessions(500) if i.id.startswith(prefix)]}


@router.get("/memory")
async def memory(who: Caller, gw: GW, run: str | None = None,
                 only_run: bool = False) -> dict[str, Any]:
    """The caller's memory layers; ``run`` + ``only_run``: what that run wrote."""
    memories = getattr(gw.store, "memories", None)
    if memories is None:
        raise NotFoundError("this store keeps no memory")
    owner = f"user:{who.user}"
    records = await memories(owner)
    if run is not None:
        mine = await _records(gw, who.user, 500)
        rec = next((r for r in mine if r.id == run), None)
        if rec is None:
            raise NotFoundError(f"no run {run}")
        if only_run:
            records = run_memories(records, rec, mine)
    return {"owner": owner, "memories": [
        {k: v for k, v in dataclasses.asdict(r).items() if k != "embedding"} for r in records]}


@router.get("/agents/{name}")
async def get_agent(name: str, _: Caller, gw: GW) -> dict[str, Any]:
    agent = await gw.router.get(name)
    # read_more is the engine's pager, not a tool the agent was given.
    tools = sorted(n for n in agent.tools if n != READ_MORE)
    return {"name": name, "model": agent.model.name, "tools": tools}
