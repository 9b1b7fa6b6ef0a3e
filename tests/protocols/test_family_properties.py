"""Property: any call rendered in any family's format parses back identically, whole and
streamed in random chunk sizes."""

from __future__ import annotations

import keyword
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinkloop.protocols import parse_tool_calls
from thinkloop.protocols.stream import StreamParser

from .families import (
    FAMILIES,
    Family,
    glm,
    minimax_m2,
    qwen3_coder,
    seed_oss,
    step3,
    step3_bare_invoke,
)

# Formats that carry values as XML text: their values are strings here (no schema given).
XML_TEXT = {qwen3_coder, glm, minimax_m2, seed_oss, step3, step3_bare_invoke}

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and n not in ("true", "false", "null"))
# Python keywords included: pythonic formats write them as argument names too (from="en").
keys = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True) | st.sampled_from(
    ["from", "in", "class", "if", "is", "lambda"])
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text | st.floats(
    allow_nan=False, allow_infinity=False)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(keys, inner, max_size=3), max_leaves=8)
# XML text: no markup characters, no surrounding spaces (XML values are trimmed).
xml_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp"),
                                 exclude_characters="<>&`"), min_size=1, max_size=30).map(
    str.strip).filter(bool)


@st.composite
def family_calls(draw: st.DrawFn) -> tuple[Family, list[tuple[str, dict[str, Any]]]]:
    family = draw(st.sampled_from(FAMILIES))
    vals = xml_text if family.render in XML_TEXT else values
    calls = draw(st.lists(st.tuples(names, st.dictionaries(keys, vals, max_size=4)),
                          min_size=1, max_size=3))
    return family, calls


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(family_calls(), st.lists(st.integers(1, 16), min_size=1, max_size=5))
def test_any_call_in_any_family_format_parses_back_whole_and_streamed(
        case: tuple[Family, list[tuple[str, dict[str, Any]]]], sizes: list[int]) -> None:
    family, calls = case
    rendered = family.render(calls)
    whole = parse_tool_calls(rendered)
    assert [(c.name, c.arguments) for c in whole.calls] == calls, rendered
    assert whole.problems == []
    parser = StreamParser()
    i = k = 0
    while i < len(rendered):
        parser.feed(rendered[i:i + sizes[k % len(sizes)]])
        i += sizes[k % len(sizes)]
        k += 1
    parser.close()
    streamed = parser.result()
    assert [(c.name, c.arguments) for c in streamed.calls] == calls
    assert (streamed.content, streamed.thoughts) == (whole.content, whole.thoughts)
