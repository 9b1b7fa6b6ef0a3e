"""The typo view's key words (guard/typos.py): ruling words out in bulk finds the typos a
word-by-word check finds, and checks only the words that may be one."""

from __future__ import annotations

import random
import string

import pytest

from thinkloop.guard import typos
from thinkloop.guard.typos import KEYWORDS, _inflects, _osa


def one_by_one(word: str) -> str | None:
    """The check as it was, every key word for every word."""
    if word in KEYWORDS or any(_inflects(word, key) for key in KEYWORDS):
        return None
    limit = 2 if len(word) >= 8 else 1
    near = [(_osa(word, key, limit), key) for key in sorted(KEYWORDS) if key[0] in word[:2]]
    best = min(near, default=(limit + 1, ""))
    return best[1] if best[0] <= limit else None


def words(seed: int) -> set[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    for key in KEYWORDS:  # typos: letters changed, added, dropped or swapped; inflections
        out |= {key + s for s in ("s", "ed", "ing", "x")}
        for _ in range(150):
            w = list(key)
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(w))
                match rng.randint(0, 3):
                    case 0:
                        w[i] = rng.choice(string.ascii_lowercase)
                    case 1:
                        w.insert(i, rng.choice(string.ascii_lowercase))
                    case 2 if len(w) > 4:
                        del w[i]
                    case _ if i + 1 < len(w):
                        w[i], w[i + 1] = w[i + 1], w[i]
            out.add("".join(w))
    out |= {"".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 15)))
            for _ in range(20_000)}
    return {w for w in out if len(w) >= 4}


def test_bulk_ruling_out_finds_every_typo(monkeypatch: pytest.MonkeyPatch) -> None:
    sample = words(1)
    want = {w: k for w in sample if (k := one_by_one(w)) is not None}
    checked: list[str] = []
    keyword = typos._keyword

    def counting(word: str) -> str | None:
        checked.append(word)
        return keyword(word)

    monkeypatch.setattr(typos, "_keyword", counting)
    assert len(sample) > typos.BULK
    assert typos.typo_words(sample) == want and len(want) > 1_000
    # Random words are ruled out in bulk: the words checked one by one are few more than
    # the typos (and the key words' own forms).
    assert len(checked) < 2 * len(want) + 2_000, (len(checked), len(sample))
