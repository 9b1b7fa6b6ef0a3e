"""The newer open-model families (LFM2, OLMo 3, Step-3, Llama 3.x JSON, pythonic lists,
Mistral v11+, Hermes/Qwen), read whole and streamed at random chunk sizes, and by ``auto``
from the model's name (cases: newfamilies.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinkloop.core.types import Message, ModelResponse, ToolSpec
from thinkloop.protocols import Act, Answer, AutoProtocol, Malformed, parse_tool_calls
from thinkloop.protocols.stream import CallReady
from thinkloop.protocols.table import family_of

from .families import TOOLS
from .newfamilies import CASES, Case
from .test_stream import same, stream


def flat(text: str) -> str:
    return " ".join(text.split())


def test_every_family_of_the_issue_has_cases_of_its_own() -> None:
    for family in ("lfm2", "olmo3", "step3", "llama", "pythonic", "mistral", "hermes"):
        assert sum(c[0].startswith(family) for c in CASES) >= 4, family


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_family_reply_parses_whole(case: Case) -> None:
    _, _, text, calls, content, problems = case
    parsed = parse_tool_calls(text, tools=TOOLS)
    assert [(c.name, c.arguments) for c in parsed.calls] == calls
    assert all(c.parse_error is None for c in parsed.calls)
    assert flat(parsed.content) == content
    assert len(parsed.problems) == problems, parsed.problems


# OLMo 3 Think's template opens the thinking block, so the reply only closes it: prose streamed
# before that closer stays prose (the stream parser's one documented exception).
STREAMABLE = [c for c in CASES if c[0] != "olmo3-think"]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(STREAMABLE), st.lists(st.integers(1, 24), min_size=1, max_size=6))
def test_a_family_reply_streamed_in_random_chunks_reads_as_whole(case: Case,
                                                                 sizes: list[int]) -> None:
    text, calls = case[2], case[3]
    streamed, events = stream(text, sizes, tools=TOOLS)
    same(streamed, parse_tool_calls(text, tools=TOOLS))
    assert [(e.call.name, e.call.arguments) for e in events if isinstance(e, CallReady)] == calls


@pytest.mark.parametrize("case", STREAMABLE, ids=[c[0] for c in STREAMABLE])
def test_a_family_reply_streamed_char_by_char_reads_as_whole(case: Case) -> None:
    streamed, _ = stream(case[2], [1], tools=TOOLS)
    same(streamed, parse_tool_calls(case[2], tools=TOOLS))


@pytest.mark.parametrize(("model", "family"), [
    ("LiquidAI/LFM2-1.2B", "lfm2"), ("LiquidAI/LFM2.5-1.2B-Instruct", "lfm2"),
    ("lfm2-8b-a1b-Q4_K_M.gguf", "lfm2"), ("allenai/Olmo-3-7B-Instruct", "olmo3"),
    ("allenai/Olmo-3.1-32B-Think", "olmo3"), ("olmo-3:7b", "olmo3"),
    ("stepfun-ai/step3", "step3"), ("Step-3", "step3"), ("stepfun-ai/Step-3.5-Flash", "step3p5"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama3_json"),
    ("meta-llama/Llama-3.3-70B-Instruct", "llama3_json"), ("llama3.1:8b", "llama3_json"),
    ("meta-llama/Llama-3.2-3B-Instruct", "llama_pythonic"), ("llama3.2:3b", "llama_pythonic"),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama_pythonic"),
    ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral"),
    ("mistralai/Magistral-Small-2509", "mistral"), ("devstral-small", "mistral"),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen"), ("qwen3:8b", "qwen"),
    ("NousResearch/Hermes-3-Llama-3.1-8B", "hermes"),
    ("NousResearch/Hermes-2-Pro-Mistral-7B", "hermes"),
])
def test_auto_picks_the_family_from_the_model_name(model: str, family: str) -> None:
    found = family_of(model)
    assert found is not None and found.name == family


def _read(case: Case, tools: list[ToolSpec] = TOOLS) -> Any:
    protocol = AutoProtocol()
    protocol.prompt_section(tools)
    return protocol.read(ModelResponse(Message.assistant(case[2]), model=case[1]))


@pytest.mark.parametrize("case", [c for c in CASES if c[3]], ids=[c[0] for c in CASES if c[3]])
def test_auto_reads_the_familys_calls(case: Case) -> None:
    reading = _read(case)
    assert isinstance(reading, Act)
    assert [(c.name, c.arguments) for c in reading.calls] == case[3]
    assert flat(reading.text) == case[4]


@pytest.mark.parametrize("case", [c for c in CASES if not c[3] and c[5]],
                         ids=[c[0] for c in CASES if not c[3] and c[5]])
def test_auto_reports_an_unreadable_or_unknown_call_to_the_model(case: Case) -> None:
    assert isinstance(_read(case), Malformed)


def test_a_call_to_an_unknown_tool_is_answered_with_the_tools_there_are() -> None:
    case = next(c for c in CASES if c[0] == "hermes-unknown-tool-stays-text")
    reading = _read(case)
    assert isinstance(reading, Malformed)
    assert reading.problem.startswith("unknown tool 'launch_rocket'; available tools: echo, "
                                      "get_time, get_weather, search, set_flags, write_file.")


def test_a_final_answer_call_is_the_answer_where_no_such_tool_is_offered() -> None:
    case = next(c for c in CASES if c[0] == "hermes-final-answer-not-offered")
    reading = _read(case)
    assert isinstance(reading, Answer) and reading.text == "It is sunny."
    offered = [*TOOLS, ToolSpec("final_answer", "Give the answer.", {
        "type": "object", "properties": {"answer": {"type": "string"}}})]
    reading = _read(case, offered)
    assert isinstance(reading, Act)
    assert [(c.name, c.arguments) for c in reading.calls] == [
        ("final_answer", {"answer": "It is sunny."})]


def test_a_mention_of_a_tool_in_prose_is_the_answer() -> None:
    case = next(c for c in CASES if c[0] == "llama-mention-is-prose")
    reading = _read(case)
    assert isinstance(reading, Answer) and reading.text == case[2]


MB = 1_000_000
HOSTILE = {
    "lfm2 openers": "<|tool_call_start|>" * (MB // 19),
    "lfm2 open lists": "<|tool_call_start|>[f(a=" * (MB // 24),
    "lfm2 unclosed calls": '<|tool_call_start|>[get_time(x="]' * (MB // 31),
    "olmo3 openers": "<function_calls>" * (MB // 16),
    "olmo3 unclosed lines": "<function_calls>f(a=1)\n" * (MB // 23),
    "step3 unclosed invokes": ("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>"
                               '<steptml:invoke name="f">') * (MB // 80),
    "llama cut-off strings": '{"name": "f", "parameters": {"a": "' * (MB // 36),
    "llama sentences before braces": "Done. {" * (MB // 7),
    "llama semicolons": '{"a": 1}; ' * (MB // 10),
    "pythonic open calls": "Sure. [f(a=" * (MB // 11),
    "mistral markers": "[TOOL_CALLS]f[ARGS]" * (MB // 19),
    "mistral call ids": "[TOOL_CALLS]f[CALL_ID]" * (MB // 22),
}


# Speed is measured by benchmarks/parser.py (each of these takes well under a second); here
# each 1 MB hostile reply must end, whole and streamed, without inventing a call.
@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_megabyte_ends_without_calls(name: str) -> None:
    text = HOSTILE[name]
    whole = parse_tool_calls(text, tools=TOOLS)
    assert whole.calls == []
    streamed, _ = stream(text, [4096], tools=TOOLS)
    assert streamed.calls == []
