"""Property tests: every protocol's rendering parses back; the parser never raises."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinkloop.protocols import JsonProtocol, TagsProtocol, XmlProtocol, parse_tool_calls
from thinkloop.protocols.text import TextProtocol

PROTOCOLS: list[TextProtocol] = [JsonProtocol(), TagsProtocol(), XmlProtocol()]

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
text_values = st.text(st.characters(codec="utf-8"), max_size=40)
scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text_values | st.floats(
    allow_nan=False, allow_infinity=False)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text_values, inner, max_size=4),
    max_leaves=12,
)
arguments = st.dictionaries(text_values, values, max_size=5)
# Fragments of every format, so random text exercises the handlers, not just the fast path.
fragments = st.sampled_from([
    "<tool_call>", "</tool_call>", "{", "}", "[", "]", '"', "'", ":", ",", "\\", "\n",
    "<<TOOL:", ">>", "<<THINK>>", "<</THINK>>", "<think>", "</think>", "<function=f>",
    "</function>", "<|python_tag|>", "<|eom_id|>", "[TOOL_CALLS]", "[ARGS]", "```", "```json\n",
    '"name"', '"arguments"', "name", "f(", ")", "a=1", "<invoke name=\"x\">", "</invoke>",
    "<parameter name=\"k\">", "</parameter>", "<tool_call_name>", "</tool_call_name>",
    "<read_file>", "</read_file>", "<path>", "</path>", "True", "None", "completed", "tools",
])
messy = st.lists(fragments | st.text(max_size=5), max_size=60).map("".join)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PROTOCOLS), names, arguments)
def test_any_rendered_call_parses_back(protocol: TextProtocol, name: str,
                                       args: dict[str, Any]) -> None:
    parsed = parse_tool_calls(protocol.render(name, args))
    assert [(c.name, c.arguments) for c in parsed.calls] == [(name, args)]
    assert parsed.problems == []


@settings(max_examples=60)
@given(st.sampled_from(PROTOCOLS), st.lists(st.tuples(names, arguments), min_size=2,
                                            max_size=4))
def test_several_rendered_calls_parse_back_in_order(
        protocol: TextProtocol, calls: list[tuple[str, dict[str, Any]]]) -> None:
    if isinstance(protocol, JsonProtocol):  # one decision object per reply
        text = protocol.render(calls[0][0], calls[0][1])
        calls = calls[:1]
    else:
        text = "\n".join(protocol.render(n, a) for n, a in calls)
    parsed = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in parsed.calls] == calls
    assert len({c.id for c in parsed.calls}) == len(calls)


@settings(max_examples=300)
@given(st.text())
def test_parser_never_raises_on_arbitrary_text(text: str) -> None:
    parsed = parse_tool_calls(text)
    assert isinstance(parsed.content, str)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(messy)
def test_parser_never_raises_on_format_fragments(text: str) -> None:
    parsed = parse_tool_calls(text)
    ids = [c.id for c in parsed.calls]
    assert len(set(ids)) == len(ids)
    assert all(isinstance(c.arguments, dict) for c in parsed.calls)


# Prose with stray brackets and quotes, the characters that can derail a brace matcher.
prose = st.text(st.sampled_from(list("ab {}[]\"':,.\n")), max_size=30)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([p for p in PROTOCOLS if not isinstance(p, JsonProtocol)]), names,
       arguments, prose, prose)
def test_a_rendered_call_survives_messy_prose_around_it(
        protocol: TextProtocol, name: str, args: dict[str, Any], before: str,
        after: str) -> None:
    parsed = parse_tool_calls(f"{before}\n{protocol.render(name, args)}\n{after}")
    assert [(c.name, c.arguments) for c in parsed.calls] == [(name, args)]
