"""The in-process local provider (llama-cpp-python + SmolLM2), grammar-constrained."""

import ast
import asyncio
import operator
from collections.abc import Callable
from pathlib import Path

import jsonschema
import orjson
import pytest

from protocols.grammar_check import admits  # tests/ is on sys.path (rootdir)
from thinkloop.agent import Agent, AgentOptions
from thinkloop.errors import ContextOverflowError
from thinkloop.models.base import ModelSettings
from thinkloop.models.decision import decision_schema
from thinkloop.models.local import LocalModel, _load, build_local, json_gbnf
from thinkloop.models.wrappers import OverflowRecovery
from thinkloop.tools.base import tool
from thinkloop.types import Message, ModelResponse, TextDelta, ToolSpec

pytestmark = pytest.mark.slow

_OPS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.USub: operator.neg,
}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    raise ValueError("only numbers and + - * / are allowed")


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as 12*7.

    Args:
        expression: the arithmetic to evaluate
    """
    return str(_eval(ast.parse(expression, mode="eval").body))


TASK = [Message.system("You are a helpful assistant."),
        Message.user("What is 12*7? Use the calculator.")]
CALC: ToolSpec = calculator.spec


async def test_agent_run_with_calculator_every_decision_parses(smollm2_path: Path) -> None:
    agent = Agent(model="local", tools=[calculator], max_steps=4,
                  options=AgentOptions(settings=ModelSettings(temperature=0, max_tokens=96)))
    assert agent.model.name == "local"
    events = [e async for e in agent.stream("What is 12*7? Use the calculator.")]
    responses = [e.payload for e in events if e.type == "llm.response"]
    results = [e.payload for e in events if e.type == "tool.result"]
    ended = events[-1]
    assert ended.type == "run.completed", ended.payload
    assert len(responses) >= 2  # at least one tool step, then an answer or the step cap
    for payload in responses:
        for call in payload["tool_calls"]:
            assert call["name"] == "calculator"
            jsonschema.validate(call["arguments"], CALC.parameters)
        assert payload["tool_calls"] or payload["text"]
    # What a 135M model writes inside the string is its own affair (benchmarks/local_tasks.py
    # measures that); that the call has its required argument is the engine's.
    assert any(not r["is_error"] for r in results), results


async def test_streaming_with_tools_shows_calls_and_answers(smollm2_path: Path) -> None:
    model = LocalModel(smollm2_path)
    settings = ModelSettings(temperature=0, max_tokens=64)
    # Two expressions: the model chooses (one only would be given without it: decision.py).
    task = [TASK[0], Message.user("Is 12*7 more than 9*9? Use the calculator.")]
    items = [i async for i in model.stream(task, [CALC], settings)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    deltas = [i for i in items if isinstance(i, TextDelta)]
    if final.message.tool_calls:
        assert {d.kind for d in deltas} == {"tool_call"}
        assert "".join(d.text for d in deltas).startswith("{")
    else:
        assert "".join(d.text for d in deltas) == final.message.content
    assert final.usage.input_tokens > 0
    assert final.usage.output_tokens >= len(deltas) > 0


async def test_plain_generation_without_tools(smollm2_path: Path) -> None:
    model = LocalModel(smollm2_path)
    settings = ModelSettings(max_tokens=8, temperature=0)
    done = await model.complete(TASK, [], settings)
    items = [i async for i in model.stream(TASK, [], settings)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert done.message.content == final.message.content != ""
    assert "".join(i.text for i in items if isinstance(i, TextDelta)) == final.message.content
    assert done.usage.output_tokens == 8 and done.usage.input_tokens > 0
    assert final.usage.input_tokens == done.usage.input_tokens


async def test_concurrent_calls_are_serialised_not_corrupted(smollm2_path: Path) -> None:
    model = LocalModel(smollm2_path)
    settings = ModelSettings(max_tokens=6, temperature=0)
    first, second = await asyncio.gather(model.complete(TASK, [], settings),
                                         model.complete(TASK, [], settings))
    assert first.message.content == second.message.content != ""


async def test_context_overflow_is_typed_and_recovered(smollm2_path: Path) -> None:
    # Earlier turns are cut to fit (see below); a last turn that alone overflows is not.
    small = LocalModel(smollm2_path, n_ctx=256)
    long_history = [Message.system("You are terse."), Message.user("hi"),
                    Message.assistant("hello"), Message.user("filler " * 400)]
    with pytest.raises(ContextOverflowError):
        await small.complete(long_history, [], ModelSettings(max_tokens=4))
    recovered = await OverflowRecovery(small, lambda m: [m[0], Message.user("hi")]).complete(
        long_history, [], ModelSettings(max_tokens=4))
    assert recovered.message.content


def test_local_path_must_exist() -> None:
    model = build_local("", {})
    assert model.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"


async def test_tool_choice_required_and_none_shape_the_grammar(smollm2_path: Path) -> None:
    model = LocalModel(smollm2_path)
    asked = [Message.system("You are a helpful assistant."), Message.user("Say hello.")]
    required = await model.complete(asked, [CALC], ModelSettings(
        tool_choice="required", max_tokens=48, temperature=0))
    (call,) = required.message.tool_calls
    assert call.name == "calculator" and call.parse_error is None
    none = await model.complete(asked, [CALC], ModelSettings(
        tool_choice="none", max_tokens=8, temperature=0))
    assert none.message.tool_calls == () and none.message.content


async def test_a_call_always_fits_its_token_limit_so_required_arguments_arrive(
    smollm2_path: Path,
) -> None:
    # A long expression under a tight token limit: the grammar caps the string so the call
    # closes in time, instead of being cut off without its required argument.
    model = LocalModel(smollm2_path)
    asked = [Message.system("You are a helpful assistant."),
             Message.user("Add up every whole number from 1 to 60, written out in full as "
                          "1+2+3+4+5+6+7+8+9+10+11+12+... Use the calculator.")]
    for max_tokens in (48, 96):
        reply = await model.complete(asked, [CALC], ModelSettings(
            tool_choice="required", max_tokens=max_tokens, temperature=0))
        (call,) = reply.message.tool_calls
        assert call.parse_error is None, (max_tokens, call)
        jsonschema.validate(call.arguments, CALC.parameters)


def test_the_decision_grammar_holds_strings_to_strict_json(smollm2_path: Path) -> None:
    llm = _load(smollm2_path, 4096).llm
    gbnf = json_gbnf(orjson.dumps(decision_schema([CALC], max_tokens=64)).decode())
    assert admits(llm, gbnf, '{"tool": "calculator", "arguments": {"expression": "12*7"}}')
    assert admits(llm, gbnf, '{"answer": "line one\\nline two"}')
    assert not admits(llm, gbnf, '{"answer": "line one\nline two"}')
    assert not admits(llm, gbnf, '{"tool": "calculator", "arguments": {}}')
    call = orjson.dumps({"tool": "calculator", "arguments": {"expression": "1+" * 30 + "1"}})
    assert not admits(llm, gbnf, call.decode())


async def test_input_is_cut_to_the_window_with_a_note(smollm2_path: Path) -> None:
    from thinkloop.models.local_fit import fit_messages

    llm = _load(smollm2_path, 4096).llm
    long = "The launch code is 4711. " + "filler words " * 3000 + "The end."
    turns = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": long}]
    fitted, cut = fit_messages(llm, turns, 4096, 256)
    text = fitted[1]["content"]
    assert f"[... {cut} characters cut here to fit the model's 4096-token context" in text
    assert text.startswith("The launch code is 4711.") and text.endswith("The end.")
    sizes = sum(len(llm.tokenize(t["content"].encode(), add_bos=False)) for t in fitted)
    assert sizes + 256 <= 4096 and fitted[0] == turns[0]
    model = LocalModel(smollm2_path)
    history = [Message.system("Be brief."), Message.user(long)]
    settings = ModelSettings(max_tokens=4, temperature=0)
    reply = await model.complete(history, [], settings)
    assert reply.usage.input_tokens < 4096
    # The reply says how much its model left out (the run tells the person: model.input_cut).
    # (Less than above: this reply may take 4 tokens, not 256.)
    assert reply.window == 4096 and 0 < reply.cut_chars < cut
    streamed = [i async for i in model.stream(history, [], settings)][-1]
    assert isinstance(streamed, ModelResponse) and (streamed.cut_chars, streamed.window) == (
        reply.cut_chars, 4096)
    whole = await model.complete([Message.system("Be brief."), Message.user("hi")], [],
                                 settings)
    assert (whole.cut_chars, whole.window) == (0, 0)


async def test_overflow_is_not_called_http(smollm2_path: Path) -> None:
    small = LocalModel(smollm2_path, n_ctx=256)
    history = [Message.system("x"), Message.user("hi"), Message.assistant("hello"),
               Message.user("filler " * 400)]
    with pytest.raises(ContextOverflowError) as info:
        await small.complete(history, [], ModelSettings(max_tokens=4))
    assert "HTTP" not in str(info.value) and "local model's context window" in str(info.value)


async def test_free_text_is_capped_and_prompt_prefixes_are_reused(smollm2_path: Path) -> None:
    from thinkloop.models.local import FREE_MAX_TOKENS

    model = LocalModel(smollm2_path)
    assert model._kwargs(TASK, [], ModelSettings())["max_tokens"] == FREE_MAX_TOKENS
    settings = ModelSettings(max_tokens=4, temperature=0)
    await model.complete([Message.system("Prefix test."), Message.user("Say hi.")], [], settings)
    await model.complete([Message.system("Prefix test."), Message.user("Say bye.")], [],
                         settings)
    stats = model.last_stats
    assert stats is not None and 0 < stats.reused_tokens < stats.prompt_tokens
    assert stats.processed_tokens == stats.prompt_tokens - stats.reused_tokens


async def test_the_kv_cache_survives_the_process(smollm2_path: Path, tmp_path: Path) -> None:
    from thinkloop.models.llama_state import load_prefix, state_file
    from thinkloop.models.local import default_threads

    model = LocalModel(smollm2_path, n_ctx=1024, cache_dir=tmp_path)
    asked = [Message.system("Cache test."), Message.user("Say hi.")]
    await model.complete(asked, [], ModelSettings(max_tokens=4, temperature=0))
    path = state_file(tmp_path, smollm2_path, 1024)
    assert path.is_file()
    # A fresh Llama (as in a new process) restores the saved tokens and KV cells.
    from llama_cpp import Llama

    fresh = Llama(str(smollm2_path), n_ctx=1024, n_threads=default_threads(), verbose=False)
    try:
        restored = load_prefix(fresh, path)
        assert restored > 10 and fresh.n_tokens == restored
        out = fresh.create_chat_completion(
            messages=[{"role": "system", "content": "Cache test."},
                      {"role": "user", "content": "Say hi."}], max_tokens=4, temperature=0)
        assert out["choices"][0]["message"]["content"]
    finally:
        fresh.close()


def test_an_exact_repeat_of_a_call_that_worked_is_recognised() -> None:
    from thinkloop.models.local_repeat import repeats_last_call
    from thinkloop.types import ToolCall

    first = ToolCall("c1", "calculator", {"expression": "12*7"})
    same = Message.assistant("", (ToolCall("c2", "calculator", {"expression": "12*7"}),))
    other = Message.assistant("", (ToolCall("c3", "calculator", {"expression": "12*8"}),))
    done = [*TASK, Message.assistant("", (first,)), Message.tool("c1", "calculator", "84")]
    failed = [*done[:-1], Message.tool("c1", "calculator", "Error: boom")]
    assert repeats_last_call(done, same)
    assert not repeats_last_call(done, other) and not repeats_last_call(failed, same)
    assert not repeats_last_call(TASK, same)
    assert not repeats_last_call(done, Message.assistant("84"))
