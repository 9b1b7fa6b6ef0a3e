"""MCP tools a server declares destructive or open-world wait for a human; read-only ones don't."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from thinkloop.agent import Agent
from thinkloop.guard import ApprovalSettings, CallbackApprover, GuardSettings
from thinkloop.guard.approval import ApprovalRequest, Decision
from thinkloop.models.scripted import ScriptedModel, reply
from thinkloop.models.scripted import call as model_call
from thinkloop.spotlight import unwrap
from thinkloop.tools.mcp import MCPServerConfig, mcp_tools

SERVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    app = MCPServer("files")
    marker = Path(sys.argv[1])

    @app.tool(annotations=ToolAnnotations(destructive_hint=True))
    def wipe(what: str) -> str:
        '''Delete something for good.'''
        marker.write_text("wiped " + what)
        return "wiped"

    @app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    def lookup(query: str) -> str:
        '''Search the internet.'''
        return "found " + query

    @app.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def peek(key: str) -> str:
        '''Read a local value.'''
        return "value of " + key

    app.run()
""")


async def test_destructive_and_open_world_mcp_tools_need_approval(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    marker = tmp_path / "wiped.txt"
    cfg = MCPServerConfig(name="files", command=[sys.executable, str(script), str(marker)],
                          trusted=True)
    asked: list[str] = []

    def deny(request: ApprovalRequest) -> Decision:
        asked.append(request.tool)
        return Decision(False, "not today")

    guard = GuardSettings(approval=ApprovalSettings(CallbackApprover(deny)))
    async with mcp_tools([cfg]) as tools:
        by_name = {t.name: t for t in tools}
        assert by_name["files_wipe"].needs_approval and by_name["files_lookup"].needs_approval
        assert not by_name["files_peek"].needs_approval
        model = ScriptedModel([
            reply("", model_call("files_wipe", what="everything")),
            reply("", model_call("files_lookup", query="otters")),
            reply("", model_call("files_peek", key="x")),
            "done",
        ])
        result = await Agent(model, tools=tools, guard=guard, max_steps=6).run("tidy up")
    assert asked == ["files_wipe", "files_lookup"]
    contents = [s.results[0].content for s in result.steps if s.results]
    assert "not today" in contents[0] and "not today" in contents[1]
    assert "value of x" in unwrap(contents[2])  # MCP output is outside content: datamarked
    assert not marker.exists()  # the destructive call never reached the server


def test_trust_is_given_by_the_configuration_only() -> None:
    from thinkloop.tools.mcp import mcp_configs, parse_mcp_spec

    assert parse_mcp_spec("trusted:time=uvx mcp-server-time").trusted
    assert parse_mcp_spec("trusted:time=uvx mcp-server-time").command == ["uvx",
                                                                          "mcp-server-time"]
    assert not parse_mcp_spec("time=uvx mcp-server-time").trusted
    configs = mcp_configs({"mcpServers": {"a": {"command": "x", "trusted": True},
                                          "b": {"command": "y"}}})
    assert [c.trusted for c in configs] == [True, False]
