"""The gateway's tables (API keys, agent definitions) on SQLite and PostgreSQL alike."""

from __future__ import annotations

from thinkloop.store import PostgresStore, SQLiteStore
from thinkloop.store.gateway import GatewayStore

Backend = SQLiteStore | PostgresStore


async def test_api_keys_are_found_by_hash_until_revoked(store: Backend) -> None:
    assert isinstance(store, GatewayStore)
    await store.add_api_key("k1", "hash-one", "ana", ["user"])
    await store.add_api_key("k2", "hash-two", "bob", ["user", "admin"])
    ana = await store.api_key("hash-one")
    assert ana is not None and (ana.id, ana.user_id, ana.roles) == ("k1", "ana", ("user",))
    bob = await store.api_key("hash-two")
    assert bob is not None and bob.roles == ("user", "admin")
    assert await store.api_key("hash-three") is None
    assert await store.revoke_api_key("k1") is True
    assert await store.revoke_api_key("k1") is False  # revoked already
    assert await store.revoke_api_key("nope") is False
    assert await store.api_key("hash-one") is None
    listed = await store.list_api_keys()
    assert [(k.id, k.revoked_at is not None) for k in listed] == [("k1", True), ("k2", False)]


async def test_agent_definitions_upsert_and_delete(store: Backend) -> None:
    assert await store.agent_definitions() == []
    await store.put_agent("helper", '{"model": "openai:a"}')
    first = await store.agent_definition("helper")
    assert first is not None and first.definition == '{"model": "openai:a"}'
    await store.put_agent("helper", '{"model": "openai:b"}')
    await store.put_agent("coder", "{}")
    again = await store.agent_definition("helper")
    assert again is not None and again.definition == '{"model": "openai:b"}'
    assert again.updated_at >= first.updated_at
    assert [d.name for d in await store.agent_definitions()] == ["coder", "helper"]
    assert await store.delete_agent("helper") is True
    assert await store.delete_agent("helper") is False
    assert await store.agent_definition("helper") is None


async def test_agent_files_upsert_per_agent_and_delete(store: Backend) -> None:
    assert await store.agent_files("helper") == {}
    await store.put_agent_file("helper", "SOUL.md", "Be brief.")
    await store.put_agent_file("helper", "AGENTS.md", "Rules: none yet. ünïcode ✓")
    await store.put_agent_file("coder", "SOUL.md", "Write tests first.")
    await store.put_agent_file("helper", "SOUL.md", "Be very brief.")
    assert await store.agent_files("helper") == {"AGENTS.md": "Rules: none yet. ünïcode ✓",
                                                  "SOUL.md": "Be very brief."}
    assert await store.agent_files("coder") == {"SOUL.md": "Write tests first."}
    assert await store.delete_agent_file("helper", "SOUL.md") is True
    assert await store.delete_agent_file("helper", "SOUL.md") is False
    assert await store.agent_files("helper") == {"AGENTS.md": "Rules: none yet. ünïcode ✓"}


async def test_a_session_handoff_is_kept_and_replaced(store: Backend) -> None:
    assert await store.handoff("ana:chat") is None
    await store.set_handoff("ana:chat", "billing", "front", "an invoice question")
    first = await store.handoff("ana:chat")
    assert first is not None
    assert (first.agent, first.from_agent, first.reason) == ("billing", "front",
                                                             "an invoice question")
    await store.set_handoff("ana:chat", "front", "billing", "done")
    again = await store.handoff("ana:chat")
    assert again is not None and (again.agent, again.from_agent) == ("front", "billing")
    assert await store.handoff("bob:chat") is None
