"""System-prompt sections of the text protocols: the tools, the exact format, one example."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from thinkloop.core.types import ToolSpec

_EXAMPLE_VALUES: dict[str, Any] = {
    "string": "...", "integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {},
}


def dumps(value: Any) -> str:
    """JSON with a space after separators, the way models usually write it."""
    return json.dumps(value, ensure_ascii=False)


def example_arguments(spec: ToolSpec) -> dict[str, Any]:
    """Placeholder arguments for a worked example: each required argument, by type."""
    props: dict[str, Any] = spec.parameters.get("properties", {})
    required = spec.parameters.get("required", list(props)[:1])
    args = {}
    for name in required:
        prop = props.get(name, {})
        types = [prop.get("type")] + [p.get("type") for p in prop.get("anyOf", [])]
        kind = next((t for t in types if t in _EXAMPLE_VALUES), "string")
        args[name] = _EXAMPLE_VALUES[kind]
    return args


def single_argument(spec: ToolSpec) -> str | None:
    """The argument a plain text parameter fills: the only required one, or the only one."""
    props = spec.parameters.get("properties", {})
    required = spec.parameters.get("required", [])
    if len(required) == 1:
        return str(required[0])
    if not required and len(props) == 1:
        return str(next(iter(props)))
    return None


def describe_tools(tools: Sequence[ToolSpec], head: Callable[[ToolSpec], str]) -> str:
    lines = ["You can use these tools:", ""]
    for spec in tools:
        lines.append(f"- {head(spec)}: {spec.description.strip()}")
        lines.append(f"  arguments (JSON schema): {dumps(spec.parameters)}")
    return "\n".join(lines)


def json_section(tools: Sequence[ToolSpec], render: Callable[[str, dict[str, Any]], str]) -> str:
    example = tools[0]
    done = dumps({"reasoning": "I have everything I need.", "tools": [], "completed": True,
                  "answer": "The final answer for the user."})
    return "\n".join([
        describe_tools(tools, lambda s: s.name),
        "",
        "Reply with exactly one JSON object and nothing else, in this format:",
        '{"reasoning": "your thinking", "tools": [{"name": "tool_name", "arguments": {...}}], '
        '"completed": false}',
        "To use tools, list them in \"tools\" and set \"completed\" to false; their results "
        "come back in the next message. When the task is done, set \"tools\" to [], "
        "\"completed\" to true and put your final answer for the user in \"answer\":",
        done,
        "",
        f"Example, calling {example.name}:",
        render(example.name, example_arguments(example)),
    ])


def tags_section(tools: Sequence[ToolSpec], render: Callable[[str, dict[str, Any]], str]) -> str:
    def head(spec: ToolSpec) -> str:
        arg = single_argument(spec)
        if not spec.parameters.get("properties"):
            return f"<<TOOL:{spec.name}>>"
        return f"<<TOOL:{spec.name}:{arg if arg else '{json arguments}'}>>"

    example = tools[0]
    return "\n".join([
        describe_tools(tools, head),
        "",
        "Think first, inside <<THINK>> ... <</THINK>>; the user does not see it.",
        "To use a tool, write its tag on its own line:",
        '  <<TOOL:NAME:{"argument": "value"}>>  arguments as a JSON object',
        "  <<TOOL:NAME:value>>  plain text, for a tool with a single required argument",
        "  <<TOOL:NAME>>  for a tool without arguments",
        "Results come back in the next message as [Tool NAME]: result. When you have the "
        "answer, reply with plain text and no tool tag.",
        "",
        f"Example, calling {example.name}:",
        "<<THINK>>I need to use " + example.name + " first.<</THINK>>",
        render(example.name, example_arguments(example)),
    ])


def xml_section(tools: Sequence[ToolSpec], render: Callable[[str, dict[str, Any]], str]) -> str:
    example = tools[0]
    return "\n".join([
        describe_tools(tools, lambda s: s.name),
        "",
        "To call a tool, write a <tool_call> block holding one JSON object with the tool's "
        "name and arguments:",
        '<tool_call>\n{"name": "tool_name", "arguments": {...}}\n</tool_call>',
        "Write several blocks to call several tools at once. Results come back in the next "
        "message as [Tool NAME]: result. When you have the answer, reply with plain text and "
        "no <tool_call> block.",
        "",
        f"Example, calling {example.name}:",
        render(example.name, example_arguments(example)),
    ])
