"""The entity graph (migration 5) on both durable backends."""

from __future__ import annotations

from thinkloop.store import PostgresStore, SQLiteStore
from thinkloop.store.base import GraphBackend

Backend = SQLiteStore | PostgresStore


async def test_nodes_and_edges_count_mentions_per_owner(store: Backend) -> None:
    assert isinstance(store, GraphBackend)
    await store.add_graph("u", ["Ada Lovelace", "Acme"], [("Ada Lovelace", "works_at", "Acme")])
    await store.add_graph("u", ["ada lovelace", "Paris"],
                          [("Ada Lovelace", "works_at", "Acme"), ("Paris", "near", "Acme")])
    await store.add_graph("other", ["Acme"], [])
    assert await store.graph_nodes("u") == [("Ada Lovelace", 2), ("Acme", 1), ("Paris", 1)]
    assert await store.graph_edges("u", ["ACME"]) == [
        ("Ada Lovelace", "works_at", "Acme", 2), ("Paris", "near", "Acme", 1)]
    assert await store.graph_edges("u", ["paris"], limit=1) == [("Paris", "near", "Acme", 1)]
    assert await store.graph_edges("u", ["paris", "ada lovelace"]) == [
        ("Ada Lovelace", "works_at", "Acme", 2), ("Paris", "near", "Acme", 1)]
    assert await store.graph_edges("u", []) == []
    assert await store.graph_nodes("other") == [("Acme", 1)]
    assert await store.graph_edges("nobody", ["Acme"]) == []
