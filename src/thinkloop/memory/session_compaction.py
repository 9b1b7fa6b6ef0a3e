"""Auto-compaction between runs (GoClaw sections 7-8).

When a session passes 50 messages or 75% of the model's window: first a memory flush (an
agent turn with the memory tools, so durable facts are saved before history goes), then a
summary of all but the last 4 messages, saved as the condensed history while the history is
truncated to those 4. At most one compaction per session runs at a time in a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import orjson

from thinkloop.context.tokens import estimate_tokens
from thinkloop.core.model import Model, ModelSettings
from thinkloop.core.spec import AgentSpec, Spawn
from thinkloop.core.types import Message
from thinkloop.memory.layers import MemorySettings
from thinkloop.models.embedding import Embedder
from thinkloop.side_calls import side_call
from thinkloop.store.base import Compacting, MemoryBackend, SessionAdmin, Store, TryLocking
from thinkloop.tools.subagents import SubAgents

log = logging.getLogger("thinkloop.memory")

FLUSH_PROMPT = "Store durable memories now, if nothing to store reply NO_REPLY."
SUMMARY_PROMPT = (
    "You keep the condensed history of a conversation. Rewrite it to include the new "
    "messages: who the user is, what they asked for, what was done and decided, open "
    "questions. Plain prose, at most {limit} characters."
)


def transcript(messages: Sequence[Message]) -> str:
    lines = []
    for m in messages:
        if m.content:
            lines.append(f"{m.role}: {m.content}")
        for c in m.tool_calls:
            lines.append(f"{m.role} called {c.name}({orjson.dumps(c.arguments).decode()})")
    return "\n".join(lines)


def needs_compaction(history: Sequence[Message], settings: MemorySettings, window: int) -> bool:
    if len(history) > settings.compact_after_messages:
        return True
    return estimate_tokens(history) > settings.compact_window_ratio * window


async def memory_flush(
    model: Model, store: MemoryBackend, owner: str, recent: Sequence[Message],
    settings: MemorySettings, embedder: Embedder | None = None, spawn: Spawn | None = None,
) -> str:
    """A sub-agent turn that may call remember/forget; returns its answer (NO_REPLY if idle).

    ``spawn`` starts it (the run's, ``RunConfig.spawn``); without one there is no flush."""
    if spawn is None:
        log.warning("memory flush skipped: no way to start an agent (spawn) was given")
        return "NO_REPLY"
    from thinkloop.memory.tools import memory_tools

    flusher = AgentSpec(
        "memory.flush", instructions="You maintain long-term memory for an assistant.",
        tools=memory_tools(store, embedder=embedder, owner=owner), model=model,
        max_steps=settings.flush_steps, timeout_s=settings.flush_timeout_s, plugins=False)
    result = await SubAgents([flusher]).run_one(
        f"{FLUSH_PROMPT}\n\nRecent conversation:\n{transcript(recent)}", spawn=spawn)
    return result.text


async def summarize(
    model: Model, previous: str, messages: Sequence[Message], settings: MemorySettings
) -> str:
    limit = settings.condensed_chars
    body = (f"Condensed history so far:\n{previous}\n\n" if previous else "") + (
        f"New messages:\n{transcript(messages)}")
    text = ""
    for _ in range(2):  # one rewrite if the first summary overflows the layer
        response = await asyncio.wait_for(
            side_call(
                model, [Message.system(SUMMARY_PROMPT.format(limit=limit)), Message.user(body)],
                purpose="memory.compaction",
                settings=ModelSettings(temperature=0.3, max_tokens=1024)),
            settings.summary_timeout_s,
        )
        text = response.message.content.strip()
        if len(text) <= limit:
            return text
        body = f"Rewrite this in at most {limit} characters:\n{text}"
    return text[:limit]


class Compactor:
    """Runs compactions, at most one at a time per session."""

    def __init__(self, settings: MemorySettings | None = None) -> None:
        self.settings = settings or MemorySettings()
        self.running: set[str] = set()

    async def maybe_compact(
        self, store: Store, session_id: str, owner: str, model: Model, window: int,
        embedder: Embedder | None = None, spawn: Spawn | None = None,
    ) -> bool:
        """Compact the session if it is over a threshold; False if not needed or busy."""
        if session_id in self.running or not isinstance(store, Compacting):
            return False
        self.running.add(session_id)
        try:
            held: contextlib.AbstractAsyncContextManager[bool] = (
                store.try_lock(f"compact:{session_id}") if isinstance(store, TryLocking)
                else contextlib.nullcontext(True)
            )
            async with held as taken:
                # Another process compacting this session: skip, as GoClaw's TryLock does.
                return taken and await self._compact(store, session_id, owner, model, window,
                                                     embedder, spawn)
        finally:
            self.running.discard(session_id)

    async def _compact(
        self, store: Store, session_id: str, owner: str, model: Model, window: int,
        embedder: Embedder | None, spawn: Spawn | None,
    ) -> bool:
        s = self.settings
        history = await store.load(session_id)
        if not needs_compaction(history, s, window):
            return False
        if isinstance(store, MemoryBackend):
            await memory_flush(model, store, owner, history[-10:], s, embedder, spawn)
        cut = max(len(history) - s.keep_after_compaction, 0)
        # The kept messages must leave room, or a session of a few huge messages would be
        # compacted again after every turn: keep fewer when they fill half the threshold.
        while cut < len(history) - 1 and (
                estimate_tokens(history[cut:]) > s.compact_window_ratio * window / 2):
            cut += 1
        while 0 < cut < len(history) and history[cut].role == "tool":
            cut -= 1  # never keep a tool result without the call before it
        info = await store.session_info(session_id) if isinstance(store, SessionAdmin) else None
        summary = await summarize(model, info.summary if info else "", history[:cut], s)
        assert isinstance(store, Compacting)
        await store.compact(session_id, summary, drop_first=cut)
        log.info("compacted session %s: %d messages into a summary", session_id, cut)
        return True
