"""The ``local`` provider on the prebuilt xllamacpp wheel: the same grammar-constrained
decisions as on llama-cpp-python, prompt-prefix reuse, typed overflow, and an embedded server
that no one else on the machine can use."""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from thinkloop.agent import Agent
from thinkloop.errors import ConfigError, ContextOverflowError
from thinkloop.models.base import ModelSettings
from thinkloop.models.local import FORCED, LocalModel, build_local, runtime_class
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


async def test_the_kv_cache_survives_the_process(smollm2_path: Path, tmp_path: Path) -> None:
    """The first call's prompt is evaluated once per machine, not once per process: its KV
    cells are saved to a file, and a new embedded server (as in a new process) restores them
    and evaluates only the last prompt token."""
    from thinkloop.models import local_wheel

    asked = [Message.system("Cache test, " * 20), Message.user("Say hi.")]
    settings = ModelSettings(max_tokens=4, temperature=0)
    model = WheelModel(smollm2_path, n_ctx=1024, cache_dir=tmp_path)
    await model.complete(asked, [], settings)
    first = model.last_stats
    assert first is not None and first.reused_tokens == 0
    kept = [os.path.splitext(e.name)[1] for e in os.scandir(tmp_path)]
    assert kept == [".slot"]  # no temporary file left
    local_wheel.stop_all()  # the next call starts a new server, as a new process would
    again = WheelModel(smollm2_path, n_ctx=1024, cache_dir=tmp_path)
    await again.complete(asked, [], settings)
    stats = again.last_stats
    assert stats is not None and stats.prompt_tokens == first.prompt_tokens
    assert stats.processed_tokens == 1  # only the last token, for its logits
    off = WheelModel(smollm2_path, n_ctx=1024)  # no cache directory: nothing is kept
    local_wheel.stop_all()
    await off.complete(asked, [], settings)
    assert off.last_stats is not None and off.last_stats.reused_tokens == 0


async def test_a_damaged_kv_cache_file_is_only_a_missed_speed_up(
    smollm2_path: Path, tmp_path: Path,
) -> None:
    from thinkloop.models import local_wheel
    from thinkloop.models.llama_state import SLOT_SUFFIX, state_file

    asked = [Message.system("Damaged cache test."), Message.user("Say hi.")]
    settings = ModelSettings(max_tokens=4, temperature=0)
    path = state_file(tmp_path, smollm2_path, 1024, SLOT_SUFFIX)
    for damaged in (b"not a llama.cpp file", b"GGSQ" + bytes(64)):
        path.write_bytes(damaged)
        local_wheel.stop_all()  # a new server restores from the damaged file
        model = WheelModel(smollm2_path, n_ctx=1024, cache_dir=tmp_path)
        reply = await model.complete(asked, [], settings)
        assert reply.message.content and model.last_stats is not None
        assert model.last_stats.reused_tokens == 0
        whole = path.read_bytes()
        assert whole != damaged and len(whole) > 100_000  # saved over it, whole
    local_wheel.stop_all()


async def test_a_call_the_grammar_leaves_no_choice_in_is_made_without_the_model(
    smollm2_path: Path,
) -> None:
    """The task spells out the one expression and a call is due: the grammar admits one
    reply only, so it is given without a model call (which decoded it token by token)."""
    class Counted(WheelModel):
        def __init__(self) -> None:
            super().__init__(smollm2_path, n_ctx=2048)
            self.generated = 0

        def _run(self, kwargs: dict) -> tuple[dict, int]:  # type: ignore[type-arg]
            self.generated += 1
            return super()._run(kwargs)

        def _stream_thread(self, kwargs: dict, emit: Any,  # type: ignore[type-arg]
                           stop: threading.Event) -> None:
            self.generated += 1
            super()._stream_thread(kwargs, emit, stop)

    model = Counted()
    spec = [calculator.spec]
    response = await model.complete(TASK, spec, ModelSettings())
    call = ("calculator", {"expression": "12*7"})
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [call]
    assert (response.finish_reason, response.usage.requests, model.generated) == (
        "tool_calls", 0, 0)
    items = [i async for i in model.stream(TASK, spec, ModelSettings())]
    final = items[-1]
    assert isinstance(final, ModelResponse) and model.generated == 0
    assert [(c.name, c.arguments) for c in final.message.tool_calls] == [call]
    assert [i.kind for i in items[:-1] if isinstance(i, TextDelta)] == ["tool_call"]
    # With a choice left (an answer, or two expressions) the model decides.
    free = [Message.system("s"), Message.user("What is the capital of France?")]
    await model.complete(free, spec, ModelSettings(max_tokens=8))
    assert model.generated == 1


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


