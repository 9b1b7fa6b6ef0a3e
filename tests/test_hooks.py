"""The ten hook stages: order, modification, stopping, containment, plugins."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from thinkloop import Agent, ScriptedModel, tool
from thinkloop.agent import with_options
from thinkloop.errors import ConfigError
from thinkloop.events import Event
from thinkloop.hooks import (
    STAGES,
    Hook,
    OutputContext,
    ReasonContext,
    ReflectContext,
    ToolHookContext,
    entry_point_hooks,
    load_plugin_hooks,
)
from thinkloop.models.scripted import call, reply
from thinkloop.types import Message

RAN: list[tuple[Any, ...]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(("add", a, b))
    return a + b


@tool
async def slow(n: int) -> str:
    """Sleep a little, then report."""
    await asyncio.sleep(0.05)
    RAN.append(("slow", n))
    return f"slow {n}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAN.clear()


def make(script: list[object], **kw: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    kw.setdefault("guard", False)  # these tests watch the hook plumbing, not the guards
    return Agent(model, tools=[add, slow], plugins=False, **with_options(kw)), model


async def run_all(agent: Agent, task: str = "go") -> tuple[Any, list[Event]]:
    events: list[Event] = []
    agent.subscribe(events.append)
    handle = agent.start(task, stream_model=False)
    result = await handle.result()
    await handle.wait_background()
    return result, events


def recorder(log: list[str]) -> dict[str, list[Any]]:
    return {s: [lambda ctx, s=s: log.append(f"{s}@{ctx.step}")] for s in STAGES}


async def test_each_stage_fires_once_per_occurrence_in_order() -> None:
    log: list[str] = []
    agent, _ = make([reply("", call("add", a=1, b=2)), "3"], hooks=recorder(log))
    result, _ = await run_all(agent)
    assert result.status == "completed"
    assert log == [
        "pre_assess@0", "post_assess@0",
        "pre_reason@0", "post_reason@0", "pre_tool@0", "post_tool@0",
        "pre_reason@1", "post_reason@1", "pre_reflect@1", "post_reflect@1",
        "pre_output@2", "post_output@2",
    ]


async def test_parallel_calls_fire_tool_stages_once_per_call() -> None:
    log: list[str] = []
    agent, _ = make([reply("", call("slow", n=1), call("slow", n=2)), "done"])
    agent.hook("pre_tool")(lambda ctx: log.append(f"pre {ctx.call.arguments['n']}"))
    agent.hook("post_tool")(lambda ctx: log.append(f"post {ctx.result.content}"))
    await run_all(agent)
    assert sorted(log) == ["post slow 1", "post slow 2", "pre 1", "pre 2"]


async def test_pre_tool_rewrites_arguments() -> None:
    def double(ctx: ToolHookContext) -> None:
        assert ctx.call is not None
        ctx.call = type(ctx.call)(ctx.call.id, ctx.call.name,
                                  {k: v * 10 for k, v in ctx.call.arguments.items()})

    agent, model = make([reply("", call("add", a=1, b=2)), "30"], hooks={"pre_tool": [double]})
    result, _ = await run_all(agent)
    assert RAN == [("add", 10, 20)]
    assert result.steps[0].results[0].content == "30"
    assert model.calls[1].messages[-1] == Message.tool(
        result.steps[0].tool_calls[0].id, "add", "30")


async def test_pre_tool_result_skips_the_tool() -> None:
    from thinkloop.types import ToolResult

    def deny(ctx: ToolHookContext) -> None:
        assert ctx.call is not None
        ctx.result = ToolResult(ctx.call, "denied by policy", is_error=True)

    agent, model = make([reply("", call("add", a=1, b=2)), "ok"], hooks={"pre_tool": [deny]})
    result, _ = await run_all(agent)
    assert RAN == []
    assert model.calls[1].messages[-1].content == "denied by policy"
    assert result.status == "completed"


async def test_pre_reason_changes_only_this_request() -> None:
    def inject(ctx: ReasonContext) -> None:
        ctx.messages.insert(1, Message.system("recalled: the user likes tea"))

    agent, model = make(["tea it is"], hooks={"pre_reason": [inject]})
    result, _ = await run_all(agent)
    assert [m.content for m in model.calls[0].messages][1] == "recalled: the user likes tea"
    assert [m.role for m in result.messages] == ["user", "assistant"]


async def test_post_reason_can_replace_the_response() -> None:
    def swap(ctx: ReasonContext) -> None:
        ctx.response = reply("replaced")

    agent, _ = make(["original"], hooks={"post_reason": [swap]})
    result, _ = await run_all(agent)
    assert result.text == "replaced"


async def test_pre_output_redacts_the_answer() -> None:
    def redact(ctx: OutputContext) -> None:
        ctx.text = ctx.text.replace("hunter2", "[redacted]")

    agent, _ = make(["the password is hunter2"], hooks={"pre_output": [redact]})
    result, events = await run_all(agent)
    assert (result.text, result.output) == ("the password is [redacted]",) * 2
    done = [e for e in events if e.type == "run.completed"]
    assert done[0].payload["output"] == "the password is [redacted]"


async def test_pre_reflect_reject_sends_feedback_and_goes_on() -> None:
    seen: list[str] = []

    def picky(ctx: ReflectContext) -> None:
        seen.append(ctx.text)
        if "because" not in ctx.text:
            ctx.reject("Explain why.")

    agent, model = make(["yes", "yes, because 2 > 1"], hooks={"pre_reflect": [picky]})
    result, _ = await run_all(agent)
    assert seen == ["yes", "yes, because 2 > 1"]
    assert model.calls[1].messages[-1] == Message.notice("Explain why.")
    assert result.text == "yes, because 2 > 1"


# stage -> (model calls made, tool runs) once a hook there stops the run
STOPS = {
    "pre_assess": (0, []),
    "post_assess": (0, []),
    "pre_reason": (0, []),
    "post_reason": (1, []),
    "pre_tool": (1, []),
    "post_tool": (1, [("add", 1, 2)]),
    "pre_reflect": (2, [("add", 1, 2)]),
    "post_reflect": (2, [("add", 1, 2)]),
    "pre_output": (2, [("add", 1, 2)]),
}


@pytest.mark.parametrize("stage", list(STOPS))
async def test_any_stage_can_stop_the_run(stage: str) -> None:
    agent, model = make([reply("", call("add", a=1, b=2)), "3"],
                        hooks={stage: [lambda ctx: ctx.stop(f"stopped at {ctx.stage}")]})
    result, events = await run_all(agent)
    assert (result.status, result.error) == ("blocked", f"stopped at {stage}")
    assert (len(model.calls), RAN) == STOPS[stage]
    assert result.text == ""
    assert events[-1].type == "run.completed"
    assert events[-1].payload["status"] == "blocked"
    # Every tool call in the kept history has its result, even when stopped mid-step.
    calls = {c.id for m in result.messages for c in m.tool_calls}
    assert calls == {m.tool_call_id for m in result.messages if m.role == "tool"}


async def test_pre_output_stop_with_replacement_keeps_the_replacement() -> None:
    def block(ctx: OutputContext) -> None:
        ctx.text = "I can't share that."
        ctx.stop("unsafe content")

    agent, _ = make(["rm -rf / is the answer"], hooks={"pre_output": [block]})
    result, _ = await run_all(agent)
    assert (result.status, result.error, result.text) == (
        "blocked", "unsafe content", "I can't share that.")


async def test_post_output_runs_after_the_result_and_cannot_change_it() -> None:
    seen: list[tuple[str, str | None]] = []

    async def audit(ctx: OutputContext) -> None:
        await asyncio.sleep(0)
        seen.append((ctx.text, ctx.status))
        ctx.stop("too late")

    agent, _ = make(["fine"], hooks={"post_output": [audit]})
    result, _ = await run_all(agent)
    assert result.status == "completed" and seen == [("fine", "completed")]


async def test_a_raising_hook_is_contained_and_reported() -> None:
    def broken(ctx: Any) -> None:
        raise ValueError("bad hook")

    after: list[str] = []
    agent, _ = make(["ok"], hooks=[Hook("pre_reason", broken, name="broken"),
                                   Hook("pre_reason", lambda ctx: after.append("ran"))])
    result, events = await run_all(agent)
    assert result.status == "completed" and result.text == "ok"
    failed = [e for e in events if e.type == "hook.failed"]
    assert [e.payload for e in failed] == [
        {"stage": "pre_reason", "hook": "broken", "error": "ValueError: bad hook"}]
    assert after == ["ran"], "hooks after a failed one still run"


@pytest.mark.parametrize("stage", ["pre_assess", "pre_reason", "pre_tool", "post_reflect"])
async def test_a_critical_raising_hook_fails_the_run(stage: str) -> None:
    def broken(ctx: Any) -> None:
        raise RuntimeError("guard down")

    agent, _ = make([reply("", call("add", a=1, b=2)), "3"],
                    hooks=[Hook(stage, broken, critical=True, name="guard")])  # type: ignore[arg-type]
    result, events = await run_all(agent)
    assert result.status == "failed"
    assert result.error == "HookFailed: critical hook guard failed: guard down"
    assert [e.type for e in events].count("hook.failed") == 1
    assert events[-1].type == "run.failed"


async def test_critical_pre_output_failure_fails_the_run() -> None:
    def broken(ctx: Any) -> None:
        raise RuntimeError("filter down")

    agent, _ = make(["text"], hooks=[Hook("pre_output", broken, critical=True, name="f")])
    result, events = await run_all(agent)
    assert (result.status, events[-1].type) == ("failed", "run.failed")


async def test_stop_in_one_parallel_call_does_not_leave_the_other_running() -> None:
    def stop_first(ctx: ToolHookContext) -> None:
        assert ctx.call is not None
        if ctx.call.arguments["n"] == 1:
            ctx.stop("no")

    agent, _ = make([reply("", call("slow", n=1), call("slow", n=2)), "done"],
                    hooks={"pre_tool": [stop_first]})
    result, events = await run_all(agent)
    await asyncio.sleep(0.1)
    assert result.status == "blocked"
    assert RAN == [], "the sibling call is cancelled with the run"
    assert events[-1].type == "run.completed"


def test_unknown_stage_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown hook stage 'pre_lunch'"):
        Agent(ScriptedModel([]), hooks={"pre_lunch": [print]}, plugins=False)


# -- plugins through the thinkloop.hooks entry point group ------------------------------------


def fake_distribution(root: Path, name: str, entry_points: str, module: str) -> None:
    """Install a distribution the way pip lays it out: a module and its dist-info."""
    (root / f"{name}.py").write_text(textwrap.dedent(module))
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


PLUGIN = """
    from thinkloop.hooks import Hook

    SEEN = []

    def audit(ctx):
        SEEN.append(("audit", ctx.call.name))

    def tag(ctx):
        ctx.text = ctx.text + " [checked]"

    HOOKS = [Hook("pre_reason", lambda ctx: SEEN.append(("reason", ctx.step)), name="r")]
