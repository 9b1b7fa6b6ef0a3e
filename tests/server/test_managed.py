"""Managed mode through a real gateway (GoClaw's): provider fallback per agent, bootstrap
files kept in the store and edited over HTTP, the open agent type, the TEAM section and
conversation handoff between agents on one session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.server.conftest import Gateway, Stack
from tests.server.sse import read_events

from thinkloop.server import GatewayConfig
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

AGENTS = """
agents:
  steady:
    description: Answers, on a second provider when the first fails
    model: openai:fake
    fallbacks: [compat:fake]
    tools: none
    memory: false
  front:
    description: Talks to customers first
    model: compat:fake
    tools: none
    memory: false
    team: [billing]
  billing:
    description: Invoices, refunds and payments
    model: compat:fake
    tools: none
    memory: false
  lead:
    description: Plans the work and delegates parts of it
    model: compat:fake
    tools: [spawn_agent]
    approve: auto
    memory: false
    max_steps: 6
    team: [researcher]
  researcher:
    description: Looks things up in the ledger
    instructions: You are the ledger researcher. Quote the ledger line you used.
    model: compat:fake
    tools: none
    memory: false
  outsider:
    description: Not on anyone's team
    model: compat:fake
    tools: none
    memory: false
  open-pal:
    type: open
    model: compat:fake
    tools: none
    memory: false
"""
ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "THINKLOOP_BASE_URL", "THINKLOOP_HOME")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OpenAIServer,
                                                                       OpenAIServer, Path]]:
    """Two model servers: ``openai:`` models reach the first, ``compat:`` ones the second."""
    home = tmp_path_factory.mktemp("home")
    with OpenAIServer() as first, OpenAIServer() as second:
        saved = {k: os.environ.get(k) for k in ENV}
        os.environ.update({"OPENAI_BASE_URL": first.base_url, "OPENAI_API_KEY": "sk-test",
                           "THINKLOOP_BASE_URL": second.base_url,
                           "THINKLOOP_HOME": str(home)})
        try:
            yield first, second, home
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@pytest.fixture(scope="module")
def managed(tmp_path_factory: pytest.TempPathFactory,
            servers: tuple[OpenAIServer, OpenAIServer, Path]) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("managed")
    (tmp / "agents.yaml").write_text(AGENTS)
    # A long TTL: a built agent (its bootstrap files with it) is cached until an edit.
    cfg = GatewayConfig(agents_file=tmp / "agents.yaml", approval_timeout_s=20,
                        agent_ttl_s=600)
    with Gateway(cfg, tmp / "gateway.db") as gw:
        yield Stack(gw, servers[1])


def run(stack: Stack, key: str, agent: str, task: str, session: str | None = None
        ) -> tuple[dict[str, object], list[dict[str, object]]]:
    with stack.client(key) as c:
        body: dict[str, object] = {"agent": agent, "task": task}
        if session:
            body["session"] = session
        r = c.post("/v1/runs", json=body)
        assert r.status_code == 202, r.text
        events, end = read_events(c, r.json()["id"])
        assert end["status"] == "completed", events[-1]
        return c.get(f"/v1/runs/{r.json()['id']}").json(), events


def test_a_500_from_the_first_provider_is_answered_by_the_agents_fallback(
        managed: Stack, servers: tuple[OpenAIServer, OpenAIServer, Path]) -> None:
    first, second, _ = servers
    first.clear()
    second.clear()
    # Every attempt of the first model fails (its own retries included).
    first.enqueue(*[Reply(status=500, body={"error": {"message": "upstream down"}})] * 3)
    second.enqueue(Reply(body=completion("Answered by the fallback.")))
    view, events = run(managed, managed.gateway.key("ana"), "steady", "Say hello")
    assert view["text"] == "Answered by the fallback."
    assert len(first.requests) == 3 and len(second.requests) == 1
    fallback = [e for e in events if e["type"] == "model.fallback"]
    assert len(fallback) == 1
    payload = fallback[0]["payload"]
    assert isinstance(payload, dict)
    assert payload["model"] == "compat:fake"
    assert [f["model"] for f in payload["failed"]] == ["openai:fake"]
    assert "500" in payload["failed"][0]["error"]
    with managed.client(managed.gateway.key("ana")) as c:
        listed = {a["name"]: a for a in c.get("/v1/agents").json()["agents"]}
    assert listed["steady"]["fallbacks"] == ["compat:fake"]


def system_prompt(server: OpenAIServer) -> str:
    return str(server.requests[-1]["messages"][0]["content"])


def test_bootstrap_files_are_edited_through_the_gateway_and_the_next_run_reads_them(
        managed: Stack, servers: tuple[OpenAIServer, OpenAIServer, Path]) -> None:
    _, second, home = servers
    second.clear()
    ana, admin = managed.gateway.key("ana"), managed.gateway.key("root", "admin")
    with managed.client(ana) as c:
        soul = c.get("/v1/agents/billing/files/SOUL.md").json()
        assert soul["source"] == "template" and "Be genuinely helpful" in soul["content"]
        listed = c.get("/v1/agents/billing/files").json()
        assert {f["name"]: f["source"] for f in listed["files"]}["AGENTS.md"] == "none"
        # Only an admin edits an agent, as with its definition.
        r = c.put("/v1/agents/billing/files/SOUL.md", json={"content": "x"})
        assert r.status_code == 403
        assert c.get("/v1/agents/billing/files/NOTES.md").status_code == 404
        assert c.get("/v1/agents/nobody/files/SOUL.md").status_code == 404
    run(managed, ana, "billing", "hello")
    assert "Be genuinely helpful" in system_prompt(second)
    # The file on disk (seeded by that first run) is the embedded default.
    assert (home / "agents" / "billing" / "SOUL.md").is_file()

    with managed.client(admin) as c:
        r = c.put("/v1/agents/billing/files/SOUL.md",
                  json={"content": "# SOUL.md\nAlways answer like a ship's purser."})
        assert r.status_code == 200, r.text
        assert r.json()["source"] == "store"
        assert c.put("/v1/agents/billing/files/AGENTS.md",
                     json={"content": "Quote the invoice number in every answer."}
                     ).status_code == 200
        assert c.put("/v1/agents/billing/files/SOUL.md",
                     json={"content": "x" * 70_000}).status_code == 422
    run(managed, ana, "billing", "hello again")
    prompt = system_prompt(second)
    assert "ship's purser" in prompt and "Be genuinely helpful" not in prompt
    assert "Quote the invoice number" in prompt

    # Cached per agent: a change behind the gateway's back is not read on every run...
    import asyncio

    from thinkloop.store.sqlite import SQLiteStore

    async def sneak() -> None:
        store = SQLiteStore(managed.gateway.store_path)
        try:
            await store.put_agent_file("billing", "SOUL.md", "Sneaked in.")
        finally:
            await store.aclose()

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: asyncio.run(sneak())).result()
    run(managed, ana, "billing", "third")
    assert "ship's purser" in system_prompt(second)
    # ... and an edit through the gateway drops the cached build: back to the disk file.
    with managed.client(admin) as c:
        r = c.delete("/v1/agents/billing/files/SOUL.md")
        assert r.status_code == 200 and r.json()["source"] == "disk"
        assert c.delete("/v1/agents/billing/files/SOUL.md").status_code == 404
    run(managed, ana, "billing", "fourth")
    prompt = system_prompt(second)
    assert "Be genuinely helpful" in prompt and "Sneaked" not in prompt
    assert "Quote the invoice number" in prompt


def stored_user_files(stack: Stack, agent: str, user: str) -> dict[str, str]:
    """What the gateway's store keeps for one user, read by a connection of its own."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from thinkloop.store.sqlite import SQLiteStore

    async def read() -> dict[str, str]:
        store = SQLiteStore(stack.gateway.store_path)
        try:
            return await store.user_files(agent, user)
        finally:
            await store.aclose()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(read())).result()


