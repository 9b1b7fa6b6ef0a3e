"""Memory: five layers injected into the prompt, recall, post-turn jobs, auto-compaction."""

from thinkloop.memory.jobs import (
    DEFAULT_JOBS,
    PostTurnJob,
    Turn,
    extract_profile,
    record_episode,
    run_jobs,
    summarize_session,
)
from thinkloop.memory.layers import MemorySettings, MemoryView, load_view, owner_of, render
from thinkloop.memory.manager import Memory
from thinkloop.memory.profile import extract_facts, llm_facts
from thinkloop.memory.recall import (
    BM25Retriever,
    Retriever,
    VectorRetriever,
    default_embedder,
    make_retriever,
)
from thinkloop.memory.session_compaction import Compactor, memory_flush, needs_compaction, summarize
from thinkloop.models.embedding import Embedder, MiniLMEmbedder

__all__ = [
    "DEFAULT_JOBS",
    "BM25Retriever",
    "Compactor",
    "Embedder",
    "Memory",
    "MemorySettings",
    "MemoryView",
    "MiniLMEmbedder",
    "PostTurnJob",
    "Retriever",
    "Turn",
    "VectorRetriever",
    "default_embedder",
    "extract_facts",
    "extract_profile",
    "llm_facts",
    "load_view",
    "make_retriever",
    "memory_flush",
    "needs_compaction",
    "owner_of",
    "record_episode",
    "render",
    "run_jobs",
    "summarize",
    "summarize_session",
]
