"""Fitting a request to the local model's context window: the middle of the longest turns is
cut, with a note where, and the characters left out are counted (the run tells the person:
``ModelResponse.cut_chars``, the ``model.input_cut`` event)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Room kept free in the window beside the reply when a request is cut to fit.
FIT_MARGIN_TOKENS = 48
FIT_NOTE = "\n[... {n} characters cut here to fit the model's {window}-token context ...]\n"
# A cut turn keeps its start and at most this much of its end (where a question after a long
# text usually is). Further cuts, as the history grows step by step, then come out of the
# start's far end: the start stays a prefix of the last request's, whose KV cache the runtime
# reuses, and only the short end and the newer turns are evaluated again (halves re-evaluated
# half the turn each step).
FIT_TAIL_CHARS = 1200


def fit_messages(llm: Any, turns: list[dict[str, str]], window: int,
                 reply_tokens: int) -> tuple[list[dict[str, str]], int]:
    """:func:`fit_turns` with the tokens counted by llama-cpp-python's tokenizer."""
    def size(text: str) -> int:
        return len(llm.tokenize(text.encode(), add_bos=False, special=False)) + 8

    return fit_turns(size, turns, window, reply_tokens)


def fit_turns(size: Callable[[str], int], turns: list[dict[str, str]], window: int,
              reply_tokens: int) -> tuple[list[dict[str, str]], int]:
    """Cut the middle of the longest turns until the prompt and the reply fit the window,
    with a note where text was cut (the system prompt and the last turn are cut last); a cut
    turn keeps its start and at most ``FIT_TAIL_CHARS`` of its end.
    Returns the turns and how many of their characters were left out (the run tells the
    person: ``ModelResponse.cut_chars``)."""
    budget = window - reply_tokens - FIT_MARGIN_TOKENS
    originals = [t["content"] for t in turns]
    kept = [len(text) for text in originals]
    sizes = [size(text) for text in originals]
    turns = list(turns)
    for _ in range(8):
        over = sum(sizes) - budget
        middle = [j for j in (range(1, len(turns) - 1) if len(turns) > 2 else range(len(turns)))
                  if kept[j] > 0]
        if over <= 0 or not middle:
            break
        i = max(middle, key=lambda j: sizes[j])
        # Characters per token in this turn, to cut about enough (then check again). Each cut
        # is made in the original text, so one note says how much of it is gone in all.
        now = len(turns[i]["content"])
        kept[i] -= min(kept[i], int((over + 16) * now / max(sizes[i], 1)) + 1)
        text, keep = originals[i], kept[i]
        ends = min(keep - keep // 2, FIT_TAIL_CHARS)
        head, tail = text[: keep - ends], text[len(text) - ends :] if ends else ""
        note = FIT_NOTE.format(n=len(text) - keep, window=window)
        turns[i] = {**turns[i], "content": head + note + tail}
        sizes[i] = size(turns[i]["content"])
    return turns, sum(len(text) - k for text, k in zip(originals, kept, strict=True))
