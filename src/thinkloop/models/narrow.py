"""Narrower decision grammars for a small model: arguments the task already spells out.

A small model copies badly: it drops the parentheses of ``(17+25)*3``, sends a prompt's
example instead of ``sqrt(81)``, writes ``todos.txt`` for ``todo.txt`` and lists
``workspace_dir.json``. Where the task itself names the value an argument should hold, the
grammar offers those values only; where it names none, the argument stays free. Nothing
here knows a task or its answer: the rules read any text the same way.

- ``path`` of the file tools: one of the file names the task (or a tool result since it)
  names; a directory listing or a search takes the workspace root, ``.``, a directory the
  task names ("the src folder", "docs/") or a named file.
- ``expression`` of the calculator, until it has been called in this turn: one of the
  arithmetic expressions written out in the task (``12*7``, ``sqrt(81)``) or the everyday
  phrases the calculator reads ("15% of 240", "7 squared", "2.5 km to m": ``arithmetic``).
- ``content`` of ``write_file``: the text the task gives to write, where it marks it out
  (quoted, "the word X", "containing: X", or a bare "write X to FILE" whose X is no "the
  result" or "a poem"); a task that leaves it to the model ("write a haiku") holds nothing.

A task that spells out an argument gets a tool call first (``must_call``): a 135M model
asked "What is 7 squared?" with the calculator offered answers from its own head otherwise.
A task of steps ("X, then Y") gets a call for each step before an answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from thinkloop.arithmetic import phrases_in
from thinkloop.core.types import Message, ToolSpec
from thinkloop.models.recap import task_index, task_text
from thinkloop.spotlight import content_of

# A file name with an extension that starts with a letter ("notes.txt", "src/app.py"; not
# "0.15" or "2.5"), or a relative path with a slash. Every repetition is bounded, so a hostile
# task ("a.a.a.a...", "((((1.1.1...") costs linear time, never a backtracking blow-up.
_FILE = re.compile(r"(?<![\w/.-])((?:[\w-]{1,64}/){0,16}[\w-][\w.-]{0,128}"
                   r"\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/-])")
_NUMBER = r"\d{1,30}(?:\.\d{1,30})?"
_FUNCS = r"(?:sqrt|abs|round|min|max|log|exp|sin|cos|tan)"
# An operand: a number, a call of a known function on an expression, or a bracketed one
# (one level of nesting is enough for what people type in a sentence). Inside brackets each
# character is read one way only (a class, no overlapping alternatives), at most 120 of them.
_INNER = rf"(?:[0-9.+\-*/(), ]|{_FUNCS}){{1,120}}"
_OPERAND = rf"(?:{_NUMBER}|{_FUNCS}\s{{0,3}}\({_INNER}\)|\({_INNER}\))"
_EXPRESSION = re.compile(
    rf"(?<![\w.])(?:{_OPERAND}(?:\s{{0,3}}(?:\*\*|//|[-+*/])\s{{0,3}}{_OPERAND}){{1,40}}"
    rf"|{_FUNCS}\s{{0,3}}\({_INNER}\))"
    r"(?!\w|\.\d)")
# A directory named in words: "the src folder", "directory docs/", "in build/".
_DIR = re.compile(r"(?<![\w.-])([\w.-]{1,64})/?\s{1,3}(?:folder|directory|dir)\b|"
                  r"\b(?:folder|directory|dir)\s{1,3}([\w.-]{1,64}/?)|"
                  r"(?<![\w/.-])([\w.-]{1,64}/)(?!\w)", re.IGNORECASE)
# Words before "directory" that name the workspace itself (or nothing), not a directory.
_NOT_DIRS = frozenset({"the", "this", "that", "a", "my", "your", "our", "current", "working",
                       "workspace", "root", "home", "same", "whole", "entire", "its", "each",
                       "list", "show", "open", "read", "print", "see", "in", "of", "new"})
FILE_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_dir", "grep"})
# Tools whose path may be a directory: the workspace root is always one of its values.
ROOT_TOOLS = frozenset({"list_dir", "grep"})


def narrow(tools: Sequence[ToolSpec], messages: Sequence[Message]) -> list[ToolSpec]:
    """``tools`` with the arguments the current task spells out held to those values."""
    start = task_index(messages)
    if start is None:
        return list(tools)
    task = task_text(messages[start])
    since = messages[start + 1:]
    results = "\n".join(m.content for m in since if m.role == "tool")
    files = _unique(f for f in _FILE.findall(task) + _FILE.findall(results) if _named(f))
    called = {c.name for m in since for c in m.tool_calls}
    expressions = _unique([*expressions_in(task), *phrases_in(task)])
    contents = contents_in(task)
    out = []
    for t in tools:
        props = t.parameters.get("properties") or {}
        if t.name in ROOT_TOOLS and _is_string(props.get("path")):
            t = _held(t, "path", _unique([".", *_dirs(task), *files]))
        elif t.name in FILE_TOOLS and _is_string(props.get("path")) and files:
            t = _held(t, "path", files)
        elif (t.name == "calculator" and "calculator" not in called and expressions
              and _is_string(props.get("expression"))):
            t = _held(t, "expression", expressions)
        if t.name == "write_file" and contents and _is_string(props.get("content")):
            t = _held(t, "content", contents)
        out.append(t)
    return out


# Words that make "write X to FILE" leave X to the model: "the result", "a haiku", "it".
_LEFT_OPEN = frozenset({"a", "an", "the", "some", "my", "your", "our", "their", "his", "her",
                        "its", "this", "that", "these", "those", "it", "them", "what",
                        "everything", "something", "anything", "all", "each", "any", "every"})
_QUOTED = re.compile(r"(?<!\w)[\"“'‘]([^\"“”'‘’\n]{1,200})[\"”'’](?!\w)")
_MARKED = re.compile(r"\b(?:containing|contains|saying|that\s{1,3}says|with\s{1,3}the\s{1,3}"
                     r"(?:text|content|contents|words?))\s{0,3}:?\s{1,3}([^\n]{1,200}?)\s*$",
                     re.IGNORECASE)
_WRITE = re.compile(r"\b(?:write|put|save|store|append)\s{1,3}(?:the\s{1,3}(word|text|line|"
                    r"number|string|phrase|words)\s{1,3})?([^\n]{1,80}?)\s{1,3}(?:to|in|into)"
                    r"\s{1,3}(?:the\s{1,3}|a\s{1,3})?(?:new\s{1,3})?(?:file\s{1,3})?"
                    r"(?:named\s{1,3}|called\s{1,3})?" + _FILE.pattern, re.IGNORECASE)


def contents_in(task: str) -> list[str]:
    """The text ``task`` gives to write into a file, where it marks it out (see above)."""
    found = [m.group(1) for m in _QUOTED.finditer(task)]
    for sentence in re.split(r"(?<=[.!?])\s+|\n", task):
        found += [m.group(1).rstrip(".!").strip() for m in _MARKED.finditer(sentence)]
    for m in _WRITE.finditer(task):
        text = m.group(2).strip().strip("\"“”'‘’")
        first = text.split(" ", 1)[0].lower()
        if text and (m.group(1) or first not in _LEFT_OPEN):
            found.append(text)
    return _unique(f.strip() for f in found)


# "X, then Y", "X and then Y", "X. After that, Y": each names one more step.
_THEN = re.compile(r"\b(?:then|afterwards|after\s{1,3}that)\b", re.IGNORECASE)


def steps_left(messages: Sequence[Message]) -> int:
    """How many of the steps the user's task names have no successful call yet in this turn."""
    start = task_index(messages)
    if start is None:
        return 0
    steps = 1 + len(_THEN.findall(task_text(messages[start])))
    # A failed call took no step (a small model reads a file before writing it, and fails).
    done = sum(1 for m in messages[start + 1:]
               if m.role == "tool" and not _failed(m.content))
    return max(steps - done, 0)


