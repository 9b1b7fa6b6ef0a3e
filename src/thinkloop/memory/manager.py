"""``Memory``: the memory layers, the history pipeline and the post-turn jobs as agent hooks.

    memory = Memory(store)
    agent = Agent(model, tools=memory.tools(), hooks=memory.hooks(), store=store)

``pre_assess`` appends the memory block to the system prompt, ``pre_reason`` runs the history
pipeline on every request, ``post_output`` runs the post-turn jobs and auto-compaction after
the answer is delivered.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from thinkloop.context.pipeline import ContextSettings, run_pipeline, settings_for
from thinkloop.context.tokens import model_window
from thinkloop.core.errors import ConfigError
from thinkloop.core.events import MemoryRecallSkipped
from thinkloop.core.model import Model
from thinkloop.core.spec import Spawn
from thinkloop.core.tool import Tool
from thinkloop.core.types import ENDED_SAVED
from thinkloop.hooks import AssessContext, Hook, OutputContext, ReasonContext
from thinkloop.memory.jobs import DEFAULT_JOBS, PostTurnJob, Turn, run_jobs
from thinkloop.memory.layers import MemorySettings, load_view, owner_of, render
from thinkloop.memory.profile import FactExtractor, extract_facts
from thinkloop.memory.recall import Retriever, default_embedder, make_retriever
from thinkloop.memory.session_compaction import Compactor
from thinkloop.models.embedding import Embedder, is_loaded
from thinkloop.store.base import Store

log = logging.getLogger("thinkloop.memory")

# Words of a question about earlier turns: what someone said, what was decided, again.
_BACK = re.compile(r"\b(?:did|said|says?|told|mentioned|earlier|last time|again|remember|"
                   r"recall|discussed|decided|agreed|promised|previously)\b", re.I)


def refers_back(task: str) -> bool:
    """Does ``task`` ask about earlier turns ("What did Acme Clinic say?")?"""
    return _BACK.search(task) is not None


class Memory:
    def __init__(
        self,
        store: Store,
        *,
        settings: MemorySettings | None = None,
        context: ContextSettings | None = None,
        embedder: Embedder | Literal["auto"] | None = "auto",
        model: Model | None = None,
        extractor: FactExtractor | None = extract_facts,
        jobs: Sequence[PostTurnJob] = DEFAULT_JOBS,
        auto_compact: bool = True,
        history_turns: int | None = None,
    ) -> None:
        """``model`` summarises and flushes (default: the run's own model); ``embedder="auto"``
        loads the local MiniLM model when the ``recall`` extra is installed, else BM25."""
        self.store = store
        self.settings = settings or MemorySettings()
        self.context = context
        if isinstance(embedder, str):
            if embedder != "auto":
                raise ConfigError(f"embedder must be 'auto', None or an Embedder, not {embedder!r}")
            embedder = default_embedder()
        self.embedder: Embedder | None = embedder
        self.retriever: Retriever | None = make_retriever(store, self.embedder)
        self.model = model
        self.extractor = extractor
        self.jobs = tuple(jobs)
        self.auto_compact = auto_compact
        self.history_turns = history_turns  # each request keeps the last N user turns
        self.compactor = Compactor(self.settings)
        # Set while the agent closes (Agent.aclose waits for the post-turn jobs): a job does
        # not start loading the embedding model then (see embed_later).
        self.closing = False

    def tools(self) -> list[Tool]:
        from thinkloop.memory.tools import memory_tools
        from thinkloop.store.base import MemoryBackend

        if not isinstance(self.store, MemoryBackend):
            return []
        return memory_tools(self.store, embedder=self.embedder, retriever=self.retriever)

    def hooks(self) -> list[Hook]:
        return [
            Hook("pre_assess", self.inject, name="memory.inject"),
            Hook("pre_reason", self.prepare_request, name="memory.pipeline"),
            Hook("post_output", self.after_turn, name="memory.post_turn"),
        ]

    def context_settings(self, model: Any) -> ContextSettings:
        """The history pipeline's settings for ``model`` (an object, or a name)."""
        base = self.context or settings_for(model)
        if base.recent_messages is None:
            base = replace(base, recent_messages=self.settings.recent_messages)
        if self.history_turns is not None and base.history_turns is None:
            base = replace(base, history_turns=self.history_turns)
        return base

    async def memory_block(self, session_id: str | None, user_id: str | None, query: str) -> str:
        """The rendered memory layers for a run (empty without a session or user)."""
        owner = owner_of(user_id, session_id)
        if owner is None:
            return ""
        recalled = []
        if self.retriever is not None and query.strip():
            recalled = await self.retriever.search(owner, query, self.settings.recall_k)
        view = await load_view(self.store, session_id, owner, self.settings, recalled)
        return render(view, self.settings)

    async def inject(self, ctx: AssessContext) -> None:
        query = ctx.task
        # A trivial task (step budget): OrcBot's lean mode skips recall, unless the task
        # refers back: a short follow-up ("What did Acme Clinic say?") needs exactly what
        # was said earlier.
        if ctx.state.lean and not refers_back(ctx.task):
            ctx.emit(MemoryRecallSkipped, reason="lean")
            query = ""  # the profile and session summaries stay: they are not retrieval
        block = await self.memory_block(ctx.cfg.session_id, ctx.cfg.user_id, query)
        if block:
            ctx.system_prompt = f"{ctx.system_prompt}\n\n{block}"

    async def prepare_request(self, ctx: ReasonContext) -> None:
        ctx.messages = run_pipeline(ctx.messages, self.context_settings(ctx.cfg.model))

    async def after_turn(self, ctx: OutputContext) -> None:
        cfg, state = ctx.cfg, ctx.state
        owner = owner_of(cfg.user_id, cfg.session_id)
        if owner is None or ctx.status not in ENDED_SAVED:
            return
        turn = Turn(
            self.store, cfg.session_id, cfg.user_id, owner, state.task, ctx.text,
            tuple(state.new_messages), self.settings, self.model or cfg.model,
            self.embedder, self.extractor, embed_later=self.embed_later,
        )
        await run_jobs(turn, self.jobs)
        if self.auto_compact and cfg.session_id is not None:
            await self.compact(cfg.session_id, owner, turn.model or cfg.model, cfg.spawn)
        if self.retriever is not None and not self.embed_later():
            try:  # rebuild the recall index now, so the next turn's search is warm
                await self.retriever.refresh(owner)
            except Exception:
                log.exception("refreshing the recall index failed for %s", owner)

    def embed_later(self) -> bool:
        """Closing with the embedding model not loaded: a post-turn job leaves its text
        without a vector rather than hold the agent's close (a Ctrl-C) for the model's
        import, whether or not it began (``recall.embed_unless``). Nothing is lost: recall
        embeds rows without one when it reads them."""
        return self.closing and self.embedder is not None and not is_loaded(self.embedder)

    async def compact(self, session_id: str, owner: str, model: Model,
                      spawn: Spawn | None = None) -> bool:
        """Compact the session when it is over a threshold (``spawn``: how the memory flush
        before it starts its agent; without it, no flush)."""
        window = self.context.context_window if self.context else model_window(model)
        embedder = None if self.embed_later() else self.embedder  # the flush's memories
        try:
            return await self.compactor.maybe_compact(
                self.store, session_id, owner, model, window, embedder, spawn
            )
        except Exception:
            log.exception("auto-compaction failed for session %s", session_id)
            return False
