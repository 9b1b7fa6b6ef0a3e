"""Ordinary multi-step work with the defaults: progress is never mistaken for a loop."""

from __future__ import annotations

from pathlib import Path

from thinkloop import Agent, tool
from thinkloop.spotlight import unwrap
from thinkloop.testing.openai_server import OpenAIServer
from thinkloop.tools.defaults import default_tools

from .conftest import calls, say, tool_names


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_ten_steps_one_tool_new_arguments_each_step(llm: OpenAIServer) -> None:
    llm.enqueue(*[calls(("add", {"a": i, "b": 2})) for i in range(10)],
                say("2, 3, 4, 5, 6, 7, 8, 9, 10, 11"))
    async with Agent(tools=[add]) as agent:
        result = await agent.run("Add 2 to each number from 0 to 9 with the add tool, one "
                                 "call per number, and list the results.")
    assert result.status == "completed", result.error
    assert result.text == "2, 3, 4, 5, 6, 7, 8, 9, 10, 11"
    assert [s.results[0].content for s in result.steps[:10]] == [str(i + 2) for i in range(10)]
    assert len(llm.requests) == 11


async def test_reading_six_files_one_by_one(llm: OpenAIServer, tmp_path: Path) -> None:
    files = default_tools("read_file,list_dir")
    root = tmp_path / "workspace" / "default"
    names = [f"notes{i}.txt" for i in range(6)]
    llm.enqueue(calls(("list_dir", {"path": "."})),
                *[calls(("read_file", {"path": n})) for n in names],
                say("Six notes: alpha beta gamma delta epsilon zeta."))
    async with Agent(tools=files) as agent:
        # The workspace of the default user is made on first use; fill it like a user would.
        root.mkdir(parents=True)
        for i, (n, word) in enumerate(zip(names, ["alpha", "beta", "gamma", "delta",
                                                  "epsilon", "zeta"], strict=True)):
            (root / n).write_text(f"note {i}: {word}\n")
        result = await agent.run("Read each of my notes files and tell me the word in each.")
    assert result.status == "completed", result.error
    read = [unwrap(s.results[0].content) for s in result.steps[1:7]]
    assert all(f"note {i}:" in r for i, r in enumerate(read)), read
    assert len(llm.requests) == 8


async def test_identical_repeat_ends_completed_with_the_answer(llm: OpenAIServer) -> None:
    from thinkloop.tools.defaults import default_tools

    calc = default_tools("calculator")
    llm.enqueue(calls(("calculator", {"expression": "12*7"})),
                calls(("calculator", {"expression": "12*7"})),
                say("12*7 = 84"))
    async with Agent(tools=calc) as agent:
        result = await agent.run("What is 12*7? Use the calculator.")
    assert result.status == "completed", result.error
    assert result.text == "12*7 = 84"
    assert len(llm.requests) == 3
    # The repeat was answered from the first result and the third request offered no tools.
    assert [tool_names(r) for r in llm.requests] == [["calculator"], ["calculator"], []]
    assert result.steps[1].results[0].content.startswith("84\n\n[Note: you already made")


async def test_a_malformed_call_then_recovery(llm: OpenAIServer) -> None:
    broken = {"id": "chatcmpl-x", "object": "chat.completion", "model": "competent",
              "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                  "role": "assistant", "content": None, "tool_calls": [{
                      "id": "call_bad", "type": "function",
                      "function": {"name": "add", "arguments": '{"a": 1, "b": '}}]}}],
              "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}
    from thinkloop.testing.openai_server import Reply

    llm.enqueue(Reply(body=broken), calls(("add", {"a": 1, "b": 2})), say("1 + 2 = 3"))
    async with Agent(tools=[add]) as agent:
        result = await agent.run("Use the add tool to add 1 and 2.")
    assert result.status == "completed", result.error
    assert result.steps[0].results[0].is_error
    assert result.steps[1].results[0].content == "3"
    assert result.text == "1 + 2 = 3"