def step_pending(messages: Sequence[Message]) -> bool:
    """Calls were made for the user's task and it names a step none has taken yet."""
    start = task_index(messages)
    return (start is not None and any(m.tool_calls for m in messages[start + 1:])
            and steps_left(messages) > 0)


def steps_done(messages: Sequence[Message]) -> bool:
    """Every step the user's task names has a successful call in this turn: a small model
    then answers (measured: it otherwise makes a second call, often a copy of a prompt's
    example, and answers with its result)."""
    start = task_index(messages)
    return (start is not None and any(m.role == "tool" for m in messages[start + 1:])
            and steps_left(messages) == 0)


def must_call(tools: Sequence[ToolSpec], messages: Sequence[Message]) -> bool:
    """Whether the next decision must be a tool call: nothing was called yet in this turn
    and the task spells out an argument of an offered tool (``narrow`` holds it), or the
    task names more steps than calls were made (a call before an answer for each)."""
    start = task_index(messages)
    if start is None or not tools:
        return False
    since = messages[start + 1:]
    if any(m.tool_calls for m in since):
        return step_pending(messages) and not _failed_last(since)
    task = task_text(messages[start])
    names = {t.name for t in tools}
    spelled = ((names & FILE_TOOLS and _unique(f for f in _FILE.findall(task) if _named(f)))
               or ("calculator" in names and expressions_in(task) + phrases_in(task))
               or ("write_file" in names and contents_in(task)))
    return bool(spelled) or steps_left(messages) > 1


def _failed_last(since: Sequence[Message]) -> bool:
    """The newest tool result is an error: the model may then answer (say what went wrong)."""
    results = [m for m in since if m.role == "tool"]
    return bool(results) and _failed(results[-1].content)


def _failed(content: str) -> bool:
    """A tool's error, also inside the spotlight markup of outside content."""
    inside = content_of(content)
    return (content if inside is None else inside).startswith("Error")


def expressions_in(text: str) -> list[str]:
    """The arithmetic expressions written out in ``text``, in order."""
    return _unique(e.strip() for e in _EXPRESSION.findall(text))


def _dirs(text: str) -> list[str]:
    found = (next(g for g in m.groups() if g) for m in _DIR.finditer(text))
    return [d for d in found if d.rstrip("/").lower() not in _NOT_DIRS]


def _named(found: str) -> bool:
    """Not an abbreviation such as "e.g" or "i.e"."""
    stem, _, ext = found.rpartition(".")
    return len(stem) > 1 or len(ext) > 1


def _is_string(schema: Any) -> bool:
    return (isinstance(schema, dict) and schema.get("type") == "string"
            and "enum" not in schema and "const" not in schema)


def _held(tool: ToolSpec, name: str, values: list[str]) -> ToolSpec:
    params = dict(tool.parameters)
    props = dict(params.get("properties") or {})
    props[name] = {**props[name], "enum": values}
    params["properties"] = props
    return replace(tool, parameters=params)


def _unique(items: Any) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))
