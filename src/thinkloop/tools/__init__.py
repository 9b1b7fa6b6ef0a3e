"""Tools: the ``@tool`` decorator, execution, built-ins and MCP."""

from thinkloop.core.tool import Tool, ToolContext, as_tool, make_tool, tool
from thinkloop.tools.execute import render_output, run_call

__all__ = ["Tool", "ToolContext", "as_tool", "make_tool", "render_output", "run_call",
           "tool"]
