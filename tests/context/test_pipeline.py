"""The history pipeline on crafted histories: exact messages in, exact messages out."""

from __future__ import annotations

from thinkloop.context.pipeline import (
    CLEARED_RESULT,
    ContextSettings,
    limit_turns,
    prune_context,
    run_pipeline,
    sanitize_tool_pairs,
    settings_for,
)
from thinkloop.context.run_compaction import compact_steps
from thinkloop.context.tokens import context_window, estimate_tokens, heuristic_count
from thinkloop.models.sanitize import MISSING_RESULT
from thinkloop.types import Message, ToolCall

S = Message.system("sys")


def call_turn(i: int, result: str, name: str = "fetch") -> list[Message]:
    c = ToolCall(f"c{i}", name, {"i": i})
    return [Message.assistant("", (c,)), Message.tool(c.id, name, result)]


def test_limit_turns_keeps_system_and_the_last_n_user_turns() -> None:
    msgs = [S, Message.user("u1"), Message.assistant("a1"), Message.user("u2"),
            *call_turn(2, "r2"), Message.assistant("a2"), Message.user("u3")]
    out = limit_turns(msgs, ContextSettings(history_turns=2))
    assert out == [S, Message.user("u2"), *call_turn(2, "r2"), Message.assistant("a2"),
                   Message.user("u3")]
    assert limit_turns(msgs, ContextSettings(history_turns=5)) is msgs
    assert limit_turns(msgs, ContextSettings()) is msgs


def _big_history(result_chars: int, steps: int) -> list[Message]:
    msgs = [S, Message.user("first"), *call_turn(0, "F" * result_chars)]
    for i in range(1, steps):
        msgs += call_turn(i, chr(ord("a") + i) * result_chars)
    return [*msgs, Message.assistant("done")]


def test_no_pruning_below_the_soft_ratio() -> None:
    msgs = _big_history(5000, 6)
    window = estimate_tokens(msgs) * 4  # ratio 0.25
    assert prune_context(msgs, ContextSettings(context_window=window)) is msgs


def test_soft_trim_keeps_head_and_tail_outside_the_protected_zone() -> None:
    msgs = _big_history(5000, 6)
    window = int(estimate_tokens(msgs) / 0.4)  # ratio 0.4: soft trim only
    out = prune_context(msgs, ContextSettings(context_window=window))
    # Tool results sit at 3, 5, 7, 9, 11, 13; the last 3 assistants are at 10, 12, 14.
    for i in (3, 5, 7, 9):
        text = msgs[i].content
        assert out[i].content == (
            text[:1500] + "\n...\n[Tool result trimmed: kept the first 1500 and last 1500 of "
            "5000 chars]\n...\n" + text[-1500:]
        )
        assert out[i].tool_call_id == msgs[i].tool_call_id
    for i in (0, 1, 2, 4, 6, 8, 10, 11, 12, 13, 14):
        assert out[i] is msgs[i]


def test_hard_clear_goes_oldest_first_until_under_half() -> None:
    msgs = _big_history(3000, 30)  # 90k chars in results too small to soft-trim
    window = int(estimate_tokens(msgs) / 0.9)
    out = prune_context(msgs, ContextSettings(context_window=window))
    assert estimate_tokens(out) / window < 0.5
    tools = [i for i, m in enumerate(msgs) if m.role == "tool"]
    prunable, protected = tools[:-2], tools[-2:]
    cleared = [i for i in prunable if out[i].content == CLEARED_RESULT]
    assert cleared == prunable[: len(cleared)] and cleared  # a prefix: the oldest ones
    assert all(out[i] is msgs[i] for i in protected)
    # Hard clearing stops as soon as the ratio is under 0.5: one fewer would not be.
    undo = list(out)
    undo[cleared[-1]] = msgs[cleared[-1]]
    assert estimate_tokens(undo) / window >= 0.5


def test_hard_clear_needs_enough_prunable_text() -> None:
    msgs = _big_history(5000, 6)
    window = int(estimate_tokens(msgs) / 0.9)
    out = prune_context(msgs, ContextSettings(context_window=window))
    assert CLEARED_RESULT not in [m.content for m in out]
    loose = prune_context(msgs, ContextSettings(context_window=window, min_prunable_tool_chars=0))
    assert CLEARED_RESULT in [m.content for m in loose]


def test_fewer_assistants_than_the_protected_count_prunes_nothing() -> None:
    msgs = [S, Message.user("u"), *call_turn(1, "x" * 100_000), Message.assistant("ok")]
    assert prune_context(msgs, ContextSettings(context_window=100)) == msgs


