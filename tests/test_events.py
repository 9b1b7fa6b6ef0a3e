"""Typed events: the union is closed over what the code emits, each event round-trips through
its one JSON form (audit log and gateway wire), and a real run's stored log reads back typed."""

from __future__ import annotations

import ast
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

import orjson
import pytest

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.events import (
    BY_TYPE,
    EVENT_CLASSES,
    Event,
    GuardBlocked,
    LlmRequest,
    LlmResponse,
    RunCompleted,
    RunStarted,
    StepCompleted,
    ToolCalled,
    ToolReturned,
    from_dict,
    to_dict,
)
from thinkloop.models.scripted import call, reply
from thinkloop.store import SQLiteStore
from thinkloop.store.serialize import (
    LoggedEvents,
    event_from_row,
    event_row,
    event_to_dict,
    wire_json,
)
from thinkloop.types import Usage

SRC = Path(__file__).resolve().parents[1] / "src" / "thinkloop"
NAMES = {cls.__name__ for cls in EVENT_CLASSES}


def _emitted(tree: ast.AST) -> tuple[set[str], list[str]]:
    """Event classes a module emits or builds, and emit calls that name a type by string."""
    found: set[str] = set()
    untyped: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in NAMES:  # built directly (the gateway's own events, sub-agent handoffs)
            found.add(name)
        if name != "emit" or not node.args:
            continue
        kind = node.args[0]
        if isinstance(kind, ast.Constant) and isinstance(kind.value, str):
            untyped.append(f"line {node.lineno}: emit({kind.value!r})")
        if isinstance(kind, ast.Attribute) and kind.attr == "of":  # Kind.of(...)
            kind = kind.value
        if isinstance(kind, ast.Name) and kind.id[:1].isupper():
            found.add(kind.id)
    return found, untyped


def test_every_event_the_code_emits_is_in_the_union_and_each_member_is_emitted() -> None:
    emitted: set[str] = set()
    untyped: list[str] = []
    for path in SRC.rglob("*.py"):
        if path.name == "events.py":
            continue
        found, bad = _emitted(ast.parse(path.read_text(), str(path)))
        emitted |= found
        untyped += [f"{path.relative_to(SRC)} {b}" for b in bad]
    assert untyped == []
    assert emitted == NAMES
    # Every package that emits is covered: loop, guards, tools, judgement, memory, server.
    assert {"RunStarted", "ToolCalled", "GuardBlocked", "Handoff", "Assessed",
            "MemoryRecallSkipped", "InputRequested"} <= emitted


def test_type_names_are_the_public_ones_and_unique() -> None:
    assert len(BY_TYPE) == len(EVENT_CLASSES)
    assert {"run.started", "llm.request", "chunk", "llm.response", "tool.call", "tool.result",
            "step.completed", "run.completed", "run.failed", "run.cancelled", "handoff",
            "hook.failed", "guard.blocked", "policy.denied", "approval.requested",
            "approval.decided", "input.requested", "message"} <= set(BY_TYPE)


def _sample(hint: Any) -> Any:
    """A value of a field's type that JSON keeps as it is."""
    if isinstance(hint, types.UnionType):
        return _sample(next(a for a in typing.get_args(hint) if a is not type(None)))
    origin = typing.get_origin(hint)
    if origin is list:
        return [_sample(typing.get_args(hint)[0])]
    if origin is dict:
        return {"k": _sample(typing.get_args(hint)[1])}
    samples: dict[Any, Any] = {str: "text \u00e9", int: 7, float: 0.25, bool: True,
                               Any: ["nested", {"a": 1}]}
    return samples[hint]


def _full(cls: type[Event]) -> Event:
    hints = typing.get_type_hints(cls)
    own = {f.name: _sample(hints[f.name]) for f in dataclasses.fields(cls)
           if f.init and f.name not in ("run_id", "step", "ts")}
    return cls("run-1", 3, ts=1700000000.125, **own)


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.type)
def test_each_event_round_trips_through_the_store_and_the_wire(cls: type[Event]) -> None:
    event = _full(cls)
    assert from_dict(orjson.loads(orjson.dumps(to_dict(event)))) == event
    assert event_from_row("run-1", event_row(event)) == event  # the audit log
    assert from_dict(event_to_dict(event)) == event  # runs show --json
    wire = orjson.loads(wire_json(9, event))  # SSE data and WebSocket frames
    assert set(wire) == {"id", "type", "run_id", "step", "ts", "payload"}
    assert (wire["id"], wire["type"], wire["step"]) == (9, cls.type, 3)
    assert from_dict(wire) == event


