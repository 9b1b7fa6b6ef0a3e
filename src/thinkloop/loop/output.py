"""Structured output: a final answer validated into the agent's ``output_type``."""

from __future__ import annotations

import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from thinkloop.text import validation_summary

_FENCE = re.compile(r"```(?:json)?\s*\n?(.*?)```", re.DOTALL)


def _json_candidate(text: str) -> str:
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1).strip()
    stripped = text.strip()
    for open_, close in (("{", "}"), ("[", "]")):
        start, end = stripped.find(open_), stripped.rfind(close)
        if start != -1 and end > start:
            return stripped[start : end + 1]
    return stripped


def parse_output(output_type: type[Any], text: str) -> Any:
    """Validate ``text`` as ``output_type``; raise ValueError with a model-readable reason."""
    adapter: TypeAdapter[Any] = TypeAdapter(output_type)
    if output_type is str:
        return text
    try:
        return adapter.validate_json(_json_candidate(text))
    except ValidationError as exc:
        raise ValueError(validation_summary(exc)) from None
