"""Argument values typed by the tool's JSON schema.

XML-parameter formats (Qwen3-Coder, GLM, MiniMax M2, Seed-OSS, Step-3, Claude-style invoke)
carry every value as text: ``<parameter=flag>true</parameter>`` is the string ``"true"``. The
tool's schema says what it should be; this module turns the text into that type (booleans,
numbers, null, and arrays/objects written as JSON or Python literals). A value that does not
convert stays as it was, so argument validation can name the problem to the model.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from thinkloop.core.errors import JsonRepairError
from thinkloop.core.types import ToolSpec
from thinkloop.protocols.jsonfix import loads_lenient

_BOOLS = {"true": True, "false": False, "yes": True, "no": False}
_INTEGER = re.compile(r"[-+]?\d{1,300}")
_NUMBER = re.compile(r"[-+]?(?:\d{1,300}\.?\d{0,300}|\.\d{1,300})(?:e[-+]?\d{1,4})?")
_NULLS = frozenset({"null", "none", "nil"})
# Literals longer than this are not handed to ast (its cost is not linear in nesting).
_MAX_LITERAL = 200_000


def schema_types(prop: Mapping[str, Any]) -> set[str]:
    """Every JSON type a property schema allows (``type``, lists of types, anyOf/oneOf)."""
    kind = prop.get("type")
    found = {kind} if isinstance(kind, str) else {k for k in kind or () if isinstance(k, str)}
    for key in ("anyOf", "oneOf", "allOf"):
        for alt in prop.get(key) or ():
            if isinstance(alt, Mapping):
                found |= schema_types(alt)
    if not found and "enum" in prop:
        found |= {_json_type(v) for v in prop["enum"]}
    if not found and "properties" in prop:
        found.add("object")
    return found


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "string"


def _decode(text: str) -> Any:
    """A JSON (or Python literal) value written as text; raises ValueError if it is not one."""
    stripped = text.strip()
    try:
        return loads_lenient(stripped)
    except JsonRepairError:
        if len(stripped) > _MAX_LITERAL:
            raise
    try:
        return ast.literal_eval(stripped)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        raise ValueError(f"not a literal: {stripped[:40]!r}") from None


def _from_text(text: str, kinds: set[str]) -> Any:
    low = text.strip().lower()
    if "null" in kinds and low in _NULLS:
        return None
    if "boolean" in kinds and low in _BOOLS:
        return _BOOLS[low]
    if kinds & {"integer", "number"} and _NUMBER.fullmatch(low):
        number = float(low)
        if _INTEGER.fullmatch(low) or ("integer" in kinds and number.is_integer()):
            return int(number) if not _INTEGER.fullmatch(low) else int(low)
        if "number" in kinds:
            return number
    if kinds & {"array", "object"}:
        with contextlib.suppress(ValueError):
            value = _decode(text)
            if _json_type(value) in kinds or (isinstance(value, tuple) and "array" in kinds):
                return list(value) if isinstance(value, tuple) else value
    return text


def coerce_value(value: Any, prop: Mapping[str, Any]) -> Any:
    """``value`` turned into a type ``prop`` (a JSON schema) allows, where one is clear."""
    if type(value) is str and value != "null" and prop.get("type") == "string":
        # The common case, before every native call runs: a string where the schema says
        # string stays as it is (only "null" may turn into None, for a nullable string).
        return value
    kinds = schema_types(prop)
    if not kinds:
        return value
    if isinstance(value, str) and "string" not in kinds:
        value = _from_text(value, kinds)
    elif value == "null" and "null" in kinds:  # a nullable string: null is written "null"
        value = None
    elif isinstance(value, int | float) and not isinstance(value, bool) and kinds == {"string"}:
        value = str(value)
    elif isinstance(value, float) and value.is_integer() and "integer" in kinds and (
            "number" not in kinds):
        value = int(value)
    if isinstance(value, dict) and isinstance(prop.get("properties"), Mapping):
        value = coerce_arguments(value, prop)
    elif isinstance(value, list) and isinstance(prop.get("items"), Mapping):
        value = [coerce_value(v, prop["items"]) for v in value]
    return value


def coerce_arguments(args: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Each argument typed by its property in ``schema`` (an object schema)."""
    props = schema.get("properties") or {}
    return {k: coerce_value(v, props[k]) if isinstance(props.get(k), Mapping) else v
            for k, v in args.items()}


def tool_specs(tools: Sequence[ToolSpec | Mapping[str, Any]]) -> dict[str, ToolSpec]:
    """Tools by name, from ToolSpecs or OpenAI-style dicts (``{"type": "function", ...}``)."""
    specs: dict[str, ToolSpec] = {}
    for tool in tools:
        if isinstance(tool, ToolSpec):
            specs[tool.name] = tool
            continue
        fn = tool.get("function", tool)
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise ValueError(f"a tool needs a name: {tool!r}")
        params = fn.get("parameters", fn.get("input_schema")) or {}
        specs[fn["name"]] = ToolSpec(fn["name"], str(fn.get("description", "")), dict(params))
    return specs


def find_spec(specs: Mapping[str, ToolSpec], name: str) -> ToolSpec | None:
    """The tool a call names: exactly, case-insensitively, or with a namespace prefix dropped
    (``functions.get_weather``, Kimi and harmony write calls that way)."""
    spec = specs.get(name)
    if spec is not None:
        return spec
    low = name.lower()
    bare = low.rsplit(".", 1)[-1]
    return next((s for s in specs.values() if s.name.lower() in (low, bare)), None)
