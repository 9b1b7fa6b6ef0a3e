"""Pieces of the text parser: turning decoded objects, XML bodies and Python calls into calls.

Every function here works on one bounded region the scanner already isolated, so the scanner
stays linear: nothing here searches beyond the string it is given.
"""

from __future__ import annotations

import ast
import io
import itertools
import keyword
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any

from thinkloop.core.errors import JsonRepairError
from thinkloop.protocols.jsonfix import loads_lenient

# The argument a plain ``<<TOOL:NAME:text>>`` parameter is filed under until the protocol maps
# it onto the tool's single required argument.
PLAIN_PARAM = "_param"
_ARG_KEYS = ("arguments", "args", "parameters", "params", "input", "metadata")
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_NAME = re.compile(r"[A-Za-z_][\w.:-]{0,127}")
# The lookbehind and possessive quantifier keep attribute scanning linear on long runs of
# word characters (otherwise each start position inside the run would rescan it).
_ATTR = re.compile(r"""(?<![\w.:-])([\w.:-]++)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'<>/]+))""")
_CHILD = re.compile(r"<([A-Za-z_][\w.:-]*)((?:[\s=][^<>]*)?)>")
_SPACE = re.compile(r"\s*")
# Python sources larger than this are not tried as pythonic calls (ast is not linear in depth).
_MAX_PYTHONIC = 200_000
_KEYWORD_PREFIX = "_thinkloop_kw_"
_KEYWORD_ARG = re.compile(r"(?<![\w.])(?:" + "|".join(keyword.kwlist) + r")\s*=(?!=)")


@dataclass(slots=True)
class Found:
    """Calls (as name, arguments, error) and extras read from one region."""

    calls: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)
    answer: str | None = None
    completed: bool | None = None
    text: str = ""  # prose the region carries (a harmony final message)


