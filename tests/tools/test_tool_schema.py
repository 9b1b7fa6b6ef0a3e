from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from thinkloop import ToolContext, tool
from thinkloop.tools.base import make_tool


class Point(BaseModel):
    x: float
    y: float


def test_schema_from_signature_hints_and_docstring() -> None:
    @tool
    def search(query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast") -> str:
        """Search the notes.

        Args:
            query: What to look for.
            limit: How many results.
        """
        return query

    assert search.name == "search"
    assert search.description == "Search the notes."
    assert search.parameters == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "default": 5, "description": "How many results."},
            "mode": {"type": "string", "enum": ["fast", "deep"], "default": "fast"},
        },
        "required": ["query"],
    }


def test_context_parameter_is_hidden_and_nested_models_work() -> None:
    @tool(name="move", requires_approval=True)
    async def move_to(target: Point, ctx: ToolContext) -> str:
        """Move somewhere."""
        return ctx.run_id

    assert move_to.name == "move" and move_to.is_async and move_to.requires_approval
    assert move_to.context_param == "ctx"
    assert set(move_to.parameters["properties"]) == {"target"}
    assert "$defs" in move_to.parameters


def test_varargs_rejected() -> None:
    def bad(*args: int) -> None:
        """No."""

    with pytest.raises(TypeError, match="cannot be described"):
        make_tool(bad)


def test_a_name_or_other_non_function_in_tools_is_one_clear_error() -> None:
    from thinkloop import Agent
    from thinkloop.core.errors import ConfigError
    from thinkloop.models import ScriptedModel

    with pytest.raises(ConfigError, match=r"not str 'web_fetch' \(built-in tools by name"):
        Agent(ScriptedModel([]), tools=["web_fetch"])
    with pytest.raises(ConfigError, match=r"a tool is a function or a Tool, not int 3$"):
        Agent(ScriptedModel([]), tools=[3])  # type: ignore[list-item]
