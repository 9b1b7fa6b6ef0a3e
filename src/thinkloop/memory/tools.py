"""remember / recall / forget: the model's hands on its manual memories (UrchinLoop REMEMBER).

Built by :func:`memory_tools` around a store; a memory belongs to the run's user when known,
else to its session (or to ``owner`` when given, as in the pre-compaction memory flush).
Problems (no session, nothing found) come back to the model as plain observations.
"""

from __future__ import annotations

from dataclasses import replace

from thinkloop.core.tool import Tool, ToolContext, make_tool
from thinkloop.memory.layers import owner_of
from thinkloop.memory.recall import Retriever, embed_one, make_retriever
from thinkloop.models.embedding import Embedder
from thinkloop.store.base import MemoryBackend

NO_OWNER = "Memory is not available: this run has no session and no user."


def memory_tools(
    store: MemoryBackend,
    *,
    embedder: Embedder | None = None,
    retriever: Retriever | None = None,
    owner: str | None = None,
) -> list[Tool]:
    search = retriever or make_retriever(store, embedder)

    def whose(ctx: ToolContext) -> str | None:
        return owner or owner_of(ctx.user_id, ctx.session_id)

    async def remember(key: str, content: str, ctx: ToolContext) -> str:
        """Save a durable memory, kept until forgotten. Saving under an existing key replaces it.

        Args:
            key: a short name for the memory, e.g. "favorite_color"
            content: what to remember, as a full sentence
        """
        who = whose(ctx)
        if who is None:
            return NO_OWNER
        replaced = await store.delete_memory(who, key)
        await store.add_memory(who, "manual", key, content, await embed_one(embedder, content))
        return f"{'Updated' if replaced else 'Saved'} memory {key!r}."

    async def recall(query: str, ctx: ToolContext, k: int = 5) -> str:
        """Search saved memories and past conversation turns.

        Args:
            query: what to look for
            k: how many results at most
        """
        who = whose(ctx)
        if who is None or search is None:
            return NO_OWNER
        found = await search.search(who, query, max(1, min(k, 20)))
        if not found:
            return "No matching memories."
        return "\n".join(f"- [{r.key or r.id}] ({r.kind}) {r.content}" for r in found)

    async def forget(key: str, ctx: ToolContext) -> str:
        """Delete a saved memory by its key (or its number).

        Args:
            key: the memory's key, as given to remember, or its number
        """
        who = whose(ctx)
        if who is None:
            return NO_OWNER
        n = await store.delete_memory(who, key)
        return f"Forgot {key!r}." if n else f"No memory named {key!r}."

    return [
        # ``persists``: the arguments kept for later runs' prompts. After outside content was
        # read, the provenance gate stores them marked as outside content (guard/provenance.py).
        replace(make_tool(remember, idempotent=False), meta={"persists": ("content",)}),
        make_tool(recall),
        make_tool(forget, idempotent=False),
    ]
