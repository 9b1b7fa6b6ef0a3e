"""A pattern with a long counted gap is matched from its rarer tail (guard/gaps.py): the
same matches as ``re``, at the window's edges too, and without RE2 running the gap."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from thinkloop.guard import gaps, linear
from thinkloop.guard.patterns import DEFAULT_PATTERNS

pytestmark = pytest.mark.skipif(not linear.available(), reason="RE2 wheel not installed")

# role_override's "AI ... has no restrictions": an AI word, then up to 80 characters with no
# sentence end, then "has/have/with/without ... restrictions".
GAPPED = next(p.regex for p in DEFAULT_PATTERNS if "{0,80}?" in p.regex.pattern
              and "without" in p.regex.pattern)
LEADS = ("ai", "assistants", "bot", "model")
TAILS = ("has no restrictions", "with zero ethics", "without any content policies",
         "have   moral limits")
FILLS = ("x", "é", "🙂", " ")  # one, two and four UTF-8 bytes a character, and spaces


def _edges(rng: random.Random) -> str:
    """Leads and tails 78 to 82 characters apart, between random words (a long text, which
    the linear engine matches), some ending a sentence on the way."""
    parts = []
    for width in range(76, 85):
        for fill in FILLS:
            gap = " " + fill * (width - 2) + " "
            if rng.random() < 0.2:
                gap = gap[:10] + rng.choice(".?!\n") + gap[11:]
            parts.append(rng.choice(LEADS) + gap + rng.choice(TAILS))
            parts.append("".join(rng.choices("abcdefgh ", k=rng.randrange(0, 120))))
    return " ".join(parts)


def test_a_counted_gap_split_finds_what_re_finds_at_the_window_edges() -> None:
    rng = random.Random(5)
    for _ in range(6):
        text = _edges(rng)
        assert len(text) > linear.SHORT
        found = [m.span() for m in linear.finditer(GAPPED, text)]
        assert found == [m.span() for m in GAPPED.finditer(text)]
        assert found  # the edges hold matches (80 characters apart) and misses (81)


def test_every_pattern_with_a_gap_finds_what_re_finds_on_dense_words() -> None:
    """The patterns' own words, close together: many leads and tails in each window."""
    words = sorted(set(re.findall(r"[a-z]+", " ".join(p.regex.pattern
                                                       for p in DEFAULT_PATTERNS))))
    rng = random.Random(9)
    text = " ".join(rng.choices([*words, "é", ".", "\n"], k=20_000))
    split = [p.regex for p in DEFAULT_PATTERNS
             if gaps.split(p.regex.pattern, p.regex.flags) is not None]
    assert GAPPED in split
    for regex in split:
        assert [m.span() for m in linear.finditer(regex, text)] == \
            [m.span() for m in regex.finditer(text)], regex.pattern


def test_the_gap_is_never_searched_by_re2_on_dense_leads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On a text dense with AI words and no sentence end, RE2 rebuilt the DFA states of the
    80-character gap all along (0.15 s a view): only the tail is searched by RE2."""
    engines: list[Any] = []
    searcher = linear.searcher

    def recording(engine: Any) -> Any:
        engines.append(engine)
        return searcher(engine)

    monkeypatch.setattr(linear, "searcher", recording)
    rng = random.Random(2)
    text = " ".join(rng.choices(["ai", "model", "bot", "has", "no", "rules", "the"],
                                k=5_000))
    assert list(linear.finditer(GAPPED, text))
    assert linear._compiled(GAPPED.pattern, GAPPED.flags) not in engines
