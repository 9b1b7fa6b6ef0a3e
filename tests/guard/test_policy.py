from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from thinkloop.guard import (
    ArgRule,
    GuardSettings,
    RolePolicy,
    ToolPolicy,
    Verdict,
    confine_paths,
    deny_dangerous_commands,
)
from thinkloop.models.scripted import call, reply
from thinkloop.tools.base import tool
from thinkloop.types import ToolCall

from .helpers import run_agent


def c(name: str, **args: object) -> ToolCall:
    return ToolCall("id", name, dict(args))


def test_agent_allow_and_deny_lists_with_globs() -> None:
    p = ToolPolicy(allow=("fs_*", "search"), deny=("fs_delete",))
    assert p.permits("fs_read", None) is None
    assert p.permits("search", None) is None
    assert p.permits("shell", None) == "tool 'shell' is not in this agent's allow list"
    assert p.permits("fs_delete", None) == "tool 'fs_delete' is denied for this agent"


def test_roles_from_user_ids() -> None:
    p = ToolPolicy(roles={"viewer": RolePolicy(allow=("read_*",)),
                          "admin": RolePolicy(), "dev": RolePolicy(deny=("deploy",))},
                   user_roles={"ann": "admin", "vic": "viewer", "dan": "dev"},
                   default_role="viewer")
    assert p.permits("write_file", "ann") is None
    assert p.permits("write_file", "vic") == "role 'viewer' may not use tool 'write_file'"
    assert p.permits("write_file", "stranger") is not None  # default role applies
    assert p.permits("read_file", None) is None
    assert p.permits("deploy", "dan") == "tool 'deploy' is denied for role 'dev'"


@pytest.mark.parametrize("command", [
    "rm -rf /", "rm -rf / --no-preserve-root", "sudo rm -fr /*", "rm -rf ~", "mkfs.ext4 /dev/sda1",
    "dd if=/dev/zero of=/dev/sda bs=1M", ":(){ :|:& };:", "rm -r -f /", "shutdown -h now",
])
def test_dangerous_commands_denied(command: str) -> None:
    p = ToolPolicy(rules=(deny_dangerous_commands(),))
    v = p.evaluate(c("shell", command=command), None, 0)
    assert v == Verdict("deny", "command: destructive system command refused by policy")


@pytest.mark.parametrize("command", [
    "rm -rf ./build", "rm -rf node_modules", "ls -la /", "echo rm -rf is dangerous > notes.txt",
    "dd if=in.img of=out.img",
])
def test_ordinary_commands_allowed(command: str) -> None:
    p = ToolPolicy(rules=(deny_dangerous_commands(),))
    assert p.evaluate(c("shell", command=command), None, 0) == Verdict("allow")


def test_paths_outside_the_workspace_denied(tmp_path: Path) -> None:
    p = ToolPolicy(rules=confine_paths(tmp_path))
    assert p.evaluate(c("read_file", path="notes/a.txt"), None, 0).action == "allow"
    assert p.evaluate(c("read_file", path=str(tmp_path / "x")), None, 0).action == "allow"
    for bad in ("../secret", "/etc/passwd", "a/../../b", "~/.ssh/id_rsa"):
        v = p.evaluate(c("read_file", path=bad), None, 0)
        assert v.action == "deny" and "outside the workspace" in v.reason, bad


def test_regex_and_callable_rules_and_approval_flags() -> None:
    p = ToolPolicy(rules=(
        ArgRule("http_*", "url", re.compile(r"^http://"), reason="plain http refused"),
        ArgRule("transfer", "amount", check=lambda v: "too large" if v > 100 else None,
                action="approve"),
    ))
    assert p.evaluate(c("http_get", url="http://x"), None, 0) == Verdict(
        "deny", "url: plain http refused")
    assert p.evaluate(c("http_get", url="https://x"), None, 0) == Verdict("allow")
    assert p.evaluate(c("transfer", amount=500), None, 0) == Verdict(
        "approve", "amount: too large")
    assert p.evaluate(c("transfer", amount=5), None, 0) == Verdict("allow")


def test_rate_limits_count_prior_calls() -> None:
    p = ToolPolicy(rate_limits={"search": 2})
    assert p.evaluate(c("search"), None, 1).action == "allow"
    assert p.evaluate(c("search"), None, 2) == Verdict(
        "deny", "rate limit: search may be called at most 2 time(s) per run")


RAN: list[str] = []


@tool
def shell(command: str) -> str:
    """Run a command."""
    RAN.append(command)
    return "ran"


@tool
def search(q: str) -> str:
    """Search."""
    RAN.append(q)
    return f"results for {q}"


def policy_guard(policy: ToolPolicy) -> GuardSettings:
    return replace(GuardSettings.off(), policy=policy)


async def test_denied_call_becomes_observation_and_tool_never_runs() -> None:
    RAN.clear()
    guard = policy_guard(ToolPolicy(rules=(deny_dangerous_commands(),)))
    run = await run_agent([reply("", call("shell", command="rm -rf /")),
                           "I refused to wipe the disk."], tools=[shell], guard=guard)
    assert RAN == []
    res = run.result.steps[0].results[0]
    assert res.is_error and res.content == (
        "Denied by policy: command: destructive system command refused by policy. "
        "The call was not run; do not retry it as is.")
    assert run.guard_events == [("policy.denied", {
        "tool": "shell", "id": res.call.id,
        "reason": "command: destructive system command refused by policy"})]
    assert run.result.status == "completed"


async def test_rbac_hides_and_denies_tools_per_user() -> None:
    RAN.clear()
    policy = ToolPolicy(roles={"guest": RolePolicy(allow=("search",))},
                        user_roles={"g": "guest"})
    run = await run_agent([reply("", call("shell", command="ls")), "no shell for me"],
                          tools=[shell, search], guard=policy_guard(policy), user_id="g")
    assert [t.name for t in run.model.calls[0].tools] == ["search"]
    assert RAN == [] and run.of("policy.denied")[0].payload["reason"] == (
        "role 'guest' may not use tool 'shell'")
    run = await run_agent([reply("", call("shell", command="ls")), "listed"],
                          tools=[shell, search], guard=policy_guard(policy), user_id="admin")
    assert RAN == ["ls"] and {t.name for t in run.model.calls[0].tools} == {"shell", "search"}


async def test_rate_limit_per_run() -> None:
    RAN.clear()
    guard = policy_guard(ToolPolicy(rate_limits={"search": 1}))
    run = await run_agent([reply("", call("search", q="a")), reply("", call("search", q="b")),
                           "found a; b was rate limited"], tools=[search], guard=guard)
    assert RAN == ["a"]
    assert [r.is_error for s in run.result.steps for r in s.results] == [False, True]
    RAN.clear()
    await run_agent([reply("", call("search", q="c")), "c"], tools=[search], guard=guard)
    assert RAN == ["c"]  # a new run starts a new count
