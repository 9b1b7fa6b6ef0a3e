"""The decision grammar of a small model holds the arguments the task spells out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from thinkloop.core.types import Message, ToolCall, ToolSpec
from thinkloop.models.decision import decision_schema
from thinkloop.models.narrow import expressions_in, narrow
from thinkloop.settings import load_settings
from thinkloop.tools.builtin import builtin_tools


def _specs(tmp_path: Path) -> list[ToolSpec]:
    settings = load_settings({"tools.workspace": tmp_path})
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