def test_sanitize_repairs_every_kind_of_broken_pair() -> None:
    c1, c2 = ToolCall("c1", "a", {}), ToolCall("c2", "b", {})
    msgs = [
        S,
        Message.tool("gone", "a", "orphan at the start"),
        Message.user("u"),
        Message.assistant("", (c1, c2)),
        Message.tool("c2", "b", "r2"),
        Message.tool("zz", "x", "mismatched"),
        Message.tool("c2", "b", "duplicate"),
        Message.user("interrupting"),
        Message.tool("c1", "a", "too late"),
        Message.assistant("end"),
    ]
    assert sanitize_tool_pairs(msgs, ContextSettings()) == [
        S,
        Message.user("u"),
        Message.assistant("", (c1, c2)),
        Message.tool("c2", "b", "r2"),
        Message.tool("c1", "a", MISSING_RESULT),
        Message.user("interrupting"),
        Message.assistant("end"),
    ]


def test_sanitize_leaves_a_good_history_alone() -> None:
    msgs = [S, Message.user("u"), *call_turn(1, "r"), Message.assistant("a")]
    assert sanitize_tool_pairs(msgs, ContextSettings()) == msgs


def _run_with_steps(n: int) -> list[Message]:
    msgs = [S, Message.user("old"), Message.assistant("old answer"), Message.user("task")]
    names = ["search", "browse"]
    for i in range(1, n + 1):
        result = "Error: 404" if i == 5 else f"result {i}"
        msgs += call_turn(i, result, names[i % 2])
    return msgs


def test_step_compaction_tallies_the_middle_steps() -> None:
    msgs = _run_with_steps(12)
    out = compact_steps(msgs, ContextSettings())
    tally = Message.user(
        "--- [8 middle steps compacted] ---\n"
        "... browse x4 (3 ok, 1 err)\n"  # steps 3-10: browse first, step 5 failed
        "... search x4 (4 ok, 0 err)\n"
        "--- [recent steps below] ---"
    )
    assert out == [*msgs[:4], *msgs[4:8], tally, *msgs[-4:]]
    # Applied again on its own output (a later step), the tally is not mistaken for the task.
    again = compact_steps([*out, *call_turn(13, "r13")], ContextSettings())
    assert again == [*out, *call_turn(13, "r13")]


def test_ten_steps_are_not_compacted() -> None:
    msgs = _run_with_steps(10)
    assert compact_steps(msgs, ContextSettings()) is msgs


def test_run_pipeline_in_order_leaves_its_input_alone() -> None:
    c = ToolCall("c9", "t", {})
    msgs = [S, Message.user("u1"), Message.assistant("", (c,)), Message.user("u2")]
    expected = [S, Message.user("u1"), Message.assistant("", (c,)),
                Message.tool("c9", "t", MISSING_RESULT), Message.user("u2")]
    assert run_pipeline(msgs, ContextSettings()) == expected
    assert msgs[3] == Message.user("u2")  # the input list is not touched


def test_pruned_messages_do_not_keep_a_stale_wire_cache() -> None:
    msgs = _big_history(5000, 6)
    msgs[3].cache["openai"] = {"stale": True}
    out = prune_context(msgs, ContextSettings(context_window=int(estimate_tokens(msgs) / 0.4)))
    assert "openai" not in out[3].cache and msgs[3].cache["openai"] == {"stale": True}


def test_token_heuristic_and_window_table() -> None:
    assert heuristic_count("") == 0
    assert heuristic_count("abcd" * 100) == 100
    assert heuristic_count("日本語") == 3  # 9 bytes
    assert context_window("openai:gpt-4o-mini") == 128_000
    assert context_window("ollama:llama3.1:8b") == 131_072
    assert context_window("mystery") == 32_768
    assert context_window("mystery", {"myst": 1000}) == 1000
    assert settings_for("gpt-4", history_turns=3) == ContextSettings(8192, history_turns=3)


def test_keep_recent_bounds_the_history_before_the_run() -> None:
    from thinkloop.context.pipeline import keep_recent

    history = [m for i in range(10) for m in (Message.user(f"u{i}"), Message.assistant(f"a{i}"))]
    run = [Message.user("task"), *call_turn(1, "r1")]
    msgs = [S, *history, *run]
    out = keep_recent(msgs, ContextSettings(recent_messages=3))
    assert out == [S, Message.assistant("a8"), Message.user("u9"), Message.assistant("a9"), *run]
    assert keep_recent(msgs, ContextSettings(recent_messages=20)) is msgs
    # A cut through a tool pair is repaired by the sanitize stage that runs after it.
    msgs = [S, Message.user("u"), *call_turn(7, "r7"), Message.assistant("a"), *run]
    out = run_pipeline(msgs, ContextSettings(recent_messages=2))
    assert out == [S, Message.assistant("a"), *run]


def test_consistent_histories_pass_through_without_copies() -> None:
    calls = (ToolCall("a", "t", {}), ToolCall("b", "t", {}))
    ok = [Message.system("s"), Message.user("u"), Message.assistant("", calls),
          Message.tool("a", "t", "1"), Message.tool("b", "t", "2"), Message.assistant("done")]
    settings = ContextSettings(8192)
    assert sanitize_tool_pairs(ok, settings) is ok
    assert compact_steps(ok, settings) is ok
    swapped = [*ok[:3], ok[4], ok[3], ok[5]]  # results out of order are still answered once
    assert sanitize_tool_pairs(swapped, settings) == swapped
