"""Fitting a request to the local model's window: what is cut, where, and how much is said."""

from __future__ import annotations

import re

from thinkloop.models.local_fit import FIT_MARGIN_TOKENS, fit_turns


def _size(text: str) -> int:
    return len(text) // 4 + 8  # four characters a token, as SmolLM2's tokenizer about counts


NOTE = re.compile(r"\n\[\.\.\. (\d+) characters cut here to fit the model's \d+-token "
                  r"context \.\.\.\]\n")


def test_a_request_that_fits_is_sent_whole_and_nothing_is_reported_cut() -> None:
    turns = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert fit_turns(_size, turns, 512, 64) == (turns, 0)


def test_the_cut_is_counted_in_characters_of_the_original_text() -> None:
    long = "START " + "".join(f"word{i} " for i in range(3000)) + " END"
    turns = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": long},
             {"role": "assistant", "content": "ok"}, {"role": "user", "content": "and?"}]
    fitted, cut = fit_turns(_size, turns, 512, 64)
    assert fitted[0] == turns[0] and fitted[2:] == turns[2:]
    text = fitted[1]["content"]
    notes = NOTE.findall(text)
    # One note, however many rounds the cut took, and it says what this turn lost in all.
    assert len(notes) == 1 and int(notes[0]) == cut
    head, tail = NOTE.split(text)[0], NOTE.split(text)[-1]
    assert long.startswith(head) and long.endswith(tail) and head.startswith("START")
    assert cut == len(long) - len(head) - len(tail) > 0
    assert sum(_size(t["content"]) for t in fitted) <= 512 - 64 - FIT_MARGIN_TOKENS


def test_cuts_in_several_turns_add_up() -> None:
    a, b = "a" * 6000, "b" * 4000
    turns = [{"role": "system", "content": "s"}, {"role": "user", "content": a},
             {"role": "assistant", "content": b}, {"role": "user", "content": "last"}]
    fitted, cut = fit_turns(_size, turns, 512, 64)
    lost = [int(n) for t in fitted for n in NOTE.findall(t["content"])]
    assert len(lost) == 2 and sum(lost) == cut
    kept = sum(len(NOTE.sub("", t["content"])) for t in fitted)
    assert cut == sum(len(t["content"]) for t in turns) - kept


def test_as_the_history_grows_the_cut_turn_keeps_its_start_as_a_prefix() -> None:
    """The runtime reuses the KV cache of the longest common prefix with the last request:
    a growing history must cut into the far end of the kept start, not move the cut."""
    from thinkloop.models.local_fit import FIT_TAIL_CHARS

    long = "".join(f"sentence {i} of the long text. " for i in range(3000))
    turns = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": long}]
    before: str | None = None
    for step in range(4):
        fitted, _ = fit_turns(_size, turns, 4096, 256)
        head, tail = NOTE.split(fitted[1]["content"])[::2]
        assert tail == long[-FIT_TAIL_CHARS:]  # the end kept is the same every step
        if before is not None:
            assert before.startswith(head) and len(head) < len(before)
        before = head
        turns += [{"role": "assistant", "content": f"step {step}: " + "thinking " * 60},
                  {"role": "user", "content": "go on"}]
