"""The in-process local provider (llama-cpp-python + SmolLM2), grammar-constrained."""

import ast
import asyncio
import operator
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from thinkloop.agent import Agent
from thinkloop.errors import ContextOverflowError
from thinkloop.models.base import ModelSettings
from thinkloop.models.local import LocalModel, build_local
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
                  settings=ModelSettings(temperature=0, max_tokens=96))
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
    assert results and not results[0]["is_error"]


async def test_streaming_with_tools_shows_calls_and_answers(smollm2_path: Path) -> None:
    model = LocalModel(smollm2_path)
    settings = ModelSettings(temperature=0, max_tokens=64)
    items = [i async for i in model.stream(TASK, [CALC], settings)]
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
    small = LocalModel(smollm2_path, n_ctx=256)
    long_history = [Message.system("You are terse."), Message.user("hi")]
    long_history += [Message.user("filler " * 30) for _ in range(12)]
    with pytest.raises(ContextOverflowError):
        await small.complete(long_history, [], ModelSettings(max_tokens=4))
    recovered = await OverflowRecovery(small, lambda m: [m[0], m[-1]]).complete(
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
