"""Running the tool calls of one step: validate, call with a timeout, report.

Every failure a model or a tool can cause becomes an error :class:`ToolResult` the model reads
on its next step; only cancellation propagates.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from thinkloop.core.errors import (
    ToolArgumentsError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from thinkloop.core.settings import TOOL_OUTPUT_CHARS
from thinkloop.core.tool import Tool, ToolContext
from thinkloop.core.types import ToolCall, ToolResult
from thinkloop.text import valid_text, validation_summary

CUT_NOTE = ("\n\n[output cut to its first {kept} characters of {n}: ask for less (a part, a "
            "filter, a page) if the rest matters]")


def render_output(value: Any, max_chars: int = TOOL_OUTPUT_CHARS) -> str:
    """A tool's return value as the text the model reads (always valid UTF-8), cut to
    ``max_chars`` with a note: no tool, custom or MCP, puts megabytes in front of the model
    (nor in front of the scanners that read every result)."""
    text = _render(value)
    if len(text) > max_chars:
        text = text[:max_chars] + CUT_NOTE.format(kept=max_chars, n=len(text))
    return valid_text(text)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "ok"
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:
        return str(value)


def _bind(tool: Tool, call: ToolCall, ctx: ToolContext) -> dict[str, Any]:
    if call.parse_error:
        raise ToolArgumentsError(call.parse_error)
    try:
        validated = tool.args_model.model_validate(call.arguments)
    except ValidationError as exc:
        raise ToolArgumentsError(
            f"invalid arguments for {tool.name}: {validation_summary(exc, root='(arguments)')}. "
            f"Expected schema: {orjson.dumps(tool.parameters).decode()}"
        ) from None
    kwargs = {name: getattr(validated, name) for name in type(validated).model_fields}
    if tool.context_param:
        kwargs[tool.context_param] = ctx
    return kwargs


async def invoke(tool: Tool, call: ToolCall, ctx: ToolContext, timeout_s: float | None,
                 max_chars: int = TOOL_OUTPUT_CHARS) -> str:
    """Call one tool; raise a :class:`ToolError` subclass on any failure."""
    kwargs = _bind(tool, call, ctx)
    limit = tool.timeout_s if tool.timeout_s is not None else timeout_s
    try:
        async with asyncio.timeout(limit):
            if tool.is_async:
                value = await tool.fn(**kwargs)
            else:
                # A sync tool runs in a worker thread; on timeout the thread finishes on its own.
                value = await asyncio.to_thread(tool.fn, **kwargs)
    except TimeoutError:
        raise ToolTimeoutError(f"{tool.name} timed out after {limit:g}s") from None
    except ToolError:
        raise
    except Exception as exc:
        raise ToolExecutionError(f"{tool.name} raised {type(exc).__name__}: {exc}") from exc
    return render_output(value, max_chars)


async def run_call(
    tools: Mapping[str, Tool], call: ToolCall, ctx: ToolContext, timeout_s: float | None,
    max_chars: int = TOOL_OUTPUT_CHARS,
) -> ToolResult:
    start = time.perf_counter()
    tool = tools.get(call.name)
    try:
        if tool is None:
            known = ", ".join(sorted(tools)) or "none"
            raise ToolNotFoundError(f"unknown tool {call.name!r}; available tools: {known}")
        content = await invoke(tool, call, ctx, timeout_s, max_chars)
        return ToolResult(call, content, False, time.perf_counter() - start)
    except ToolError as exc:
        return ToolResult(call, valid_text(f"Error: {exc}"), True, time.perf_counter() - start)

