"""One exception tree (thinkloop.errors): every exception thinkloop defines is in it, under
the branch of who is at fault, and each is raised where its docstring says."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator

import pytest

import thinkloop
from thinkloop import Agent
from thinkloop.core import errors
from thinkloop.errors import (
    ChannelError,
    ConfigError,
    ConflictError,
    HookFailed,
    JsonRepairError,
    MissingCredentialsError,
    ModelError,
    ModelResponseError,
    NotFoundError,
    PathEscapeError,
    PendingApprovalError,
    RequestError,
    RetriesExhaustedError,
    RunAccessError,
    RunError,
    RunLimitError,
    SandboxUnavailableError,
    ThinkloopError,
    ToolExecutionError,
    UnknownAgentError,
    UnknownModelError,
)
from thinkloop.hooks import Hook
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.protocols.jsonfix import loads_lenient
from thinkloop.tools.base import tool

# Signals that never leave the module raising them (see the errors module docstring).
SIGNALS = {"thinkloop.loop.phases.StopRun", "thinkloop.protocols.scanbase.Unsettled",
           "thinkloop.tools.builtin.files._Enough", "thinkloop.server.doors.Refused"}


def _defined_exceptions() -> Iterator[type[BaseException]]:
    for info in pkgutil.walk_packages(thinkloop.__path__, "thinkloop."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, BaseException)
                    and obj.__module__ == info.name):
                yield obj


def test_every_exception_thinkloop_defines_lives_in_errors_and_is_a_thinkloop_error() -> None:
    found = {f"{c.__module__}.{c.__qualname__}": c for c in _defined_exceptions()}
    assert {n for n, c in found.items() if c.__module__ != "thinkloop.core.errors"} == SIGNALS
    assert [n for n, c in found.items()
            if n not in SIGNALS and not issubclass(c, ThinkloopError)] == []
    # ... and the tree drawn in its docstring names each of them, no more.
    drawn = set(re.findall(r"([A-Z]\w+(?:Error|Failed))\b", errors.__doc__ or ""))
    drawn -= {"StopRun", "Unsettled"}
    assert {c.__name__ for c in found.values() if c.__module__ == "thinkloop.core.errors"} == drawn


@pytest.mark.parametrize(("branch", "members"), [
    (ConfigError, [UnknownModelError, MissingCredentialsError, SandboxUnavailableError,
                   UnknownAgentError]),
    (RequestError, [PendingApprovalError, RunAccessError, NotFoundError, ConflictError,
                    RunLimitError]),
    (ModelError, [JsonRepairError, RetriesExhaustedError]),
    (errors.ToolError, [PathEscapeError, ChannelError, ToolExecutionError]),
    (RunError, [HookFailed]),
])
def test_each_error_is_under_the_branch_of_who_is_at_fault(
        branch: type[ThinkloopError], members: list[type[ThinkloopError]]) -> None:
    assert [m for m in members if not issubclass(m, branch)] == []
    others = {ConfigError, RequestError, ModelError, errors.ToolError, RunError,
              errors.StoreError, errors.InternalError} - {branch}
    assert [m for m in members if any(issubclass(m, o) for o in others)] == []


def test_the_old_import_paths_name_the_same_classes() -> None:
    from thinkloop.channels import ChannelError as channel
    from thinkloop.hooks import HookFailed as hook
    from thinkloop.models import MissingCredentialsError as creds
    from thinkloop.models import RetriesExhaustedError as retries
    from thinkloop.sandbox import SandboxUnavailableError as sandbox
    from thinkloop.tools.workspace import PathEscapeError as escape

    assert (channel, hook, creds, retries, sandbox, escape) == (
        ChannelError, HookFailed, MissingCredentialsError, RetriesExhaustedError,
        SandboxUnavailableError, PathEscapeError)


def test_a_model_string_no_provider_claims_is_an_unknown_model_error() -> None:
    with pytest.raises(UnknownModelError, match="unknown model provider 'nope'"):
        Agent("nope:x")


def test_a_provider_without_its_key_is_a_missing_credentials_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(MissingCredentialsError, match="needs OPENAI_API_KEY"):
        Agent("openai:gpt-4o-mini")


async def test_resuming_a_session_with_nothing_paused_is_a_pending_approval_error() -> None:
    async with Agent(ScriptedModel([]), store="memory") as agent:
        with pytest.raises(PendingApprovalError, match="'s1' has no paused run waiting"):
            await agent.resume("s1", True)


async def test_aborting_another_sessions_run_is_a_run_access_error() -> None:
    async with Agent(ScriptedModel(["done"], delay_s=30), store="memory", guard=False) as agent:
        handle = agent.start("wait", session="mine")
        with pytest.raises(RunAccessError, match="belongs to another session"):
            agent.registry.abort(handle.run_id, session="yours")
        assert agent.registry.abort(handle.run_id, session="mine") is True
        assert (await handle.result()).status == "cancelled"


async def test_a_critical_hook_that_raises_fails_the_run_with_hook_failed() -> None:
    def broken(_: object) -> None:
        raise ValueError("guard down")

    async with Agent(ScriptedModel(["never"]), guard=False,
                     hooks=[Hook("pre_reason", broken, critical=True, name="mine")]) as agent:
        result = await agent.run("hi")
    assert (result.status, result.error) == (
        "failed", "HookFailed: critical hook mine failed: guard down")


async def test_a_tool_error_goes_back_to_the_model_as_a_result() -> None:
    @tool
    def notify(text: str) -> str:
        """Tell the operator."""
        raise ChannelError("nobody is listening")

    model = ScriptedModel([reply("", call("notify", text="hi")), "I could not reach the operator."])
    async with Agent(model, tools=[notify], guard=False) as agent:
        result = await agent.run("Tell the operator hi.")
    assert (result.status, result.output) == ("completed", "I could not reach the operator.")
    [outcome] = result.steps[0].results
    assert outcome.is_error and "nobody is listening" in outcome.content


def test_json_the_model_wrote_that_cannot_be_repaired_is_a_json_repair_error() -> None:
    with pytest.raises(JsonRepairError) as err:
        loads_lenient('{"a": [1, 2}}}')
    assert isinstance(err.value, ModelResponseError) and isinstance(err.value, ValueError)
