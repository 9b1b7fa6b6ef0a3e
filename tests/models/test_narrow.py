"""The decision grammar of a small model holds the arguments the task spells out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from thinkloop.core.types import Message, ToolCall, ToolSpec
from thinkloop.models.decision import decision_schema
from thinkloop.models.narrow import (
    contents_in,
    expressions_in,
    must_call,
    narrow,
    step_pending,
    steps_done,
    steps_left,
)
from thinkloop.settings import load_settings
from thinkloop.tools.builtin import builtin_tools


def _specs(tmp_path: Path) -> list[ToolSpec]:
    settings = load_settings({"tools.workspace": tmp_path / "ws"})  # beside the home
    return [t.spec for t in builtin_tools(settings.tools)]


def _arg(tools: list[ToolSpec], tool: str, name: str) -> dict[str, Any]:
    (spec,) = [t for t in tools if t.name == tool]
    schema: dict[str, Any] = spec.parameters["properties"][name]
    return schema


def test_paths_and_expressions_the_task_names_are_the_only_values(tmp_path: Path) -> None:
    tools = _specs(tmp_path)
    task = [Message.system("s"), Message.user("Calculate 6*7, then write the result to the "
                                              "file result.txt. Also (17+25)*3 and sqrt(81).")]
    held = narrow(tools, task)
    assert _arg(held, "write_file", "path")["enum"] == ["result.txt"]
    assert _arg(held, "read_file", "path")["enum"] == ["result.txt"]
    assert _arg(held, "list_dir", "path")["enum"] == [".", "result.txt"]
    assert _arg(held, "calculator", "expression")["enum"] == ["6*7", "(17+25)*3", "sqrt(81)"]
    assert "enum" not in _arg(held, "write_file", "content")
    # The grammar's schema carries them (it is what decoding is held to).
    schema = decision_schema(held)
    assert '"enum": ["6*7"' in str(schema).replace("'", '"')
    # The tools given are left as they were.
    assert "enum" not in _arg(tools, "calculator", "expression")


def test_what_the_task_does_not_spell_out_stays_free(tmp_path: Path) -> None:
    tools = _specs(tmp_path)
    held = narrow(tools, [Message.user("Multiply the two prices. Then list the workspace "
                                       "directory and write a haiku to poem.txt.")])
    assert "enum" not in _arg(held, "calculator", "expression")
    assert "enum" not in _arg(held, "write_file", "content")
    assert _arg(held, "list_dir", "path")["enum"] == [".", "poem.txt"]
    assert narrow(tools, []) == tools


def test_after_the_first_calculation_and_from_tool_results(tmp_path: Path) -> None:
    tools = _specs(tmp_path)
    call = ToolCall("c1", "calculator", {"expression": "6*7"})
    listing = ToolCall("c2", "list_dir", {"path": "."})
    turn = [Message.user("Calculate 6*7 and list the src folder."),
            Message.assistant("", (call, listing)),
            Message.tool("c1", "calculator", "42"),
            Message.tool("c2", "list_dir", "main.py (10 bytes)\nREADME.md (4 bytes)")]
    held = narrow(tools, turn)
    assert "enum" not in _arg(held, "calculator", "expression")  # the next one is free
    assert _arg(held, "read_file", "path")["enum"] == ["main.py", "README.md"]
    assert _arg(held, "list_dir", "path")["enum"] == [".", "src", "main.py", "README.md"]


def test_expressions_are_read_out_of_sentences() -> None:
    assert expressions_in("Calculate 17*3.") == ["17*3"]
    assert expressions_in("What is 2**10? Calculate it.") == ["2**10"]
    assert expressions_in("Calculate 0.15*200.") == ["0.15*200"]
    assert expressions_in("Divide 144 by 12, then 7 squared, 15% of 240") == []
    assert expressions_in("version 2.5 of e.g. notes") == []


def test_a_hostile_task_cannot_make_the_grammar_backtrack() -> None:
    # "(1.1.1.1..." once took 23 s at 18 repetitions (nested, overlapping repeats); every
    # repeat is bounded now. A liveness check, not a timing: the old patterns never finish.
    import subprocess
    import sys

    code = ("from thinkloop.models.narrow import expressions_in, _FILE, _dirs\n"
            "for s in ('(' + '1.1.' * 4000 + 'x', 'a.' * 8000, 'src/' * 4000 + 'a.txt',\n"
            "          '1.1 folder ' * 2000):\n"
            "    expressions_in(s); _FILE.findall(s); _dirs(s)\n"
            "print('done')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "done", done.stderr


def test_everyday_arithmetic_and_the_text_to_write_are_held(tmp_path: Path) -> None:
    tools = _specs(tmp_path)
    held = narrow(tools, [Message.user("What is the square root of 144, and 15% of 240?")])
    assert _arg(held, "calculator", "expression")["enum"] == ["the square root of 144",
                                                             "15% of 240"]
    held = narrow(tools, [Message.user("Write the word hello to the file greeting.txt.")])
    assert _arg(held, "write_file", "content")["enum"] == ["hello"]
    assert contents_in("Create a file named todo.txt containing: buy milk") == ["buy milk"]
    assert contents_in("Save 'hello world' in notes.md") == ["hello world"]
    assert contents_in("Write blue to sky.txt, then read it back.") == ["blue"]
    # What the task leaves to the model stays free.
    assert contents_in("Write a haiku to poem.txt") == []
    assert contents_in("Calculate 6*7, then write the result to result.txt.") == []
    assert contents_in("Don't write it to a.txt, it's fine") == []


def test_a_spelled_out_argument_or_a_further_step_asks_for_a_call(tmp_path: Path) -> None:
    tools = _specs(tmp_path)
    task = Message.user("What is 7 squared?")
    assert must_call(tools, [Message.system("s"), task])
    assert must_call(tools, [Message.user("cat fruit.txt")])
    assert not must_call(tools, [Message.user("What is the capital of France?")])
    assert not must_call([], [task])
    # Once called, the model may answer; a task of two steps gets a second call first.
    done = [task, Message.assistant("", (ToolCall("c1", "calculator", {"expression": "7**2"}),)),
            Message.tool("c1", "calculator", "49")]
    assert not must_call(tools, done) and not step_pending(done)
    steps = [Message.user("Read price.txt, then add 5 to the price."),
             Message.assistant("", (ToolCall("c1", "read_file", {"path": "price.txt"}),)),
             Message.tool("c1", "read_file", "20")]
    assert steps_left(steps) == 1 and step_pending(steps) and must_call(tools, steps)
    # A failed call lets the model say what went wrong instead.
    failed = [*steps[:2], Message.tool("c1", "read_file", "Error: no such file: price.txt")]
    assert not must_call(tools, failed)


def test_a_failed_call_takes_no_step(tmp_path: Path) -> None:
    from thinkloop.spotlight import spotlight

    tools = _specs(tmp_path)
    read = ToolCall("c1", "read_file", {"path": "sky.txt"})
    write = ToolCall("c2", "write_file", {"path": "sky.txt", "content": "blue"})
    turn = [Message.user("Write blue to the file sky.txt, then read it back."),
            Message.assistant("", (read,)),
            Message.tool("c1", "read_file", spotlight("Error: no such file: sky.txt",
                                                      "read_file", trailer=False)),
            Message.assistant("", (write,)), Message.tool("c2", "write_file", "wrote 4 bytes")]
    assert steps_left(turn) == 1 and must_call(tools, turn)


def test_every_step_done_means_an_answer_is_due() -> None:
    task = Message.user("Read price.txt, then add 5 to the price.")
    read = Message.assistant("", (ToolCall("c1", "read_file", {"path": "price.txt"}),))
    add = Message.assistant("", (ToolCall("c2", "calculator", {"expression": "20+5"}),))
    assert not steps_done([task])
    assert not steps_done([task, read, Message.tool("c1", "read_file", "20")])
    assert steps_done([task, read, Message.tool("c1", "read_file", "20"), add,
                       Message.tool("c2", "calculator", "25")])
