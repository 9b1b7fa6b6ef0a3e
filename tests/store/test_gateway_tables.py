"""The gateway's tables (API keys, agent definitions) on SQLite and PostgreSQL alike."""

from __future__ import annotations

from thinkloop.store import PostgresStore, SQLiteStore
from thinkloop.store.gateway import GatewayStore
from thinkloop.store.sqlmanaged import ToolFollows, UserFiles

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


async def test_user_files_are_kept_per_agent_and_per_user(store: Backend) -> None:
    assert isinstance(store, UserFiles)
    assert await store.user_files("pal", "ana") == {}
    first = await store.seed_user_files("pal", "ana", {"SOUL.md": "Be kind.", "USER.md": "-"})
    assert sorted(first) == ["SOUL.md", "USER.md"]
    # Seeding again writes only what is missing, never over an edit.
    await store.put_user_file("pal", "ana", "SOUL.md", "Call me Captain. ✓")
    again = await store.seed_user_files("pal", "ana", {"SOUL.md": "Be kind.", "TOOLS.md": "t"})
    assert again == ["TOOLS.md"]
    assert await store.user_files("pal", "ana") == {
        "SOUL.md": "Call me Captain. ✓", "TOOLS.md": "t", "USER.md": "-"}
    # Another user, or the same user of another agent, sees none of it.
    assert await store.user_files("pal", "bob") == {}
    assert await store.user_files("other", "ana") == {}
    await store.seed_user_files("pal", "bob", {"SOUL.md": "Be kind."})
    assert await store.user_files("pal", "bob") == {"SOUL.md": "Be kind."}
    assert await store.delete_user_file("pal", "bob", "USER.md") is False
    assert await store.delete_user_file("pal", "ana", "USER.md") is True
    assert "USER.md" not in await store.user_files("pal", "ana")
    assert await store.user_files("pal", "bob") == {"SOUL.md": "Be kind."}


async def test_tool_follows_count_runs_per_agent(store: Backend) -> None:
    assert isinstance(store, ToolFollows)
    assert await store.tool_follows("pal", "web_search") == {}
    await store.add_tool_follows("pal", [("web_search", "web_fetch"), ("web_fetch", "write")])
    await store.add_tool_follows("pal", [("web_search", "web_fetch")])
    await store.add_tool_follows("pal", [("web_search", "calculator")])
    await store.add_tool_follows("other", [("web_search", "shell")])
    await store.add_tool_follows("pal", [])
    assert await store.tool_follows("pal", "web_search") == {"web_fetch": 2, "calculator": 1}
    assert await store.tool_follows("other", "web_search") == {"shell": 1}
    assert await store.tool_follows("pal", "write") == {}