def test_an_open_agent_keeps_every_bootstrap_file_per_user_in_the_store(
        managed: Stack, servers: tuple[OpenAIServer, OpenAIServer, Path]) -> None:
    _, second, home = servers
    second.clear()
    ana, bob, carol = (managed.gateway.key(u) for u in ("ana", "bob", "carol"))
    admin = managed.gateway.key("root", "admin")
    with managed.client(ana) as c:
        before = c.get("/v1/agents/open-pal/me/files/SOUL.md").json()
        assert before["source"] == "agent:template" and before["user"] == "ana"
    run(managed, ana, "open-pal", "hi")
    assert "This is your first conversation with this user" in system_prompt(second)
    # Managed mode: the user's copies are in the store, per agent and user, not on disk.
    assert not (home / "agents" / "open-pal" / "users").exists()
    assert sorted(stored_user_files(managed, "open-pal", "ana")) == [
        "IDENTITY.md", "SOUL.md", "USER.md"]
    with managed.client(ana) as c:
        listed = {f["name"]: f["source"] for f in c.get("/v1/agents/open-pal/me/files")
                  .json()["files"]}
        assert listed["SOUL.md"] == "user" and listed["AGENTS.md"] == "agent:none"
        # Ana's agent is hers alone: she edits her copy, nobody else's changes.
        r = c.put("/v1/agents/open-pal/me/files/SOUL.md",
                  json={"content": "Call this user Captain."})
        assert r.status_code == 200 and r.json()["source"] == "user", r.text
        assert c.put("/v1/agents/open-pal/me/files/MISSION.md",
                     json={"content": "x"}).status_code == 404
        assert c.get("/v1/agents/billing/me/files").status_code == 404  # predefined
    run(managed, ana, "open-pal", "hi again")
    prompt = system_prompt(second)
    assert "Call this user Captain." in prompt and "first conversation" not in prompt
    with managed.client(bob) as c:
        theirs = c.get("/v1/agents/open-pal/me/files/SOUL.md").json()
        assert "Captain" not in theirs["content"] and theirs["user"] == "bob"
    run(managed, bob, "open-pal", "hi")
    prompt = system_prompt(second)
    assert "Captain" not in prompt and "Be genuinely helpful" in prompt
    with managed.client(bob) as c:
        assert c.put("/v1/agents/open-pal/me/files/USER.md",
                     json={"content": "Bob flies to Lisbon on Fridays."}).status_code == 200
    run(managed, bob, "open-pal", "where do I fly?")
    assert "Bob flies to Lisbon" in system_prompt(second)
    # The agent's own file (edited in the store) seeds users who come later.
    with managed.client(admin) as c:
        assert c.put("/v1/agents/open-pal/files/SOUL.md",
                     json={"content": "Speak in haiku."}).status_code == 200
    run(managed, carol, "open-pal", "hi")
    assert "Speak in haiku." in system_prompt(second)
    assert stored_user_files(managed, "open-pal", "carol")["SOUL.md"] == "Speak in haiku."
    run(managed, ana, "open-pal", "and me?")
    prompt = system_prompt(second)
    assert "Captain" in prompt and "haiku" not in prompt and "Lisbon" not in prompt
    assert "Lisbon" not in stored_user_files(managed, "open-pal", "ana")["USER.md"]
    # Dropping her copy seeds it again from the agent's on her next run.
    with managed.client(ana) as c:
        r = c.delete("/v1/agents/open-pal/me/files/SOUL.md")
        assert r.status_code == 200 and r.json()["source"] == "agent:store"
        assert c.delete("/v1/agents/open-pal/me/files/SOUL.md").status_code == 404
    run(managed, ana, "open-pal", "again")
    assert "Speak in haiku." in system_prompt(second)
    # A predefined agent keeps only USER.md per user, on disk.
    run(managed, ana, "billing", "hi")
    assert [p.name for p in (home / "agents" / "billing" / "users" / "ana").iterdir()] == [
        "USER.md"]


