"""Closing an agent (a Ctrl-C of ``thinkloop serve``) does not wait for the embedding model's
load: a post-turn job that has not loaded it yet keeps the turn's episode without a vector,
and recall embeds that row when it reads it, so nothing is lost."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
import pytest

from thinkloop import Agent, ScriptedModel
from thinkloop.memory import Memory, VectorRetriever
from thinkloop.memory.jobs import Turn, record_episode
from thinkloop.models.embedding import MiniLMEmbedder
from thinkloop.store import PostgresStore, SQLiteStore

Backend = SQLiteStore | PostgresStore
WORDS = ("kayak", "invoice", "dog")
EPISODE = "User: I bought a kayak.\nAssistant: Have fun kayaking!"


class LazyEmbedder:
    """Keyword vectors from a "model" that loads on its first use, as MiniLM does."""

    name = "keywords"
    dim = len(WORDS) + 1

    def __init__(self) -> None:
        self.loaded = False
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.loaded = True
        self.embedded += texts
        rows = np.array([[float(w in t.lower()) for w in WORDS] + [0.1] for t in texts],
                        np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


class SlowLoadEmbedder(LazyEmbedder):
    """Its load (``preload``, as MiniLM's) goes on until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.loading: Future[None] | None = None

    def preload(self) -> Future[None]:
        if self.loading is None:
            self.loading = Future()
            loading = self.loading

            def load() -> None:
                self.release.wait()
                self.loaded = True
                loading.set_result(None)

            threading.Thread(target=load, daemon=True).start()
        return self.loading


async def _close_during_jobs(store: Backend, embedder: LazyEmbedder) -> Memory:
    """A run answers; the agent starts closing while its post-turn jobs are under way, before
    the episode is recorded (a Ctrl-C right after the answer)."""
    gate = asyncio.Event()

    async def earlier_job(turn: Turn) -> None:  # the session summary's model call, say
        await gate.wait()

    memory = Memory(store, embedder=embedder, jobs=(earlier_job, record_episode),
                    auto_compact=False)
    agent = Agent(ScriptedModel(["Have fun kayaking!"]), memory=memory, store=store)
    result = await agent.run("I bought a kayak.", session="s")
    assert result.status == "completed"
    closing = asyncio.create_task(agent.aclose())
    try:
        for _ in range(100):  # aclose's first steps, up to its wait for the jobs
            await asyncio.sleep(0)
    finally:
        gate.set()
        await closing
    return memory


async def test_closing_keeps_the_episode_unembedded_and_recall_still_finds_it(
    store: Backend
) -> None:
    embedder = LazyEmbedder()
    memory = await _close_during_jobs(store, embedder)
    assert embedder.embedded == [] and not embedder.loaded  # no load started
    rows = await store.memories("session:s", "episode")
    assert [(r.content, r.embedding) for r in rows] == [(EPISODE, None)]
    assert not memory.closing  # closed, the agent stays usable and embeds again
    # The next start: recall embeds the row as it reads it, and finds it.
    found = await VectorRetriever(store, LazyEmbedder()).search("session:s", "my kayak?", 1)
    assert [r.content for r in found] == [EPISODE]


async def test_closing_with_the_model_loaded_embeds_as_ever(store: Backend) -> None:
    embedder = LazyEmbedder()
    embedder.embed(["warm up"])
    await _close_during_jobs(store, embedder)
    rows = await store.memories("session:s", "episode")
    assert len(rows) == 1 and rows[0].embedding is not None
    assert embedder.embedded[1:] == [EPISODE]


@pytest.mark.parametrize("loaded", [False, True])
async def test_not_closing_the_episode_is_embedded(store: Backend, loaded: bool) -> None:
    embedder = LazyEmbedder()
    if loaded:
        embedder.embed(["warm up"])
    memory = Memory(store, embedder=embedder, jobs=(record_episode,), auto_compact=False)
    agent = Agent(ScriptedModel(["Have fun kayaking!"]), memory=memory, store=store)
    await agent.run("I bought a kayak.", session="s")
    await agent.sessions.drain()
    rows = await store.memories("session:s", "episode")
    assert len(rows) == 1 and rows[0].embedding is not None
    await agent.aclose()


async def test_closing_stops_waiting_for_a_load_under_way(store: Backend) -> None:
    """The job had begun loading the model when the close came (the answer was out a moment
    before the Ctrl-C): the close does not wait for the load, and keeps the episode."""
    embedder = SlowLoadEmbedder()
    memory = Memory(store, embedder=embedder, jobs=(record_episode,), auto_compact=False)
    agent = Agent(ScriptedModel(["Have fun kayaking!"]), memory=memory, store=store)
    try:
        await agent.run("I bought a kayak.", session="s")
        for _ in range(1000):  # until the job waits for the load
            if embedder.loading is not None:
                break
            await asyncio.sleep(0)
        await agent.aclose()
        assert not embedder.loaded and embedder.embedded == []  # closed mid-load
        rows = await store.memories("session:s", "episode")
        assert [(r.content, r.embedding) for r in rows] == [(EPISODE, None)]
    finally:
        embedder.release.set()
    found = await VectorRetriever(store, LazyEmbedder()).search("session:s", "my kayak?", 1)
    assert [r.content for r in found] == [EPISODE]


def test_minilm_preloads_once_in_a_daemon_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon thread: a process exiting mid-load does not wait for it."""
    embedder = MiniLMEmbedder()
    release, seen = threading.Event(), []

    def load() -> object:
        seen.append(threading.current_thread())
        release.wait()
        embedder._model = object()
        return embedder._model

    monkeypatch.setattr(embedder, "_load", load)
    first = embedder.preload()
    assert embedder.preload() is first and not first.done()
    release.set()
    first.result()
    assert embedder.loaded and len(seen) == 1 and seen[0].daemon
    assert embedder.preload().done()
