"""The ``local`` provider on the prebuilt xllamacpp wheel: the same grammar-constrained
decisions as on llama-cpp-python, prompt-prefix reuse, typed overflow, and an embedded server
that no one else on the machine can use."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from thinkloop.agent import Agent
from thinkloop.errors import ConfigError, ContextOverflowError
from thinkloop.models.base import ModelSettings
from thinkloop.models.local import LocalModel, build_local, runtime_class
from thinkloop.models.local_wheel import WheelModel, _start
from thinkloop.tools.builtin.calculator import calculator
from thinkloop.types import Message, ModelResponse, TextDelta

pytestmark = pytest.mark.slow

TASK = [Message.system("You are a helpful assistant."),
        Message.user("What is 12*7? Use the calculator.")]


async def test_an_agent_run_decides_through_the_grammar_and_answers(smollm2_path: Path) -> None:
    agent = Agent(WheelModel(smollm2_path, n_ctx=2048), tools=[calculator], max_steps=4)
    result = await agent.run("What is 12*7? Use the calculator.")
    calls = [c for s in result.steps for c in s.tool_calls]
    assert calls and calls[0].name == "calculator" and calls[0].parse_error is None
    assert result.status == "completed" and "84" in result.text


async def test_streaming_shows_the_answer_as_prose(smollm2_path: Path) -> None:
    model = WheelModel(smollm2_path, n_ctx=2048)
    settings = ModelSettings(max_tokens=8, temperature=0)
    items = [i async for i in model.stream(TASK, [], settings)]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    text = "".join(i.text for i in items if isinstance(i, TextDelta))
    assert text == final.message.content != ""
    assert final.usage.output_tokens > 0 and final.usage.input_tokens > 0


async def test_prefixes_are_reused_between_calls(smollm2_path: Path) -> None:
    model = WheelModel(smollm2_path, n_ctx=2048)
    settings = ModelSettings(max_tokens=4, temperature=0)
    await model.complete([Message.system("Prefix test."), Message.user("Say hi.")], [],
                         settings)
    await model.complete([Message.system("Prefix test."), Message.user("Say bye.")], [],
                         settings)
    stats = model.last_stats
    assert stats is not None and 0 < stats.reused_tokens < stats.prompt_tokens


async def test_overflow_is_typed_and_long_input_is_cut_with_a_note(smollm2_path: Path) -> None:
    small = WheelModel(smollm2_path, n_ctx=256)
    last_too_long = [Message.system("x"), Message.user("hi"), Message.assistant("hello"),
                     Message.user("filler " * 400)]
    with pytest.raises(ContextOverflowError) as info:
        await small.complete(last_too_long, [], ModelSettings(max_tokens=4))
    assert "local model's context window" in str(info.value)
    middle_too_long = [Message.system("Be brief."), Message.user("The code is 4711. " * 200),
                       Message.assistant("ok"), Message.user("Say hi.")]
    reply = await small.complete(middle_too_long, [], ModelSettings(max_tokens=4))
    assert reply.message.content and reply.usage.input_tokens < 256
    # The reply says its model left part of the long turn out, and its window.
    assert reply.window == 256 and 0 < reply.cut_chars < len("The code is 4711. " * 200)
    streamed = [i async for i in small.stream(middle_too_long, [], ModelSettings(max_tokens=4))]
    final = streamed[-1]
    assert isinstance(final, ModelResponse) and final.window == 256 and final.cut_chars > 0
    whole = await small.complete(TASK, [], ModelSettings(max_tokens=4))
    assert (whole.cut_chars, whole.window) == (0, 0)


def test_the_embedded_server_refuses_other_callers(smollm2_path: Path) -> None:
    served = _start(smollm2_path, 2048, 1)
    address = served.server.listening_address
    assert address.startswith("http://127.0.0.1:")
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    request = urllib.request.Request(f"{address}/v1/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)
    info.value.close()
    assert info.value.code == 401


def test_the_runtime_is_chosen_by_setting(smollm2_path: Path, tmp_path: Path) -> None:
    env = {"THINKLOOP_HOME": str(tmp_path)}
    assert runtime_class(env) is WheelModel  # auto prefers the wheel
    assert type(build_local(str(smollm2_path), env)) is WheelModel
    source = {**env, "THINKLOOP_LOCAL_RUNTIME": "llama-cpp-python"}
    assert type(build_local(str(smollm2_path), source)) is LocalModel
    with pytest.raises(ConfigError, match="THINKLOOP_LOCAL_RUNTIME: Input should be 'auto'"):
        runtime_class({"THINKLOOP_LOCAL_RUNTIME": "gpu"})


async def test_the_grammar_holds_what_the_task_spells_out(
    smollm2_path: Path, tmp_path: Path,
) -> None:
    """Without the narrowed grammar SmolLM2 sent "17+25*3" for this task (92, not 126)."""
    agent = Agent(WheelModel(smollm2_path, n_ctx=2048), tools=[calculator], max_steps=3)
    result = await agent.run("What is (17+25)*3?")
    calls = [c for s in result.steps for c in s.tool_calls]
    assert calls and (calls[0].name, calls[0].arguments) == (
        "calculator", {"expression": "(17+25)*3"})
