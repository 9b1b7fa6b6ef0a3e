"""Decisions for models that cannot be trusted with tool-call syntax: one JSON object per reply.

A reply is either ``{"tool": NAME, "arguments": {...}}`` or ``{"answer": TEXT}``. The JSON
schema below admits exactly those, with each tool's arguments held to that tool's own schema;
compiled to a GBNF grammar it constrains decoding, so every reply parses.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import orjson

from thinkloop.core.types import Message, ToolCall, ToolSpec
from thinkloop.models.narrow import step_pending
from thinkloop.models.sanitize import merge_consecutive, repair_tool_pairs
from thinkloop.spotlight import content_of, is_spotlit

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _rewrite_refs(node: Any, prefix: str) -> Any:
    """Point a tool's ``#/$defs/X`` references at its hoisted copy ``#/$defs/<prefix>X``."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/"):
                out[k] = f"#/$defs/{prefix}{v.removeprefix('#/$defs/')}"
            elif k != "$defs":
                out[k] = _rewrite_refs(v, prefix)
        return out
    if isinstance(node, list):
        return [_rewrite_refs(v, prefix) for v in node]
    return node


def tool_parameters(tools: Sequence[ToolSpec]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each tool's parameters schema as a closed object, and every tool's ``$defs`` hoisted
    into one table (prefixed by tool name) so all of them fit in one schema."""
    params_list: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    for t in tools:
        prefix = f"{t.name}__"
        for name, sub in (t.parameters.get("$defs") or {}).items():
            defs[prefix + name] = _rewrite_refs(sub, prefix)
        params = _rewrite_refs(t.parameters, prefix)
        params.setdefault("type", "object")
        params.setdefault("properties", {})
        params.setdefault("additionalProperties", False)
        params_list.append(params)
    return params_list, defs


# Tokens a call needs around its string values: braces, keys, the tool's name, quotes.
CALL_OVERHEAD_TOKENS = 16
PROPERTY_OVERHEAD_TOKENS = 6
MIN_STRING_CHARS = 16


def bound_strings(params: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """Cap the length of a call's top-level free strings so that the whole call fits in
    ``max_tokens``: a call cut off by the token limit would reach the tool without its
    required arguments. A character costs at most one token, an escape two."""
    props: dict[str, Any] = params.get("properties") or {}
    free = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string"
            and "maxLength" not in v and "enum" not in v and "const" not in v]
    if not free:
        return params
    spare = max_tokens - CALL_OVERHEAD_TOKENS - PROPERTY_OVERHEAD_TOKENS * len(props)
    cap = max(MIN_STRING_CHARS, spare // (2 * len(free)))
    bounded = {k: ({**v, "maxLength": cap} if k in free else v) for k, v in props.items()}
    return {**params, "properties": bounded}


def decision_schema(
    tools: Sequence[ToolSpec], *, allow_answer: bool = True, max_tokens: int | None = None
) -> dict[str, Any]:
    """One branch per tool (its name as a constant, its parameters schema) plus an answer
    (left out when a tool call is required). With ``max_tokens`` every call fits in it."""
    params_list, defs = tool_parameters(tools)
    if max_tokens is not None:
        params_list = [bound_strings(p, max_tokens) for p in params_list]
    branches: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"tool": {"const": t.name}, "arguments": params},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for t, params in zip(tools, params_list, strict=True)
    ]
    if allow_answer or not tools:
        branches.append({
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        })
    schema: dict[str, Any] = {"oneOf": branches}
    if defs:
        schema["$defs"] = defs
    return schema


def forced_reply(schema: dict[str, Any]) -> str | None:
    """The one reply ``schema`` (a :func:`decision_schema`) admits, if it admits one only: a
    call of a single tool, no answer, every argument required and held to one value (the
    task spelled it out: ``models.narrow``). Decoding it would only spend a model call on
    tokens the grammar forces one by one; None when the model has a choice."""
    branches = schema.get("oneOf") or []
    if len(branches) != 1 or "$defs" in schema or "tool" not in branches[0]["properties"]:
        return None
    props = branches[0]["properties"]
    params = props["arguments"]
    fields: dict[str, Any] = params.get("properties") or {}
    if params.get("additionalProperties") is not False or set(
            params.get("required") or ()) != set(fields):
        return None
    arguments = {}
    for name, field in fields.items():
        if not isinstance(field, dict):
            return None
        if "const" in field:
            arguments[name] = field["const"]
        elif len(field.get("enum") or ()) == 1:
            arguments[name] = field["enum"][0]
        else:
            return None
    return orjson.dumps({"tool": props["tool"]["const"], "arguments": arguments}).decode()


# No placeholder a small model could copy as its answer ("TEXT" came back as answers).
ANSWER_ONLY = ('Reply with one JSON object only, {"answer": "..."}, with your final answer to '
               "the user written out in it.")
# Said after the last tool result, so a small model answers instead of repeating the call.
# Measured on SmolLM2-135M: a generic "answer or make another call" was ignored (it repeated
# the call); offering the short result as the answer in the reply's own shape was taken.
AFTER_RESULT = ('Now reply with {answer} if that answers the question, or make a different '
                "tool call.")
AFTER_LONG_RESULT = ('Now reply with {"answer": "..."} giving the answer from this result, or '
                     "make a different tool call.")
# Said after a result when the task names a step no call has taken yet ("..., then ...").
AFTER_STEP = "Now make the tool call for the next step of the task."
AFTER_ERROR = ('That call failed. Make a different tool call, or reply with {"answer": "..."} '
               "saying what went wrong.")
# How a reply is shaped, with the first tool as the example ("{name}": its name).
TOOL_FORMAT = ('Reply with one JSON object only. To use a tool: {"tool": "{name}", '
               '"arguments": {...}}. When you know the final answer: {"answer": "..."} with '
               "the answer written out.")
SHORT_RESULT_CHARS = 200
# No numbers a small model could copy: with "15% of 240" in the hint, SmolLM2-135M sent it
# for "7 squared" (a wrong answer that looks right); the task's own phrases are held by the
# grammar instead (models/narrow.py), and the calculator reads them.
CALCULATOR_HINT = ("The calculator needs the whole expression with the question's own numbers "
                   "and operators (* / + - ** sqrt), or the question's words for it.")


def after_result(content: str, more_steps: bool = False) -> str:
    """What a small model is told after a tool result (see ``AFTER_RESULT``); with
    ``more_steps`` (the task names a step not taken yet) no answer is offered.

    Outside content alone in its block is offered as its text (offered with its markup, the
    model answered with the markup); with a note after it (a suspected injection, the
    trailer) it is not offered at all.
    """
    inside = content_of(content)
    shown = content if inside is None else inside
    if shown.startswith("Error:"):
        return AFTER_ERROR
    if more_steps:
        return AFTER_STEP
    noted = "\n[Note:" in shown or (inside is None and is_spotlit(content))
    if len(shown) > SHORT_RESULT_CHARS or noted:
        return AFTER_LONG_RESULT
    return AFTER_RESULT.format(answer=orjson.dumps({"answer": shown.strip()}).decode())


def uses_decisions(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> bool:
    """Decision mode: tools are offered, or past turns were decisions (a final answer asked
    for without tools must not imitate the calls in the history as free text)."""
    return bool(tools) or any(m.tool_calls for m in messages)


def _summary(text: str) -> str:
    """A description's first sentence: a small model's prompt has no room for the rest."""
    first = " ".join(text.strip().split("\n\n", 1)[0].split())
    cut = first.find(". ")
    return first if cut < 0 else first[: cut + 1]


def tools_prompt(tools: Sequence[ToolSpec]) -> str:
    if not tools:
        return ANSWER_ONLY
    lines = ["You can use these tools:"]
    for t in tools:
        props = t.parameters.get("properties") or {}
        args = ", ".join(f"{k}: {v.get('type', 'value')}" for k, v in props.items())
        lines.append(f"- {t.name}({args}): {_summary(t.description)}")
    lines.append(TOOL_FORMAT.replace("{name}", tools[0].name))
    if any(t.name == "calculator" for t in tools):
        # Measured on SmolLM2-135M: without this it sent "15" for "15% of 240".
        lines.append(CALCULATOR_HINT)
    return "\n".join(lines)


def _decision_text(m: Message) -> str:
    if not m.tool_calls:
        return orjson.dumps({"answer": m.content}).decode()
    return "\n".join(
        orjson.dumps({"tool": c.name, "arguments": c.arguments}).decode() for c in m.tool_calls
    )


def render_history(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[dict[str, str]]:
    """Plain chat turns a small model's template understands: no tool role, strict alternation.

    In decision mode the tool section (or the answer-only rule) joins the system prompt, the
    model's past decisions are shown as the JSON it would have written, and tool results
    come back as user turns.
    """
    decisions = uses_decisions(messages, tools)
    prepared: list[Message] = []
    history = repair_tool_pairs(messages)
    # The hint goes with the newest result, even when a nudge follows it in the request.
    last = max((i for i, m in enumerate(history) if m.role == "tool"), default=-1)
    more = bool(tools) and step_pending(messages)
    if any(m.role == "assistant" for m in history[last + 1:]):
        last = -1
    for i, m in enumerate(history):
        if m.role == "tool":
            # Also with tools withheld: the answer it offers is what the model should give.
            follow = f"\n{after_result(m.content, more)}" if decisions and i == last else ""
            prepared.append(Message.user(f"Result of {m.name or 'the tool'}: {m.content}{follow}"))
        elif m.role == "assistant" and decisions:
            prepared.append(Message.assistant(_decision_text(m)))
        else:
            prepared.append(Message(m.role, m.content))
    if decisions:
        section = tools_prompt(tools)
        if prepared and prepared[0].role == "system":
            prepared[0] = Message.system(f"{prepared[0].content}\n\n{section}")
        else:
            prepared.insert(0, Message.system(section))
    return [{"role": m.role, "content": m.content} for m in merge_consecutive(prepared)]


def parse_decision(text: str) -> Message:
    """Read a (grammar-constrained) reply. A reply cut short by max_tokens is salvaged:
    the answer text so far, or a tool call flagged with a parse error."""
    try:
        # Not orjson: llama.cpp's JSON grammar lets raw control characters (a newline)
        # into strings, which strict JSON refuses; the call is still whole and meant.
        data = json.loads(text, strict=False)
    except ValueError:
        return _salvage(text)
    if isinstance(data, dict) and isinstance(data.get("tool"), str):
        args = data.get("arguments")
        if isinstance(args, dict):
            return Message.assistant("", (ToolCall(_call_id(), data["tool"], args),))
        return Message.assistant("", (ToolCall(_call_id(), data["tool"], {},
                                               "arguments must be a JSON object"),))
    if isinstance(data, dict) and isinstance(data.get("answer"), str):
        return Message.assistant(data["answer"])
    return Message.assistant(text)


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


def _salvage(text: str) -> Message:
    kind, rest = split_decision(text)
    if kind == "answer":
        return Message.assistant(partial_json_string(rest))
    if kind == "tool":
        name = partial_json_string(rest)
        problem = "the reply was cut off before the tool call was complete"
        return Message.assistant("", (ToolCall(_call_id(), name, {}, problem),))
    return Message.assistant(text)


def split_decision(text: str) -> tuple[str, str]:
    """Which kind of decision a (partial) reply is, and the raw text after its first quote."""
    stripped = text.lstrip()
    for kind in ("answer", "tool"):
        head = f'"{kind}"'
        body = stripped.removeprefix("{").lstrip()
        if body.startswith(head):
            after = body[len(head):].lstrip()
            if after.startswith(":"):
                value = after[1:].lstrip()
                if value.startswith('"'):
                    return kind, value[1:]
            return kind, ""
    return "", ""


def partial_json_string(raw: str) -> str:
    """Decode the JSON string body ``raw`` up to its closing quote or the last whole escape."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == '"':
            break
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(raw):
            break
        n = raw[i + 1]
        if n == "u":
            if i + 6 > len(raw):
                break
            try:
                out.append(chr(int(raw[i + 2 : i + 6], 16)))
            except ValueError:
                break
            i += 6
            continue
        out.append(_ESCAPES.get(n, n))
        i += 2
    return "".join(out)