def test_optional_fields_left_unset_stay_out_of_the_payload() -> None:
    blocked = GuardBlocked("r", 1, guard="loop", reason="again", tool="add", id="c1")
    assert blocked.payload == {"guard": "loop", "reason": "again", "tool": "add", "id": "c1"}
    assert from_dict(to_dict(blocked)) == blocked
    step_call = LlmRequest("r", 0, messages=2, tools=["add"])
    assert "purpose" not in step_call.payload
    assert LlmRequest("r", 0, 2, [], purpose="plan").payload["purpose"] == "plan"


def test_unknown_types_are_refused_and_unknown_payload_keys_dropped() -> None:
    with pytest.raises(ValueError, match=r"unknown event type 'run\.exploded'"):
        from_dict({"type": "run.exploded", "run_id": "r", "step": 0, "ts": 1.0, "payload": {}})
    old = {"type": "step.completed", "run_id": "r", "step": 2, "ts": 5.0,
           "payload": {"tool_calls": 1, "gone": "a field of another version"}}
    assert from_dict(old) == StepCompleted("r", 2, 1, ts=5.0)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_real_runs_audit_log_reads_back_as_the_typed_events(tmp_path: Path) -> None:
    model = ScriptedModel([reply("", call("add", a=2, b=3), usage=Usage(1, 10, 2)),
                           reply("2+3=5", usage=Usage(1, 12, 3))], name="openai:gpt-x")
    store = SQLiteStore(tmp_path / "runs.db")
    seen: list[Event] = []
    try:
        async with Agent(model, tools=[add], store=store, on_event=seen.append) as agent:
            result = await agent.run("add 2 and 3", session="s1")
        stored = await store.run_events(result.run_id)
    finally:
        await store.aclose()
    assert result.text == "2+3=5"
    assert stored == seen  # every field, the class and the timestamp, as it went out
    assert isinstance(stored[0], RunStarted) and stored[0].task == "add 2 and 3"
    calls = [e for e in stored if isinstance(e, ToolCalled)]
    assert [(c.name, c.arguments, c.step) for c in calls] == [("add", {"a": 2, "b": 3}, 0)]
    returned = [e for e in stored if isinstance(e, ToolReturned)]
    assert [(r.id, r.content, r.is_error) for r in returned] == [(calls[0].id, "5", False)]
    replies = [e for e in stored if isinstance(e, LlmResponse) and e.purpose is None]
    assert [r.text for r in replies] == ["", "2+3=5"]
    last = stored[-1]
    assert isinstance(last, RunCompleted)
    assert (last.status, last.output, last.usage["input_tokens"]) == ("completed", "2+3=5", 22)


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.type)
def test_the_wire_form_is_the_dict_orjson_writes(cls: type[Event]) -> None:
    # Built from the audit-log row's payload bytes, it stays byte for byte what SSE clients,
    # the Tail and Last-Event-ID resumes read.
    event = _full(cls)
    assert wire_json(9, event) == orjson.dumps({"id": 9, **to_dict(event)}, default=str)


def test_an_event_logged_and_sent_is_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    payload = RunStarted.payload

    def counted(self: RunStarted) -> dict[str, Any]:
        reads.append(self.type)
        return payload.fget(self)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(RunStarted, "payload", property(counted))
    event = RunStarted("r", 0, task="hi", model="m")
    logged = LoggedEvents()
    logged.add(event)  # the worker's store, then its Redis stream: one encoding
    wire = wire_json(1, event)
    assert reads == ["run.started"]
    assert orjson.loads(wire)["payload"] == {"task": "hi", "model": "m"}
    assert logged.rows()[0][3] == '{"task":"hi","model":"m"}'
    assert dataclasses.replace(event, step=2).payload == event.payload  # not copied along
