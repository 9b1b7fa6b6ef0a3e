"""Semantic recall over memories and past turns.

With the ``recall`` extra installed (sentence-transformers, torch and the packaged
all-MiniLM-L6-v2), texts are embedded locally and ranked by cosine similarity in numpy;
without it, BM25 (``bm25s``) ranks the same texts. Vectors are stored with the memory row
(float32 bytes). Both retrievers cache their index per owner and rebuild it only when the
owner's memories change.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from thinkloop.models.embedding import (
    Embedder,
    MiniLMEmbedder,
    is_loaded,
    recall_extra_installed,
)
from thinkloop.store.base import MemoryBackend, MemoryRecord

if TYPE_CHECKING:
    # numpy costs ~100 ms to import; it loads with the first embedding, not with thinkloop.
    import numpy as np

log = logging.getLogger("thinkloop.memory")


class Retriever(Protocol):
    async def search(self, owner: str, query: str, k: int) -> list[MemoryRecord]: ...

    async def refresh(self, owner: str) -> tuple[list[MemoryRecord], Any]:
        """Bring the owner's index up to date ahead of the next search."""
        ...


def default_embedder() -> Embedder | None:
    """The local MiniLM model when the ``recall`` extra is installed, else None (BM25)."""
    return MiniLMEmbedder() if recall_extra_installed() else None


def to_blob(vector: np.ndarray) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype=np.float32).tobytes()


async def embed_one(embedder: Embedder | None, text: str) -> bytes | None:
    if embedder is None:
        return None
    vectors = await asyncio.to_thread(embedder.embed, [text])
    return to_blob(vectors[0])


async def embed_unless(embedder: Embedder | None, text: str,
                       stop: Callable[[], bool] | None) -> bytes | None:
    """``embed_one``, or None once ``stop()`` says so while the model is not loaded: neither
    is its load started then, nor is a load under way (``preload``: a daemon thread)
    waited for. The caller keeps the text without a vector, which recall embeds later."""
    if embedder is None or stop is None or is_loaded(embedder):
        return await embed_one(embedder, text)
    if stop():
        return None
    preload = getattr(embedder, "preload", None)
    if preload is not None:
        loading = asyncio.wrap_future(preload())
        while not loading.done():
            if stop():
                return None
            # A close sets no event this job could wait on (the agent may close from
            # another loop): looked at every tenth of a second of a load of seconds.
            await asyncio.wait({loading}, timeout=0.1)
        loading.result()
    return await embed_one(embedder, text)


_RECALLED_KINDS = ("manual", "episode", "summary")


Stamp = tuple[int, int, int]  # (count, max id, sum of ids) of an owner's memories


@dataclass
class _Entry:
    stamp: Stamp
    records: list[MemoryRecord]
    index: Any


class _Cache:
    """One built index per owner; brought up to date by appending when rows were only added.

    The stamp is read before the rows, so a change racing with the read only makes the next
    lookup refresh again.
    """

    def __init__(self, store: MemoryBackend) -> None:
        self.store = store
        self._by_owner: dict[str, _Entry] = {}

    async def lookup(self, owner: str) -> tuple[_Entry | None, list[MemoryRecord], Stamp]:
        """The cached entry (or None), the rows added since it was built, and the new stamp."""
        stamp = await self.store.memory_stamp(owner)
        entry = self._by_owner.get(owner)
        if entry is not None and entry.stamp == stamp:
            return entry, [], stamp
        if entry is not None:
            added = await self.store.memories(owner, after_id=entry.stamp[1])
            count, _, total = entry.stamp
            only_added = (stamp[0] == count + len(added)
                          and stamp[2] == total + sum(r.id for r in added))
            if only_added:
                return entry, [r for r in added if r.kind in _RECALLED_KINDS], stamp
        self._by_owner.pop(owner, None)
        rows = [r for r in await self.store.memories(owner) if r.kind in _RECALLED_KINDS]
        return None, rows, stamp

    def put(self, owner: str, stamp: Stamp, records: list[MemoryRecord], index: Any) -> None:
        self._by_owner[owner] = _Entry(stamp, records, index)


