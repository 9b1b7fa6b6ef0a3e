"""Helpers shared by the tool tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thinkloop.tools.base import Tool, ToolContext
from thinkloop.tools.execute import run_call
from thinkloop.types import ToolCall, ToolResult

if TYPE_CHECKING:
    from thinkloop.guard import GuardSettings


def ctx(user: str | None = "alice", deps: Any = None) -> ToolContext:
    return ToolContext("run1", 0, "c1", None, user, deps)


async def call(
    tools: list[Tool], name: str, /, user: str | None = "alice", **args: Any
) -> ToolResult:
    """Run one tool the way the loop does (validation, error observations included)."""
    by_name = {t.name: t for t in tools}
    return await run_call(by_name, ToolCall("c1", name, args), ctx(user), 60.0)


def approving() -> GuardSettings:
    """The default guards with every approval granted: the built-ins that change or send
    (shell, file writes, messages, workflows) need one, and a test has nobody to ask."""
    from dataclasses import replace

    from thinkloop.guard import ApprovalSettings, AutoApprove, GuardSettings

    return replace(GuardSettings(), approval=ApprovalSettings(AutoApprove()))
