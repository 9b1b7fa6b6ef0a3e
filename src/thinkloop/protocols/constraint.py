"""The exact shape of a text protocol's replies, as a constraint a provider can decode under.

``json`` replies are described by a JSON schema of the OrcBot decision object, tool names
held to the offered tools and each tool's arguments to its own schema. ``xml`` and ``tags``
replies mix prose with calls, which no JSON schema describes, so they get a llama.cpp GBNF
grammar: optional thoughts, optional prose, then well-formed calls to known tools (or none:
the prose is the final answer). Prose and thoughts may not contain ``<``, which is what keeps
a half-written call from being read as an answer.

Arguments inside GBNF calls are written by llama.cpp's own JSON-schema converter when
llama-cpp-python is installed (it is whenever a provider can use a grammar locally);
without it they are any JSON object and argument validation reports the rest.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from thinkloop.core.model import ReplyConstraint
from thinkloop.core.types import ToolSpec
from thinkloop.models.decision import tool_parameters
from thinkloop.protocols import prompts

# Bounds that keep every reply closable: a small model can ramble inside the free "reasoning"
# string, or repeat one call, until max_tokens cuts the reply where it no longer parses. (The
# converter unrolls the bounds into nested rules, so they stay small.)
REASONING_MAX = 256
MAX_CALLS = 4
# When a call is required, the prose before it is bounded for the same reason.
LEAD_MAX = 200

_JSON_VALUE_GBNF = r"""
json-value ::= json-object | json-array | json-string | json-number | ("true" | "false" | "null")
json-object ::= "{" ws ( json-member ( ws "," ws json-member )* )? ws "}"
json-member ::= json-string ws ":" ws json-value
json-array ::= "[" ws ( json-value ( ws "," ws json-value )* )? ws "]"
json-string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
json-number ::= "-"? ([0-9] | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
"""


def _literal(text: str) -> str:
    return json.dumps(text)


def _call_object(name: str, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"const": name}, "arguments": params},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def json_decision_schema(tools: Sequence[ToolSpec], *, required: bool = False) -> dict[str, Any]:
    """The OrcBot decision object: calls to known tools, or (unless a call is ``required``)
    ``completed`` with an answer."""
    params_list, defs = tool_parameters(tools)
    calls = [_call_object(t.name, p) for t, p in zip(tools, params_list, strict=True)]
    reasoning = {"type": "string", "maxLength": REASONING_MAX}
    act = {
        "type": "object",
        "properties": {
            "reasoning": reasoning,
            "tools": {"type": "array", "items": {"oneOf": calls}, "minItems": 1,
                      "maxItems": MAX_CALLS},
            "completed": {"const": False},
        },
        "required": ["reasoning", "tools", "completed"],
        "additionalProperties": False,
    }
    done = {
        "type": "object",
        "properties": {
            "reasoning": reasoning,
            # A constant, not maxItems 0: llama.cpp's converter ignores maxItems 0.
            "tools": {"const": []},
            "completed": {"const": True},
            "answer": {"type": "string"},
        },
        "required": ["reasoning", "tools", "completed", "answer"],
        "additionalProperties": False,
    }
    schema: dict[str, Any] = {"oneOf": [act] if required else [act, done]}
    if defs:
        schema["$defs"] = defs
    return schema


def json_constraint(tools: Sequence[ToolSpec], required: bool) -> ReplyConstraint:
    schema = json_decision_schema(tools, required=required)
    return ReplyConstraint("json_schema", prompts.dumps(schema), "decision")


def _argument_rules(tools: Sequence[ToolSpec]) -> tuple[list[str], str]:
    """The GBNF rule name of each tool's arguments, and the rules themselves."""
    params_list, defs = tool_parameters(tools)
    try:
        from llama_cpp.llama_grammar import SchemaConverter
    except ImportError:
        return ["json-object"] * len(tools), _JSON_VALUE_GBNF
    converter: Any = SchemaConverter  # untyped upstream
    conv = converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    names = []
    for i, params in enumerate(params_list):
        schema = conv.resolve_refs({**params, "$defs": defs} if defs else params, "tool")
        names.append(conv.visit(schema, f"args{i}"))
    return names, conv.format_grammar()


def _prose(required: bool) -> str:
    return f"prose ::= [^<]{{0,{LEAD_MAX}}}" if required else "prose ::= [^<]*"


def xml_grammar(tools: Sequence[ToolSpec], required: bool = False) -> str:
    """Replies of the ``xml`` protocol: ``<tool_call>{"name", "arguments"}</tool_call>``."""
    args, rules = _argument_rules(tools)
    bodies = [
        f'"{{" ws {_literal(chr(34) + "name" + chr(34))} ws ":" ws '
        f"{_literal(json.dumps(t.name))} ws \",\" ws "
        f'{_literal(chr(34) + "arguments" + chr(34))} ws ":" ws {a} ws "}}"'
        for t, a in zip(tools, args, strict=True)
    ]
    return "\n".join([
        f"root ::= think? prose calls{'' if required else '?'}",
        'think ::= "<think>" prose "</think>" ws',
        _prose(required),
        f"calls ::= call (ws call){{0,{MAX_CALLS - 1}}}",
        'call ::= "<tool_call>" ws call-body ws "</tool_call>"',
        "call-body ::= " + " | ".join(f"( {b} )" for b in bodies),
        "ws ::= [ \\t\\n]*",
        rules,
    ])


def _tag_call(spec: ToolSpec, args: str) -> str:
    name = _literal(spec.name)
    if not spec.parameters.get("properties"):
        return name
    if prompts.single_argument(spec) is not None:
        return f'{name} ":" ( {args} | tag-plain )'
    return f'{name} ":" {args}'


def tags_grammar(tools: Sequence[ToolSpec], required: bool = False) -> str:
    """Replies of the ``tags`` protocol: ``<<THINK>>`` then ``<<TOOL:NAME:param>>`` lines."""
    args, rules = _argument_rules(tools)
    calls = " | ".join(f"( {_tag_call(t, a)} )" for t, a in zip(tools, args, strict=True))
    return "\n".join([
        f"root ::= think? prose calls{'' if required else '?'}",
        'think ::= "<<THINK>>" prose "<</THINK>>" ws',
        _prose(required),
        f'calls ::= call ("\\n" call){{0,{MAX_CALLS - 1}}}',
        f'call ::= "<<TOOL:" ( {calls} ) ">>"',
        # A plain parameter never opens with "{", which would read as JSON arguments.
        "tag-plain ::= [^{<>\\n] [^<>\\n]*",
        "ws ::= [ \\t\\n]*",
        rules,
    ])


def xml_constraint(tools: Sequence[ToolSpec], required: bool) -> ReplyConstraint:
    return ReplyConstraint("gbnf", xml_grammar(tools, required), "xml")


def tags_constraint(tools: Sequence[ToolSpec], required: bool) -> ReplyConstraint:
    return ReplyConstraint("gbnf", tags_grammar(tools, required), "tags")
