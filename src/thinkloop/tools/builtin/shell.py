"""``shell``: a command in the user's workspace, sandboxed, timed, capped, allow-listed env."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from thinkloop.core.errors import ToolArgumentsError
from thinkloop.core.settings import default_home
from thinkloop.core.tool import Tool, ToolContext, make_tool
from thinkloop.sandbox import CommandSlots, Sandbox
from thinkloop.sandbox.bwrap import BwrapSandbox
from thinkloop.tools.builtin.process import command_env, interpreter, run_confined
from thinkloop.tools.builtin.settings import ToolSettings, make_sandbox
from thinkloop.tools.workspace import Workspace


def shell_tool(
    workspace: Workspace, settings: ToolSettings, sandbox: Sandbox | None = None,
    slots: CommandSlots | None = None,
) -> Tool:
    box = sandbox if sandbox is not None else make_sandbox(settings)
    # In the sandbox, `python` is the one thinkloop runs on, with what is installed beside it
    # ("run the tests" finds pytest); unconfined, the host's PATH already has it.
    hide = [Path(workspace.base).expanduser().resolve(), default_home().parent.resolve()]
    python = (interpreter(hide) if settings.sandbox_python and box.name != "none" else None)
    held = slots if slots is not None else CommandSlots()

    async def shell(ctx: ToolContext, command: str, timeout_s: float | None = None) -> str:
        """Run a shell command (/bin/sh) with the workspace as working directory.

        The observation starts with the exit code, then stdout and stderr merged. The
        environment holds no credentials. On timeout every process it started is killed.

        Args:
            command: the command line to run
            timeout_s: seconds before the command is killed (default 60)
        """
        limit = settings.shell_timeout_s if timeout_s is None else timeout_s
        if not 0 < limit <= settings.shell_max_timeout_s:
            raise ToolArgumentsError(
                f"timeout_s must be between 0 and {settings.shell_max_timeout_s:g} seconds"
            )
        root = workspace.root(ctx.user_id)
        env = command_env(settings.sandbox_env, box, PWD=str(root), HOME=str(root))
        if python is not None:
            env["PATH"] = python.bin + os.pathsep + env["PATH"]
        async with held.hold(ctx.run_id):
            return await run_confined("shell", command, cwd=root, timeout_s=limit,
                                      cap=settings.output_cap_bytes, env=env, sandbox=box,
                                      read_only=python.dirs if python is not None else ())

    # The tool enforces its own timeout (and kills the process group); the executor's generic
    # timeout must not cut it short first.
    # Confined only in the sandbox with no network: unconfined, a command reaches anything.
    confined = isinstance(box, BwrapSandbox) and not box.limits.network
    tool = make_tool(shell, idempotent=False, needs_approval=True, trusted_output=False,
                     timeout_s=settings.shell_max_timeout_s + 5.0, confined=confined)
    # The prompt's sandbox section states these limits (context/prompt.py reads the meta).
    return replace(tool, meta={**tool.meta, "sandbox": box.describe()})
