"""Optional semantic injection detector: nearest labelled examples in embedding space.

Regexes catch known phrasings; paraphrases slip through. This detector embeds the message
(in windows of ``window`` words, so long documents are covered) and compares each window with
labelled attack and ordinary examples. A window is flagged when its nearest attack example is
at least ``threshold`` similar and closer than the nearest ordinary one by ``margin``.

Any :class:`Embedder` works; the local all-MiniLM-L6-v2 (``thinkloop.models.embedding.
MiniLMEmbedder``, extra ``recall``) runs on the CPU with nothing downloaded. The shipped
examples (``guard/data/exemplars.jsonl``) are the corpus's ``dev`` and ``holdout`` splits; the
defaults (threshold 0.45, margin 0.05) were chosen on ``holdout`` and measured on ``holdout2``
(``benchmarks/guard.py --semantic``): more recall than the patterns, more false positives too,
so it suits ``warn`` mode better than ``block``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

from thinkloop.guard.patterns import Severity
from thinkloop.guard.scan import Finding
from thinkloop.models.embedding import Embedder


def shipped_exemplars() -> tuple[list[str], list[str]]:
    """(attacks, ordinary requests) shipped with thinkloop."""
    text = resources.files("thinkloop.guard").joinpath("data/exemplars.jsonl").read_text("utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return ([r["text"] for r in rows if r["label"] == "attack"],
            [r["text"] for r in rows if r["label"] == "benign"])


def windows(text: str, size: int) -> list[tuple[str, tuple[int, int]]]:
    """Overlapping word windows with their character spans (half a window of overlap)."""
    words: list[tuple[int, int]] = []
    start = None
    for i, ch in enumerate(text + " "):
        if ch.isspace():
            if start is not None:
                words.append((start, i))
                start = None
        elif start is None:
            start = i
    if len(words) <= size:
        return [(text, (0, len(text)))] if text.strip() else []
    step = max(1, size // 2)
    out = []
    for first in range(0, len(words) - size // 2, step):
        span = (words[first][0], words[min(first + size, len(words)) - 1][1])
        out.append((text[span[0]:span[1]], span))
    return out


class SemanticDetector:
    def __init__(
        self, embedder: Embedder, attacks: Sequence[str] | None = None,
        benign: Sequence[str] | None = None, *, threshold: float = 0.45, margin: float = 0.05,
        window: int = 48,
    ) -> None:
        if attacks is None or benign is None:
            shipped_attacks, shipped_benign = shipped_exemplars()
            attacks = shipped_attacks if attacks is None else attacks
            benign = shipped_benign if benign is None else benign
        self.embedder = embedder
        self.attacks, self.benign = list(attacks), list(benign)
        self.threshold, self.margin, self.window = threshold, margin, window
        self._matrices: tuple[Any, Any] | None = None

    def _examples(self) -> tuple[Any, Any]:
        if self._matrices is None:
            import numpy as np

            vectors = np.asarray(self.embedder.embed([*self.attacks, *self.benign]))
            self._matrices = (vectors[: len(self.attacks)], vectors[len(self.attacks):])
        return self._matrices

    def scores(self, texts: Sequence[str]) -> list[tuple[float, float]]:
        """(nearest attack similarity, nearest ordinary similarity) per text."""
        import numpy as np

        if not texts:
            return []
        attacks, benign = self._examples()
        vectors = np.asarray(self.embedder.embed(list(texts)))
        a = (vectors @ attacks.T).max(axis=1)
        b = (vectors @ benign.T).max(axis=1) if len(benign) else np.zeros(len(texts))
        return [(float(x), float(y)) for x, y in zip(a, b, strict=True)]

    def scan(self, text: str) -> list[Finding]:
        """A ``semantic`` finding for each window that reads like a known attack (blocking)."""
        parts = windows(text, self.window)
        found: list[Finding] = []
        for (_, span), (att, ben) in zip(parts, self.scores([p for p, _ in parts]), strict=True):
            if att < self.threshold or att - ben < self.margin:
                continue
            severity: Severity = "high" if att >= self.threshold + 0.15 else "medium"
            if found and found[-1].span[1] >= span[0]:  # overlapping windows: one finding
                last = found.pop()
                span = (last.span[0], span[1])
                severity = "high" if "high" in (last.severity, severity) else severity
            found.append(Finding("semantic_similarity", span, severity, "semantic", "semantic",
                                 f"nearest attack example {att:.2f} similar"))
        return found