def decode_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Arguments as a dict; a JSON string is decoded. Returns (arguments, error)."""
    if raw is None:
        return {}, None
    if isinstance(raw, str):
        if not raw.strip():
            return {}, None
        try:
            raw = loads_lenient(raw, complete=True)
        except JsonRepairError as exc:
            return {}, f"arguments are not valid JSON: {exc}"
    if isinstance(raw, dict):
        return raw, None
    return {}, f"arguments must be a JSON object, got {type(raw).__name__}"


def call_from_object(obj: Any, *, need_args: bool) -> tuple[str, dict[str, Any], str | None] | None:
    """Read one call from a decoded JSON object, or None if it is not one.

    ``need_args``: bare JSON in prose counts only with an arguments key, so an answer that is
    JSON data (``{"name": "Alice"}``) is not mistaken for a call.
    """
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function")
    if isinstance(fn, dict):
        return call_from_object(fn, need_args=need_args)
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name is None or not _NAME.fullmatch(name):
        return None
    key = next((k for k in _ARG_KEYS if k in obj), None)
    if key is None and need_args:
        return None
    arguments, error = decode_arguments(obj.get(key) if key else None)
    return name, arguments, error


def _decision(obj: dict[str, Any]) -> Found | None:
    """An OrcBot decision object: ``{reasoning, tools: [...], completed, answer}``."""
    tools = obj.get("tools", obj.get("tool_calls"))
    if "completed" not in obj and not isinstance(tools, list):
        return None
    found = Found(completed=bool(obj.get("completed", False)))
    reasoning = obj.get("reasoning", obj.get("thought"))
    if isinstance(reasoning, str) and reasoning.strip():
        found.thoughts.append(reasoning.strip())
    for item in tools if isinstance(tools, list) else []:
        call = call_from_object(item, need_args=False)
        if call is None:
            return None
        found.calls.append(call)
    answer = next((obj[k] for k in ("answer", "final_answer", "summary", "response")
                   if obj.get(k) is not None), None)
    if answer is not None:
        found.answer = answer if isinstance(answer, str) else str(answer)
    return found


def found_in_value(value: Any, *, need_args: bool) -> Found | None:
    """Calls in a decoded JSON value: one call, a list of calls, a decision, or a wrapper."""
    if isinstance(value, list):
        calls = [call_from_object(v, need_args=need_args) for v in value]
        if not calls or any(c is None for c in calls):
            return None
        return Found(calls=[c for c in calls if c is not None])
    if not isinstance(value, dict):
        return None
    for wrapper in ("tool_call", "function_call", "tool_calls"):
        if wrapper in value and len(value) == 1:
            return found_in_value(value[wrapper], need_args=False)
    if (decision := _decision(value)) is not None:
        return decision
    call = call_from_object(value, need_args=need_args)
    return Found(calls=[call]) if call else None


def json_objects(blob: str) -> list[Any] | None:
    """Decode ``blob`` as one JSON value, or as several separated by ``;``/newlines."""
    try:
        return [loads_lenient(blob, complete=True)]
    except JsonRepairError:
        pass
    parts = [p for p in re.split(r";\s*|\n\s*(?=[{\[])", blob) if p.strip()]
    if len(parts) < 2:
        return None
    try:
        return [loads_lenient(p, complete=True) for p in parts]
    except JsonRepairError:
        return None


def found_in_blob(blob: str, *, pythonic: bool, need_args: bool = False) -> Found | None:
    """Calls in a standalone blob (a fence, a python tag, a tag body).

    ``need_args`` as for :func:`call_from_object`: a plain ```json fence is often data.
    """
    values = json_objects(blob.strip())
    if values is not None:
        found = Found()
        for v in values:
            f = found_in_value(v, need_args=need_args)
            if f is None:
                return None
            _merge(found, f)
        return found
    if pythonic:
        calls = pythonic_calls(blob)
        if calls:
            return Found(calls=[(n, a, None) for n, a in calls])
    return None


def _merge(into: Found, other: Found) -> None:
    into.calls.extend(other.calls)
    into.thoughts.extend(other.thoughts)
    if other.completed is not None:
        into.completed = other.completed
    if other.answer is not None:
        into.answer = other.answer


_PY_CONSTANTS = {"true": True, "false": False, "null": None}


def _literal(node: ast.expr) -> Any:
    """A literal value, JSON's ``true``/``false``/``null`` included at any depth: OLMo 3's
    template writes each argument as JSON (``f(opts={"deep": true})``). Tuples read as lists."""
    if isinstance(node, ast.Constant) and not isinstance(node.value, bytes | complex):
        return node.value
    if isinstance(node, ast.Name) and node.id in _PY_CONSTANTS:
        return _PY_CONSTANTS[node.id]
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise ValueError("a ** in a dict literal")
        return {_literal(k): _literal(v)  # type: ignore[arg-type]
                for k, v in zip(node.keys, node.values, strict=True)}
    return ast.literal_eval(node)


def _call_name(node: ast.expr) -> str | None:
    # ``brave_search.call(query=...)`` is Llama 3's built-in tool syntax.
    if isinstance(node, ast.Attribute) and node.attr == "call" and isinstance(
            node.value, ast.Name):
        return node.value.id
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def pythonic_calls(source: str, *, lines: bool = False) -> list[tuple[str, dict[str, Any]]] | None:
    """``[f(a=1), g(b="x")]`` or ``f(a=1)``: keyword arguments with literal values only.

    ``lines``: several calls may also stand one per line or separated by ``;`` (OLMo 3).
    """
    source = source.strip()
    if not source or len(source) > _MAX_PYTHONIC:
        return None
    try:
        try:
            tree = ast.parse(source, mode="eval").body
            nodes = tree.elts if isinstance(tree, ast.List | ast.Tuple) else [tree]
        except SyntaxError:
            renamed = _rename_keywords(source)
            if renamed is not None:  # f(from="en"): a tool's argument named like a keyword
                return pythonic_calls(renamed, lines=lines)
            if not lines:
                raise
            nodes = _statement_calls(source)
        return _calls(nodes)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def _rename_keywords(source: str) -> str | None:
    """``source`` with each keyword argument named by a Python keyword (``from=``) prefixed,
    so Python parses it; None if there is none. Tokens, not text: strings stay as written."""
    if _KEYWORD_ARG.search(source) is None:
        return None  # the common case, decided without tokenizing
    lines = io.StringIO(source).readlines()
    starts = list(itertools.accumulate((len(line) for line in lines), initial=0))
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    edits = [starts[tok.start[0] - 1] + tok.start[1]
             for prev, tok, nxt in zip(tokens, tokens[1:], tokens[2:], strict=False)
             if tok.type == tokenize.NAME and keyword.iskeyword(tok.string)
             and nxt.string == "=" and prev.string in ("(", ",")]
    if not edits:
        return None
    pieces = [source[a:b] for a, b in zip([0, *edits], [*edits, len(source)], strict=True)]
    return _KEYWORD_PREFIX.join(pieces)


def _statement_calls(source: str) -> list[ast.expr]:
    # Statements may not be indented; inside brackets indentation means nothing to Python.
    module = ast.parse("\n".join(line.lstrip() for line in source.split("\n")))
    nodes: list[ast.expr] = []
    for stmt in module.body:
        if not isinstance(stmt, ast.Expr):
            raise ValueError("not a call")
        value = stmt.value
        nodes.extend(value.elts if isinstance(value, ast.List | ast.Tuple) else [value])
    return nodes


def _calls(nodes: list[ast.expr]) -> list[tuple[str, dict[str, Any]]] | None:
    calls = []
    for node in nodes:
        if not isinstance(node, ast.Call) or node.args:
            return None
        name = _call_name(node.func)
        if name is None or any(k.arg is None for k in node.keywords):
            return None
        calls.append((name, {str(k.arg).removeprefix(_KEYWORD_PREFIX): _literal(k.value)
                             for k in node.keywords}))
    return calls or None


def attributes(text: str) -> dict[str, str]:
    return {m.group(1): next(g for g in m.groups()[1:] if g is not None)
            for m in _ATTR.finditer(text)}


def _value(raw: str) -> str:
    # One-line values are trimmed; multi-line ones (file contents) keep inner indentation.
    return raw.strip() if "\n" not in raw.strip("\r\n") else raw.strip("\r\n")


def xml_children(body: str) -> dict[str, Any] | None:
    """Arguments from child elements, or None if ``body`` is not only child elements.

    Accepts ``<k>v</k>``, ``<parameter name="k">v</parameter>``, ``<parameter=k>v</parameter>``
    and GLM's ``<arg_key>k</arg_key><arg_value>v</arg_value>`` pairs. Values stay strings: XML
    carries text, and the protocol converts them using the tool's schema.
    """
    args: dict[str, Any] = {}
    pending_key: str | None = None
    i, n = _SPACE.match(body).end(), len(body)  # type: ignore[union-attr]
    while i < n:
        m = _CHILD.match(body, i)
        if m is None:
            return None
        tag, attrs = m.group(1), m.group(2) or ""
        close = body.find(f"</{tag}>", m.end())
        if close < 0:
            return None
        raw = body[m.end():close]
        if tag.rsplit(":", 1)[-1].lower() == "parameter":  # also steptml:parameter
            key = attrs[1:].strip() if attrs.startswith("=") else attributes(attrs).get("name")
            if not key:
                return None
            args[key.strip("\"'")] = _value(raw)
        elif tag == "arg_key":
            pending_key = raw.strip()
        elif tag == "arg_value" and pending_key is not None:
            args[pending_key] = _value(raw)
            pending_key = None
        else:
            args[tag] = _value(raw)
        i = _SPACE.match(body, close + len(tag) + 3).end()  # type: ignore[union-attr]
    return args