"""


async def test_entry_point_plugin_hooks_every_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_distribution(tmp_path, "tl_audit_plugin", """
        [thinkloop.hooks]
        pre_tool = tl_audit_plugin:audit
        pre_output = tl_audit_plugin:tag
        reasons = tl_audit_plugin:HOOKS
    """, PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tl_audit_plugin", raising=False)
    hooks = entry_point_hooks()
    assert [(h.stage, h.label) for h in hooks] == [
        ("pre_output", "tl_audit_plugin:tag"),
        ("pre_tool", "tl_audit_plugin:audit"),
        ("pre_reason", "r"),
    ]
    model = ScriptedModel([reply("", call("add", a=1, b=2)), "3"])
    result = await Agent(model, tools=[add], guard=False).run("go")
    plugin = sys.modules["tl_audit_plugin"]
    assert plugin.SEEN == [("reason", 0), ("audit", "add"), ("reason", 1)]
    assert result.text == "3 [checked]"
    assert Agent(model, plugins=False, guard=False).hooks.by_stage["pre_tool"] == []


async def test_a_broken_plugin_is_skipped_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_distribution(tmp_path, "tl_bad_plugin", """
        [thinkloop.hooks]
        nonsense = tl_bad_plugin:VALUE
    """, "VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    agent = Agent(ScriptedModel(["fine"]), guard=False)
    assert all(h.label != "tl_bad_plugin:VALUE" for hs in agent.hooks.by_stage.values()
               for h in hs)
    assert (await agent.run("hi")).text == "fine"
    hooks, failures = load_plugin_hooks()
    assert hooks == []
    assert [(f.entry_point, f.group) for f in failures] == [("nonsense", "thinkloop.hooks")]
    assert "expected a Hook" in failures[0].error
    with pytest.raises(ConfigError, match=r"plugin 'nonsense' \(tl_bad_plugin:VALUE\)"):
        load_plugin_hooks(strict=True)
