from __future__ import annotations

import asyncio
import socket
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from tests.tools.helpers import call

from thinkloop.agent import Agent
from thinkloop.errors import ConfigError
from thinkloop.models.scripted import ScriptedModel, reply
from thinkloop.models.scripted import call as model_call
from thinkloop.tools.mcp import (
    MCPServer,
    MCPServerConfig,
    load_mcp_file,
    mcp_tools,
    parse_mcp_spec,
)

TIME = MCPServerConfig(name="time", command=[sys.executable, "-m", "mcp_server_time",
                                              "--local-timezone", "UTC"])

SERVER = textwrap.dedent("""
    import sys
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("calc")

    @app.tool()
    def add(a: int, b: int) -> int:
        '''Add two integers.'''
        return a + b

    @app.tool()
    def fail(reason: str) -> str:
        '''Always fails.'''
        raise ValueError(reason)

    if __name__ == "__main__":
        if sys.argv[1] == "http":
            app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
        else:
            app.run()
""")


def test_parse_mcp_spec() -> None:
    assert parse_mcp_spec("uvx mcp-server-time --local-timezone UTC") == MCPServerConfig(
        name="time", command=["uvx", "mcp-server-time", "--local-timezone", "UTC"])
    assert parse_mcp_spec("clock=uvx mcp-server-time").name == "clock"
    assert parse_mcp_spec("http://127.0.0.1:9/mcp") == MCPServerConfig(
        name="mcp", url="http://127.0.0.1:9/mcp")
    with pytest.raises(ValueError, match="exactly one of command or url"):
        MCPServerConfig(name="x")


async def test_stdio_time_server_tools_and_calls() -> None:
    async with MCPServer(TIME) as server:
        by_name = {t.name: t for t in server.tools}
        assert sorted(by_name) == ["time_convert_time", "time_get_current_time"]
        t = by_name["time_get_current_time"]
        assert t.parameters["required"] == ["timezone"]
        assert t.parameters["properties"]["timezone"]["type"] == "string"
        assert t.external
        ok = await call(server.tools, "time_convert_time", source_timezone="UTC", time="12:00",
                        target_timezone="Asia/Tokyo")
        assert not ok.is_error and '"datetime": "' in ok.content and "T21:00:00+09:00" in ok.content
        bad = await call(server.tools, "time_get_current_time", timezone="Nowhere/Atlantis")
        assert bad.is_error and "Invalid timezone" in bad.content
        missing = await call(server.tools, "time_get_current_time")
        assert missing.is_error and "'timezone' is a required property" in missing.content
    assert server.tools and server._client is None


async def test_agent_uses_mcp_tool_end_to_end(tmp_path: Path) -> None:
    script = tmp_path / "calc.py"
    script.write_text(SERVER)
    cfg = MCPServerConfig(name="calc", command=[sys.executable, str(script), "stdio"])
    async with mcp_tools([cfg]) as tools:
        model = ScriptedModel([reply("", model_call("calc_add", a=2, b=40)), "It is 42."])
        result = await Agent(model, tools=tools, guard=False).run("add 2 and 40")
    assert result.text == "It is 42."
    assert result.steps[0].results[0].content == "42"
    sent = model.calls[0].tools
    assert [s.name for s in sent] == ["calc_add", "calc_fail"]
    assert sent[0].parameters["properties"]["a"]["type"] == "integer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest_asyncio.fixture(loop_scope="function")
async def http_server(tmp_path: Path) -> AsyncIterator[str]:
    script = tmp_path / "calc.py"
    script.write_text(SERVER)
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), "http", str(port),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                await w.wait_closed()
                break
            except OSError:
                await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        await proc.wait()


async def test_streamable_http_server(http_server: str) -> None:
    async with MCPServer(MCPServerConfig(name="calc", url=http_server, prefix="c")) as server:
        assert [t.name for t in server.tools] == ["c_add", "c_fail"]
        assert (await call(server.tools, "c_add", a=1, b=2)).content == "3"
        failed = await call(server.tools, "c_fail", reason="nope")
        assert failed.is_error and failed.content == "Error: Error executing tool fail"
        wrong = await call(server.tools, "c_add", a="x", b=2)
        assert wrong.is_error and "a: 'x' is not of type 'integer'" in wrong.content


async def test_unreachable_server_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="could not connect to MCP server 'nope'"):
        await MCPServer(MCPServerConfig(name="nope", command=["/nonexistent/binary"])).connect()


def test_mcp_settings_file(tmp_path: Path) -> None:
    f = tmp_path / "mcp.json"
    f.write_text('{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"],'
                 ' "env": {"TZ": "UTC"}}, "docs": {"url": "http://127.0.0.1:8000/mcp"}}}')
    assert load_mcp_file(f) == [
        MCPServerConfig(name="time", command=["uvx", "mcp-server-time"], env={"TZ": "UTC"}),
        MCPServerConfig(name="docs", url="http://127.0.0.1:8000/mcp")]
    t = tmp_path / "mcp.toml"
    t.write_text('[mcp.calc]\ncommand = "python3 calc.py stdio"\nprefix = "c"\n')
    assert load_mcp_file(t) == [
        MCPServerConfig(name="calc", command=["python3", "calc.py", "stdio"], prefix="c")]
    t.write_text('[mcp.bad]\nprefix = "c"\n')
    with pytest.raises(ConfigError, match=r"MCP server 'bad'.*exactly one of command or url"):
        load_mcp_file(t)


async def test_connect_and_close_from_different_tasks(tmp_path: Path) -> None:
    script = tmp_path / "calc.py"
    script.write_text(SERVER)
    server = MCPServer(MCPServerConfig(name="calc", command=[sys.executable, str(script), "x"]))
    await asyncio.create_task(server.connect())
    assert (await call(server.tools, "calc_add", a=5, b=6)).content == "11"
    await asyncio.create_task(server.close())
    gone = await call(server.tools, "calc_add", a=5, b=6)
    assert gone.is_error and "is not connected" in gone.content
