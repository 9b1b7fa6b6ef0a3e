"""User profile facts from what the user said: key/value, updated rather than duplicated.

The default extractor reads first-person statements with a few patterns ("my X is Y", "call
me X", "I live in X", "I work at X"); it needs no model, so it runs after every turn. Pass a
model to :func:`llm_facts` for open-ended extraction.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import orjson

from thinkloop.core.model import Model, ModelSettings
from thinkloop.core.types import Message
from thinkloop.side_calls import side_call

FactExtractor = Callable[[str], dict[str, str]]

_VALUE = r"([^.,;!?\n]{1,60}?)"
_END = r"\s*(?:[.,;!?\n]|$| and )"
_PATTERNS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(r"\bmy ([a-z][a-z ]{1,30}?) (?:is|are) " + _VALUE + _END, re.I), None),
    (re.compile(r"\b(?:call me|my name's) " + _VALUE + _END, re.I), "name"),
    (re.compile(r"\bi live in " + _VALUE + _END, re.I), "location"),
    (re.compile(r"\bi work (?:at|for) " + _VALUE + _END, re.I), "employer"),
)


def fact_key(text: str) -> str:
    """A fact's key as stored: lower-case snake_case, at most 40 characters."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40]


_key = fact_key


def extract_facts(text: str) -> dict[str, str]:
    """``{"favorite_color": "teal"}`` from "My favorite color is teal."."""
    facts: dict[str, str] = {}
    for pattern, fixed in _PATTERNS:
        for match in pattern.finditer(text):
            key = fixed or _key(match.group(1))
            value = match.group(match.lastindex or 1).strip()
            if key and value:
                facts[key] = value
    return facts


PROFILE_PROMPT = (
    "Extract durable facts about the user from their message (name, preferences, projects, "
    "location, accounts). Reply with only a JSON object of short snake_case keys to string "
    "values, or {} if there are none."
)


async def llm_facts(model: Model, text: str) -> dict[str, str]:
    response = await side_call(
        model, [Message.system(PROFILE_PROMPT), Message.user(text)], purpose="memory.facts",
        settings=ModelSettings(temperature=0.0, max_tokens=300))
    raw = response.message.content.strip().removeprefix("```json").strip("`\n ")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {_key(str(k)): str(v)[:200] for k, v in data.items() if _key(str(k)) and v}
