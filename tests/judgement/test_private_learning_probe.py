"""A probe: what one user's runs learned (lessons, preferences, the entity graph) never
reaches another user's run, in its prompt or its memory; the same user's next run gets it."""

from __future__ import annotations

from pathlib import Path

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.judgement import AssessSettings, Judgement, LearningSettings
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.store import SQLiteStore
from thinkloop.tools.base import tool

from .helpers import run_through

SECRETS = ("Klingon", "ledger 4471", "Quixote")


@tool
def lookup_invoice(company: str) -> str:
    """Look up a company's latest invoice."""
    return "invoice 9 of 1,200 EUR, unpaid"


def agent(store: SQLiteStore, script: list[object]) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    learn = LearningSettings(skills=False, observations=False)
    judgement = Judgement(assess=AssessSettings(use_model=False), sensitive=None, learn=learn)
    return Agent(model, tools=[lookup_invoice], store=store, guard=False,
                 options=AgentOptions(judgement=judgement)), model


def prompts(model: ScriptedModel) -> str:
    return "\n".join(m.content for c in model.calls for m in c.messages)


async def test_one_users_lessons_preferences_and_entities_stay_theirs(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    alice, _ = agent(store, [
        reply("", call("lookup_invoice", company="Zanzibar Holdings")),
        "Invoice 9 of Zanzibar Holdings, handled by Quixote, is unpaid.",
        '{"patterns": ["Check Zanzibar Holdings invoices against ledger 4471 first."]}'])
    await run_through(alice, "I prefer answers in Klingon. Check the latest invoice of "
                      "Zanzibar Holdings for Quixote and tell me if it is paid.", user_id="alice")
    # What alice's run learned is stored, under alice.
    assert await store.memories("user:alice", "reflection")
    assert "Zanzibar Holdings" in {n for n, _ in await store.graph_nodes("user:alice")}
    assert "Klingon" in str(await store.profile("user:alice"))

    bob, bob_model = agent(store, [
        reply("", call("lookup_invoice", company="Zanzibar Holdings")),
        "Invoice 9 is unpaid.", '{"patterns": []}'])
    await run_through(bob, "Check the latest invoice of Zanzibar Holdings and tell me if it "
                      "is paid, step by step please.", user_id="bob")
    seen = prompts(bob_model)
    for secret in SECRETS:
        assert secret not in seen, secret
    assert await store.memories("user:bob", "reflection") == []
    assert "Klingon" not in str(await store.profile("user:bob"))
    assert "Quixote" not in {n for n, _ in await store.graph_nodes("user:bob")}

    # The probe can fail: alice's own next run does get them.
    again, again_model = agent(store, ["It is unpaid.", '{"patterns": []}'])
    await run_through(again, "Check the latest invoice of Zanzibar Holdings and tell me if "
                      "it is paid, step by step please.", user_id="alice")
    mine = prompts(again_model)
    assert "ledger 4471" in mine and "Zanzibar Holdings" in mine
    await store.aclose()
