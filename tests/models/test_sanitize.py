from thinkloop.models.sanitize import (
    MISSING_RESULT,
    merge_consecutive,
    repair_tool_pairs,
    trim_history,
)
from thinkloop.types import Message, ToolCall

SYS = Message.system("sys")
TASK = Message.user("task")


def _call(i: int) -> ToolCall:
    return ToolCall(f"c{i}", "echo", {"i": i})


def _turn(i: int) -> list[Message]:
    return [Message.assistant("", (_call(i),)), Message.tool(f"c{i}", "echo", f"r{i}")]


def test_valid_history_is_returned_as_the_same_object() -> None:
    history = [SYS, TASK, *_turn(1), Message.assistant("done")]
    assert repair_tool_pairs(history) is history


def test_orphan_result_is_dropped_and_missing_result_is_synthesized() -> None:
    orphan = Message.tool("gone", "echo", "stale")
    unanswered = Message.assistant("", (_call(2), _call(3)))
    history = [SYS, orphan, TASK, unanswered, Message.tool("c3", "echo", "r3"), Message.user("?")]
    assert repair_tool_pairs(history) == [
        SYS,
        TASK,
        unanswered,
        Message.tool("c3", "echo", "r3"),
        Message.tool("c2", "echo", MISSING_RESULT),
        Message.user("?"),
    ]


def test_call_at_the_end_without_result_gets_a_placeholder() -> None:
    history = [TASK, Message.assistant("", (_call(1),))]
    assert repair_tool_pairs(history)[-1] == Message.tool("c1", "echo", MISSING_RESULT)


def test_duplicate_result_for_one_call_is_dropped() -> None:
    history = [TASK, *_turn(1), Message.tool("c1", "echo", "again")]
    assert repair_tool_pairs(history) == [TASK, *_turn(1)]


def test_merge_consecutive_joins_same_roles_and_keeps_tool_calls() -> None:
    call = _call(1)
    history = [SYS, Message.system("more"), Message.user("a"), Message.user("b"),
               Message.assistant("thinking aloud"), Message.assistant("", (call,)),
               Message.tool("c1", "echo", "r")]
    assert merge_consecutive(history) == [
        Message.system("sys\n\nmore"),
        Message.user("a\n\nb"),
        Message.assistant("thinking aloud", (call,)),
        Message.tool("c1", "echo", "r"),
    ]
    alternating = [SYS, TASK, Message.assistant("x")]
    assert merge_consecutive(alternating) is alternating


def test_trim_keeps_system_first_user_and_last_ten_with_pairs_repaired() -> None:
    history = [SYS, TASK]
    for i in range(10):
        history += _turn(i)
    trimmed = trim_history(history)
    assert trimmed is not None
    # The last 10 are turns 5..9; the cut falls on an assistant, so no orphan result leads.
    assert trimmed == [SYS, TASK, *[m for i in range(5, 10) for m in _turn(i)]]
    # An odd cut would start on a tool result, which is dropped rather than sent orphaned.
    odd = trim_history([*history, Message.user("more")])
    assert odd == [SYS, TASK, *[m for i in range(6, 10) for m in _turn(i)], Message.user("more")]


def test_trim_returns_none_when_nothing_can_be_cut() -> None:
    assert trim_history([SYS, TASK, *_turn(1)]) is None