def test_a_team_lead_hands_the_session_to_a_teammate_who_answers_the_next_turn(
        managed: Stack, servers: tuple[OpenAIServer, OpenAIServer, Path]) -> None:
    _, second, _ = servers
    second.clear()
    second.enqueue(
        Reply(body=completion(tool_calls=[("handoff", {"to": "billing",
                                                       "reason": "an invoice question"})])),
        Reply(body=completion("Billing takes over from here.")),
        Reply(body=completion("Invoice 42 was paid on Monday.")),
    )
    ana = managed.gateway.key("ana")
    view, events = run(managed, ana, "front", "Was my invoice 42 paid?", session="desk")
    lead_prompt = str(second.requests[0]["messages"][0]["content"])
    assert "## Team" in lead_prompt
    assert "- billing: Invoices, refunds and payments" in lead_prompt
    assert "handoff" in [t["function"]["name"] for t in second.requests[0]["tools"]]
    moved = [e["payload"] for e in events if e["type"] == "handoff"]
    assert moved == [{"direction": "transfer", "agent": "billing", "child_run_id": "",
                      "from_agent": "front", "reason": "an invoice question"}]
    assert view["text"] == "Billing takes over from here."

    # The client keeps talking to the front desk; the session's next turn is billing's.
    view, _ = run(managed, ana, "front", "So, was it?", session="desk")
    assert view["agent"] == "billing" and view["text"] == "Invoice 42 was paid on Monday."
    request = second.requests[-1]
    assert "agent=billing" in str(request["messages"][0]["content"])
    said = [str(m.get("content")) for m in request["messages"]]
    assert "Was my invoice 42 paid?" in said and "So, was it?" in said
    # Billing has no team: no handoff tool, no TEAM section.
    assert "## Team" not in str(request["messages"][0]["content"])
    # Another user's session of the same name is untouched.
    view, _ = run(managed, managed.gateway.key("bob"), "front", "hi", session="desk")
    assert view["agent"] == "front"


