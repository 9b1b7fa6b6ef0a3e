"""Prompt-injection detector on sentence vectors: all-MiniLM-L6-v2 and a small trained head.

The linear n-gram classifier (guard/classifier.py) knows words; paraphrased attacks ("drop
the current task at once and ...") share few of them with its training data. This detector
embeds the message with the local all-MiniLM-L6-v2 (the ``recall`` extra's model, CPU, nothing
downloaded) and scores the vector with a one-hidden-layer perceptron that
``benchmarks/data/train_injection_encoder.py`` trains on public labelled corpora and stores as
plain arrays (``guard/data/encoder_head.npz``, no pickle). Messages over ``WHOLE`` words are
scored in windows, as the other detectors do.

Loading torch and the model takes seconds, so nothing here loads on import or construction:
:meth:`EncoderDetector.warm` loads in a background thread and :meth:`scan` answers only once
the model is there (``wait=True`` makes it wait instead).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from thinkloop.guard.patterns import Severity
from thinkloop.guard.scan import Finding
from thinkloop.guard.semantic import windows
from thinkloop.guard.warmup import BackgroundLoad, LoadsInBackground
from thinkloop.models.embedding import Embedder, MiniLMEmbedder, recall_extra_installed

WHOLE = 48  # words: longer messages are scored in windows of this many (half overlapping)


@dataclass(frozen=True)
class Head:
    """``sigmoid(w2 . relu(W1 x + b1) + b2)``; no hidden layer when ``w1`` is empty."""

    w1: Any  # (hidden, dim) float32, or shape (0, dim)
    b1: Any
    w2: Any  # (hidden,) or (dim,) without a hidden layer
    b2: float
    threshold: float
    embedder: str  # the vector space it was trained in

    def scores(self, vectors: Any) -> Any:
        import numpy as np

        x = np.asarray(vectors, dtype=np.float32)
        if len(self.w1):
            x = np.maximum(x @ self.w1.T + self.b1, 0.0)
        z = x @ self.w2 + self.b2
        return 1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0)))

    def save(self, path: Path) -> None:
        import numpy as np

        np.savez_compressed(path, w1=np.asarray(self.w1, np.float32),
                            b1=np.asarray(self.b1, np.float32),
                            w2=np.asarray(self.w2, np.float32), b2=np.asarray([self.b2]),
                            threshold=np.asarray([self.threshold]),
                            embedder=np.asarray([self.embedder]))

    @staticmethod
    def load(path: Path | None = None) -> Head:
        """The head at ``path``, or the one shipped with thinkloop."""
        if path is None:
            return _shipped()
        import numpy as np

        with np.load(path, allow_pickle=False) as d:
            return Head(d["w1"], d["b1"], d["w2"], float(d["b2"][0]),
                        float(d["threshold"][0]), str(d["embedder"][0]))


@functools.lru_cache(maxsize=1)
def _shipped() -> Head:
    ref = resources.files("thinkloop.guard").joinpath("data/encoder_head.npz")
    with resources.as_file(ref) as path:
        return Head.load(path)


def available() -> bool:
    """Whether the model the shipped head needs is installed (extra ``recall``)."""
    return recall_extra_installed()


class EncoderDetector(LoadsInBackground):
    """Scores messages with ``head`` over ``embedder``'s vectors; thread-safe, lazy."""

    def __init__(self, embedder: Embedder | None = None, head: Head | None = None,
                 threshold: float | None = None) -> None:
        self.embedder: Embedder = embedder or MiniLMEmbedder()
        self._head = head
        self._threshold = threshold
        self._loader = BackgroundLoad(self._load, "thinkloop-encoder")

    @property
    def head(self) -> Head:
        if self._head is None:
            self._head = Head.load()
        return self._head

    @property
    def threshold(self) -> float:
        return self.head.threshold if self._threshold is None else self._threshold

    def _load(self) -> None:
        self.embedder.embed(["warm up"])
        _ = self.head

    def vectors(self, texts: Sequence[str], batch: int = 32) -> Any:
        import numpy as np

        parts = [np.asarray(self.embedder.embed(list(texts[i:i + batch])), dtype=np.float32)
                 for i in range(0, len(texts), batch)]
        return np.concatenate(parts) if parts else np.zeros((0, self.embedder.dim), np.float32)

    def scores(self, texts: Sequence[str]) -> list[float]:
        return [float(s) for s in self.head.scores(self.vectors(texts))] if texts else []

    def scan(self, text: str, *, wait: bool = False) -> list[Finding]:
        """An ``encoder`` finding per window scoring at or over the threshold.

        Until the model has loaded this returns nothing (and starts loading it), unless
        ``wait``: the first message of a process is not held up by a cold start.
        """
        if not self.ready:
            self.warm()
            if not wait or not self._loader.wait():
                return []
        parts = windows(text, WHOLE)
        bar = self.threshold
        found: list[Finding] = []
        for (_, span), score in zip(parts, self.scores([p for p, _ in parts]), strict=True):
            if score < bar:
                continue
            severity: Severity = "high" if score >= (1 + bar) / 2 else "medium"
            why = f"score {score:.2f} >= {bar:.2f}"
            if found and found[-1].span[1] >= span[0]:  # overlapping windows: one finding
                last = found.pop()
                span = (last.span[0], span[1])
                severity = "high" if "high" in (last.severity, severity) else severity
                why = last.why
            found.append(Finding("encoder", span, severity, "encoder", "encoder", why))
        return found


@functools.lru_cache(maxsize=1)
def shipped_detector() -> EncoderDetector:
    """One detector per process: every agent shares the loaded model (about 90 MB)."""
    return EncoderDetector()
