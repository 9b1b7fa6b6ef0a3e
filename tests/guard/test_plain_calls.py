"""The guards' per-call checks are plain calls for an ordinary call: a coroutine is made only
when a check must wait (an approval, a search of what the run read, a scan of outside
content), not before and after every tool call."""

from __future__ import annotations

from thinkloop.core.run import Limits, RunConfig, RunState
from thinkloop.guard import GuardSettings, default_guards
from thinkloop.hooks import ToolHookContext
from thinkloop.models.base import ModelSettings
from thinkloop.models.scripted import ScriptedModel
from thinkloop.protocols import NativeProtocol
from thinkloop.tools.base import tool
from thinkloop.types import Message, ToolCall, ToolResult


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


def test_an_ordinary_call_makes_no_coroutine_in_any_guard() -> None:
    cfg = RunConfig(ScriptedModel([]), {"lookup": lookup}, NativeProtocol(), "sys", Limits(),
                    ModelSettings())
    state = RunState("run-1", "look k up", [Message.system("sys"), Message.user("look k up")],
                     None)
    call = ToolCall("c1", "lookup", {"key": "k"})
    pre = ToolHookContext("pre_tool", cfg, state, call=call, tool=lookup)
    post = ToolHookContext("post_tool", cfg, state, call=call, tool=lookup,
                           result=ToolResult(call, "k"))
    hooks = [h for g in default_guards(GuardSettings()) for h in g.hooks()]
    returned = {h.name: h.fn(pre if h.stage == "pre_tool" else post) for h in hooks
                if h.stage in ("pre_tool", "post_tool")}
    assert set(returned) == {"guard.loops", "guard.messages", "guard.provenance",
                             "guard.policy", "guard.external", "guard.provenance.observe"}
    assert returned == dict.fromkeys(returned)  # every one None: nothing to await