def test_a_team_naming_an_unknown_agent_is_one_clear_error(
        managed: Stack, servers: tuple[OpenAIServer, OpenAIServer, Path]) -> None:
    with managed.client(managed.gateway.key("root", "admin")) as c:
        assert c.put("/v1/agents/lonely", json={"model": "compat:fake", "tools": "none",
                                                "team": ["ghost"]}).status_code == 200
        r = c.post("/v1/runs", json={"agent": "lonely", "task": "hi"})
        assert r.status_code == 400
        assert "'ghost', which is not another agent" in r.json()["error"]["message"]


def test_spawn_agent_delegates_to_a_teammate_and_refuses_an_agent_outside_the_team(
        managed: Stack, servers: tuple[OpenAIServer, OpenAIServer, Path]) -> None:
    _, second, _ = servers
    second.clear()
    second.enqueue(
        Reply(body=completion(tool_calls=[("spawn_agent", {"tasks": ["Find invoice 42"],
                                                           "agent": "outsider"})])),
        Reply(body=completion(tool_calls=[("spawn_agent", {"tasks": ["Find invoice 42"],
                                                           "agent": "researcher"})])),
        Reply(body=completion("Ledger line 7: invoice 42 paid.")),  # the researcher
        Reply(body=completion("Invoice 42 was paid (ledger line 7).")),
    )
    view, events = run(managed, managed.gateway.key("ana"), "lead", "Was invoice 42 paid?")
    assert view["text"] == "Invoice 42 was paid (ledger line 7)."
    lead_prompt = str(second.requests[0]["messages"][0]["content"])
    assert "- researcher: Looks things up in the ledger" in lead_prompt
    assert "call spawn_agent with agent set to their name" in lead_prompt
    spawn = next(t for t in second.requests[0]["tools"]
                 if t["function"]["name"] == "spawn_agent")
    assert "researcher: Looks things up in the ledger" in spawn["function"]["description"]
    # Outside the team: refused, with what the model can do instead; nothing was started.
    refused = next(str(m["content"]) for m in second.requests[1]["messages"]
                   if m["role"] == "tool").replace("^", " ")  # datamarked: outside content
    assert "'outsider' is not on your team" in refused
    assert "Your team: researcher" in refused
    # On the team: the teammate runs as a sub-agent with its own definition.
    child = second.requests[2]["messages"]
    assert "You are the ledger researcher." in str(child[0]["content"])
    assert child[-1]["content"] == "Find invoice 42"
    assert "tools" not in second.requests[2]  # its definition: tools none
    moved = [e["payload"] for e in events if e["type"] == "handoff"]
    assert [(m["direction"], m["agent"]) for m in moved] == [("to_child", "researcher"),
                                                             ("to_parent", "researcher")]
    results = [str(m["content"]).replace("^", " ") for m in second.requests[3]["messages"]
               if m["role"] == "tool"]
    assert "researcher (completed)" in results[-1] and "Ledger line 7" in results[-1]
    assert [c["agent"] for c in view["children"]] == ["researcher"]


def test_the_fallbacks_setting_serves_agents_without_their_own(
        servers: tuple[OpenAIServer, OpenAIServer, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``thinkloop serve --fallback`` / THINKLOOP_FALLBACKS: read when the gateway starts."""
    first, second, _ = servers
    monkeypatch.setenv("THINKLOOP_FALLBACKS", "compat:fake")
    (tmp_path / "agents.yaml").write_text(
        "agents:\n  plain:\n    model: openai:fake\n    tools: none\n    memory: false\n"
        "  own:\n    model: openai:fake\n    fallbacks: [openai:spare]\n    tools: none\n"
        "    memory: false\n")
    cfg = GatewayConfig(agents_file=tmp_path / "agents.yaml", approval_timeout_s=20)
    with Gateway(cfg, tmp_path / "gateway.db") as gw:
        stack = Stack(gw, second)
        first.clear()
        second.clear()
        first.enqueue(*[Reply(status=500, body={"error": {"message": "down"}})] * 3)
        second.enqueue(Reply(body=completion("Answered by the setting's fallback.")))
        view, events = run(stack, gw.key("ana"), "plain", "Say hello")
        assert view["text"] == "Answered by the setting's fallback."
        assert [e["payload"]["model"] for e in events if e["type"] == "model.fallback"] == [
            "compat:fake"]
        # An agent's own fallbacks win over the setting.
        first.clear()
        second.clear()
        first.enqueue(*[Reply(status=500, body={"error": {"message": "down"}})] * 3,
                      Reply(body=completion("Answered by its own spare.")))
        view, _ = run(stack, gw.key("ana"), "own", "Say hello")
        assert view["text"] == "Answered by its own spare."
        assert second.requests == [] and first.requests[-1]["model"] == "spare"