def test_a_spelled_out_task_is_called_first_and_answered_once_done(smollm2_path: Path) -> None:
    from thinkloop.core.types import ToolCall

    model = WheelModel(smollm2_path, n_ctx=2048)
    spec = [calculator.spec]
    task = [Message.system("s"), Message.user("What is 7 squared?")]
    # A call, with "7 squared": the one reply left, given without the model.
    first = model._kwargs(task, spec, ModelSettings())
    assert "grammar" not in first and json.loads(first[FORCED]) == {
        "tool": "calculator", "arguments": {"expression": "7 squared"}}
    two = [Message.system("s"), Message.user("Is 7*8 more than 6*9?")]
    either_one = model._kwargs(two, spec, ModelSettings())["grammar"]
    assert "answer" not in either_one and "7*8" in either_one and "6*9" in either_one
    done = [*task, Message.assistant("", (ToolCall("c1", "calculator",
                                                    {"expression": "7 squared"}),)),
            Message.tool("c1", "calculator", "49")]
    then = model._kwargs(done, spec, ModelSettings())["grammar"]
    assert "answer" in then and "calculator" not in then  # every step done: the answer
    plain = [Message.system("s"), Message.user("What is the capital of France?")]
    either = model._kwargs(plain, spec, ModelSettings())["grammar"]
    assert "answer" in either and "calculator" in either


async def test_a_repeated_call_while_a_step_is_pending_is_asked_again_without_it(
    smollm2_path: Path,
) -> None:
    """SmolLM2 repeated its read after "Read price.txt, then use the calculator..." and
    then answered with the price; asked again without that tool it has the calculator."""
    from thinkloop.core.types import ToolCall
    from thinkloop.settings import load_settings
    from thinkloop.tools.builtin import builtin_tools

    class Replayed(WheelModel):
        def __init__(self, replies: list[str]) -> None:
            super().__init__(smollm2_path, n_ctx=2048)
            self.replies, self.grammars = replies, []

        def _run(self, kwargs: dict) -> tuple[dict, int]:  # type: ignore[type-arg]
            self.grammars.append(kwargs["grammar"])
            return {"choices": [{"message": {"content": self.replies.pop(0)},
                                 "finish_reason": "stop"}], "usage": {}}, 0

    read = {"tool": "read_file", "arguments": {"path": "price.txt"}}
    add = {"tool": "calculator", "arguments": {"expression": "20+5"}}
    settings = load_settings({"tools.workspace": smollm2_path.parent})
    tools = [t.spec for t in builtin_tools(settings.tools)
             if t.spec.name in ("read_file", "calculator")]
    history = [Message.user("Read price.txt, then use the calculator to add 5 to the price."),
               Message.assistant("", (ToolCall("c1", "read_file", {"path": "price.txt"}),)),
               Message.tool("c1", "read_file", "20")]
    model = Replayed([json.dumps(read), json.dumps(add)])
    response = await model.complete(history, tools, ModelSettings())
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [
        ("calculator", {"expression": "20+5"})]
    assert "read_file" in model.grammars[0] and "read_file" not in model.grammars[1]
    # A task of one step, done: the repeat is asked again with no tools (an answer).
    done = [Message.user("Read price.txt."), *history[1:]]
    model = Replayed([json.dumps(read), json.dumps({"answer": "20"})])
    assert (await model.complete(done, tools, ModelSettings())).message.content == "20"
