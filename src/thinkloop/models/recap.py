"""Earlier turns of a session as a recap a small model can read.

A 135M model does not follow a chat: asked "What is my name?" after "My name is Ada." it
answers with a name of its own, and its own rambling replies of the earlier turns lead it
further off (0 of 2 recall tasks, measured). Quoted into the question, what the person said
earlier is text it copies from ("Earlier the user said: "My name is Ada." ... What is my
name?" -> "Your name is Ada."). So for a small model the earlier turns become one recap in
front of the task: the person's own words, newest last, each cut to a bounded length; the
model's past replies and tool traffic are left out (their content is not recalled).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from thinkloop.core.types import Message

RECAP_HEAD = "Earlier the user said:\n"
RECAP_TURNS = 6
RECAP_CHARS = 300


def task_index(messages: Sequence[Message]) -> int | None:
    """The user's newest message (not one the loop wrote, such as a nudge)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "user" and not m.from_loop:
            return i
    return None


def recap(messages: Sequence[Message], task: str) -> list[Message]:
    """``messages`` with the turns before the user message ``task`` folded into a recap of
    what the person said, in front of the task's own text (unchanged when there are no
    earlier turns, or no such message: a nudge the loop adds is no task)."""
    start = next((i for i in range(len(messages) - 1, -1, -1)
                  if messages[i].role == "user" and messages[i].content == task), None)
    if start is None:
        return list(messages)
    head = [m for m in messages[:start] if m.role == "system"]
    said = [" ".join(m.content.split()) for m in messages[:start]
            if m.role == "user" and not m.from_loop and m.content.strip()]
    if not said:
        return list(messages)
    quoted = "\n".join(f'"{s[:RECAP_CHARS]}"' for s in said[-RECAP_TURNS:])
    asked = messages[start]
    text = f"{RECAP_HEAD}{quoted}\n\n{asked.content}"
    return [*head, replace(asked, content=text), *messages[start + 1:]]


def task_text(message: Message) -> str:
    """The task's own words, without a recap in front (the quoted statements have their
    whitespace folded, so the recap ends at its first blank line)."""
    if message.content.startswith(RECAP_HEAD):
        return message.content.split("\n\n", 1)[-1]
    return message.content
