"""Text embeddings for ``search_tools``: the :class:`Embedder` of ``models.embedding`` (one
local model serves memory recall and search_tools alike) and cosine similarity of its rows."""

from __future__ import annotations

from collections.abc import Sequence

from thinkloop.models.embedding import Embedder, MiniLMEmbedder

MINILM_NAME = MiniLMEmbedder.name
__all__ = ["MINILM_NAME", "Embedder", "MiniLMEmbedder", "cosine"]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine of two unit vectors (a dot product)."""
    return float(sum(x * y for x, y in zip(a, b, strict=True)))
