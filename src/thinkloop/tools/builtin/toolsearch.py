"""``search_tools``: workflows and skills ranked by meaning and by words, fused.

Dense scores are cosines of MiniLM embeddings; sparse scores are BM25 (``bm25s``), scaled by
the best match and added with a small weight. Reciprocal rank fusion was tried first and let a
weak semantic match with shared filler words ("down", "log") beat a strong semantic one.

Embeddings are cached on disk per item text: editing the registry re-embeds exactly the items
whose text changed, and a different embedder discards the cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinkloop.core.tool import Tool, make_tool
from thinkloop.core.types import Skill
from thinkloop.tools.builtin.embeddings import Embedder, cosine
from thinkloop.tools.builtin.workflows import Workflow
from thinkloop.tools.workspace import atomic_write

log = logging.getLogger("thinkloop.tools")
# BM25 (scaled to 0..1 by the best match) is added to the cosine with this weight: meaning
# leads, shared words (an exact workflow name, a rare term) break near ties.
LEXICAL_WEIGHT = 0.1
# Items scoring below this are not offered at all (the seed's similarity threshold).
MIN_SCORE = 0.2


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str  # "workflow" or "skill"
    name: str
    text: str
    item: Workflow | Skill


@dataclass(frozen=True, slots=True)
class Hit:
    entry: Entry
    score: float
    similarity: float
    bm25: float


def _rows(vectors: Any) -> list[list[float]]:
    """Plain float lists from any embedder's output (lists or a numpy matrix), for the cache."""
    return [[float(x) for x in row] for row in vectors]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class ToolIndex:
    def __init__(self, entries: Sequence[Entry], embedder: Embedder,
                 cache_path: Path | None = None) -> None:
        self.entries = list(entries)
        self.embedder = embedder
        self.cache_path = cache_path
        self.model_name = str(getattr(embedder, "name", type(embedder).__qualname__))
        self._vectors: list[list[float]] | None = None
        self._bm25: Any = None
        self.embedded_now = 0  # how many texts the last build had to embed (cache misses)
        self._lock = threading.Lock()

    def add(self, entries: Sequence[Entry]) -> None:
        """More entries (skills learned while running); the next search re-indexes."""
        with self._lock:
            self.entries.extend(entries)
            self._vectors = None

    def _cached(self) -> dict[str, list[float]]:
        if self.cache_path is None or not self.cache_path.exists():
            return {}
        try:
            data = json.loads(self.cache_path.read_text())
        except (OSError, ValueError):
            return {}
        if data.get("model") != self.model_name:
            return {}
        return {k: v for k, v in data.get("vectors", {}).items() if isinstance(v, list)}

    def _build(self) -> None:
        cache = self._cached()
        keys = [_digest(e.text) for e in self.entries]
        missing = sorted({k for k in keys if k not in cache})
        texts = {_digest(e.text): e.text for e in self.entries}
        self.embedded_now = len(missing)
        if missing:
            cache.update(zip(missing, _rows(self.embedder.embed([texts[k] for k in missing])),
                             strict=True))
        kept = {k: cache[k] for k in keys}
        if self.cache_path is not None and (missing or len(kept) != len(cache)):
            try:
                payload = {"model": self.model_name, "vectors": kept}
                atomic_write(self.cache_path, json.dumps(payload).encode())
            except OSError as exc:
                log.warning("cannot write embedding cache %s: %s", self.cache_path, exc)
        self._vectors = [kept[k] for k in keys]
        import bm25s

        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenize([e.text for e in self.entries], stopwords="en",
                                        show_progress=False), show_progress=False)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        if not self.entries:
            return []
        with self._lock:
            if self._vectors is None:
                self._build()
        assert self._vectors is not None and self._bm25 is not None
        import bm25s

        qvec = _rows(self.embedder.embed([query]))[0]
        sims = [cosine(qvec, v) for v in self._vectors]
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False,
                                return_ids=False)[0]
        lex = [float(s) for s in self._bm25.get_scores(tokens)] if tokens else [0.0] * len(sims)
        top = max(lex, default=0.0)
        fused = [sim + LEXICAL_WEIGHT * (lx / top if top > 0 else 0.0)
                 for sim, lx in zip(sims, lex, strict=True)]
        hits = [Hit(e, fused[i], sims[i], lex[i]) for i, e in enumerate(self.entries)
                if fused[i] >= MIN_SCORE]
        hits.sort(key=lambda h: -h.score)
        return hits[:k]


def render_hit(hit: Hit) -> str:
    item = hit.entry.item
    if isinstance(item, Workflow):
        args = "; ".join(
            f"{n}{'' if a.required else ' (optional)'}: {a.description}".rstrip(": ")
            for n, a in item.args.items()) or "none"
        return f"workflow {item.name}: {item.description}\n  args: {args}"
    body = item.body if len(item.body) <= 2000 else item.body[:2000] + "\n[...]"
    return f"skill {item.name}: {item.description}\n{body}"


def search_tools_tool(index: ToolIndex) -> Tool:
    def search_tools(query: str, limit: int = 3) -> str:
        """Find workflows (ready-made scripts, run them with run_workflow) and skills (written
        instructions) for a job, by meaning. Use before building something by hand.

        Args:
            query: what you want to do, in plain words
            limit: how many results at most
        """
        hits = index.search(query, max(1, min(limit, 10)))
        if not hits:
            return f"nothing relevant found for {query!r}; use the built-in tools"
        return "\n\n".join(render_hit(h) for h in hits)

    # The first search may load the embedding model.
    return make_tool(search_tools, timeout_s=180.0)