class _CachedRetriever:
    """Shared search flow: look up the owner's index, build or extend it, then rank."""

    def __init__(self, store: MemoryBackend) -> None:
        self.store = store
        self._cache = _Cache(store)

    async def _build(self, records: list[MemoryRecord]) -> Any:
        raise NotImplementedError

    async def _extend(self, index: Any, records: list[MemoryRecord],
                      added: list[MemoryRecord]) -> Any:
        return await self._build(records)

    async def refresh(self, owner: str) -> tuple[list[MemoryRecord], Any]:
        """Bring the owner's index up to date (post-turn, so the next search is warm)."""
        entry, rows, stamp = await self._cache.lookup(owner)
        if entry is None:
            index = await self._build(rows) if rows else None
            self._cache.put(owner, stamp, rows, index)
            return rows, index
        if not rows:
            if entry.stamp != stamp:
                self._cache.put(owner, stamp, entry.records, entry.index)
            return entry.records, entry.index
        records = entry.records + rows
        index = await self._extend(entry.index, records, rows)
        self._cache.put(owner, stamp, records, index)
        return records, index


class BM25Retriever(_CachedRetriever):
    async def _build(self, records: list[MemoryRecord]) -> Any:
        import bm25s

        def build() -> Any:
            tokens = bm25s.tokenize([r.content for r in records], stopwords="en",
                                    show_progress=False)
            index = bm25s.BM25()
            index.index(tokens, show_progress=False)
            return index

        return await asyncio.to_thread(build)  # 10k texts take a few hundred ms

    async def search(self, owner: str, query: str, k: int) -> list[MemoryRecord]:
        import bm25s

        records, index = await self.refresh(owner)
        if not records or k <= 0:
            return []
        q = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not any(q.ids):
            return []
        found, scores = index.retrieve(q, k=min(k, len(records)), show_progress=False)
        return [records[int(i)] for i, s in zip(found[0], scores[0], strict=True) if s > 0]


class VectorRetriever(_CachedRetriever):
    """Cosine similarity over stored embeddings; rows without one are embedded on the fly."""

    def __init__(self, store: MemoryBackend, embedder: Embedder, min_score: float = 0.2) -> None:
        super().__init__(store)
        self.embedder = embedder
        self.min_score = min_score

    async def _build(self, records: list[MemoryRecord]) -> np.ndarray:
        import numpy as np

        missing = [i for i, r in enumerate(records) if r.embedding is None]
        extra = (await asyncio.to_thread(self.embedder.embed, [records[i].content for i in missing])
                 if missing else np.zeros((0, self.embedder.dim), np.float32))
        rows = np.zeros((len(records), self.embedder.dim), np.float32)
        for i, r in enumerate(records):
            if r.embedding is not None:
                rows[i] = np.frombuffer(r.embedding, np.float32)
        for j, i in enumerate(missing):
            rows[i] = extra[j]
        return rows

    async def _extend(self, index: Any, records: list[MemoryRecord],
                      added: list[MemoryRecord]) -> np.ndarray:
        if index is None:
            return await self._build(records)
        import numpy as np

        return np.vstack([index, await self._build(added)])

    async def search(self, owner: str, query: str, k: int) -> list[MemoryRecord]:
        import numpy as np

        records, matrix = await self.refresh(owner)
        if not records or k <= 0:
            return []
        q = (await asyncio.to_thread(self.embedder.embed, [query]))[0]
        scores = matrix @ q
        k = min(k, len(records))
        best = np.argpartition(-scores, k - 1)[:k]  # O(n), then sort only the k best
        top = best[np.argsort(-scores[best])]
        return [records[int(i)] for i in top if scores[int(i)] >= self.min_score]


def make_retriever(store: object, embedder: Embedder | None) -> Retriever | None:
    if not isinstance(store, MemoryBackend):
        return None
    return VectorRetriever(store, embedder) if embedder is not None else BM25Retriever(store)
