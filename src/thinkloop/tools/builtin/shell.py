"""``shell``: a command in the user's workspace, timed, capped, with a scrubbed environment."""

from __future__ import annotations

from thinkloop.errors import ToolArgumentsError
from thinkloop.tools.base import Tool, ToolContext, make_tool
from thinkloop.tools.builtin.process import run_confined, scrubbed_env
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.workspace import Workspace


def shell_tool(workspace: Workspace, settings: ToolSettings) -> Tool:
    async def shell(ctx: ToolContext, command: str, timeout_s: float | None = None) -> str:
        """Run a shell command (/bin/sh) with the workspace as working directory.

        The observation starts with the exit code, then stdout and stderr merged. Credentials
        are removed from the environment. On timeout the whole process tree is killed.

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
        env = scrubbed_env({"PWD": str(root)})
        return await run_confined(
            "shell", command, cwd=root, timeout_s=limit, cap=settings.output_cap_bytes, env=env
        )

    # The tool enforces its own timeout (and kills the process group); the executor's generic
    # timeout must not cut it short first.
    return make_tool(
        shell, idempotent=False, needs_approval=True, trusted_output=False,
        timeout_s=settings.shell_max_timeout_s + 5.0,
    )
