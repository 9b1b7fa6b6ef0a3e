"""Model selection per turn: the cheap model for trivial work, the strong one for hard work."""

from __future__ import annotations

import json

import pytest

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.errors import ConfigError
from thinkloop.judgement import AssessSettings, Judgement, ModelPool, PoolModel
from thinkloop.judgement.select import parse_pool
from thinkloop.models.base import ModelSettings
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.openai_wire import WireQuirks, request_body
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

from .helpers import Recorder, thinkloop_cli

HEURISTIC = AssessSettings(use_model=False)


def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: the file
    """
    return f"def paginate(items, size): return items[: len(items) - 1]  # {path}"


def pool_of(cheap: ScriptedModel, strong: ScriptedModel, **kw: float) -> ModelPool:
    return ModelPool([PoolModel(strong, 3, 2.5, 10.0, reasoning_effort="high"),
                      PoolModel(cheap, 1, 0.15, 0.6)], **kw)


async def test_trivial_task_goes_to_the_cheap_model() -> None:
    cheap, strong = ScriptedModel(["4"], name="cheap"), ScriptedModel([], name="strong")
    events = Recorder()
    agent = Agent(strong, on_event=events,
                  options=AgentOptions(judgement=Judgement(select=pool_of(cheap, strong))))
    result = await agent.run("What is 2+2?")
    assert result.text == "4" and len(cheap.calls) == 1 and strong.calls == []
    (chosen,) = events.of("model.selected")
    assert chosen["model"] == "cheap" and chosen["mode"] == "enforce"
    assert chosen["needed"] == 1 and "cheapest able" in chosen["reason"]
    assert cheap.calls[0].settings.reasoning_effort is None


async def test_code_task_goes_to_the_strong_model_with_its_effort() -> None:
    cheap = ScriptedModel([], name="cheap")
    strong = ScriptedModel([reply("", call("read_file", path="pagination.py")),
                            "Fixed: the slice dropped the last item."], name="strong")
    events = Recorder()
    agent = Agent(cheap, tools=[read_file], on_event=events,
                  options=AgentOptions(judgement=Judgement(assess=HEURISTIC,
                                                           select=pool_of(cheap, strong))))
    result = await agent.run("Refactor pagination.py: split the page maths into its own "
                             "module, then fix the off-by-one where the last page is missing.")
    assert result.status == "completed" and cheap.calls == [] and len(strong.calls) == 2
    assert {c.settings.reasoning_effort for c in strong.calls} == {"high"}
    chosen = events.of("model.selected")[0]
    assert chosen["model"] == "strong" and chosen["needed"] == 3
    assert "plan_with_rollback" in chosen["reason"]


async def test_suggest_never_downgrades_and_defer_keeps_the_default() -> None:
    cheap, strong = ScriptedModel([], name="cheap"), ScriptedModel(["4", "4"], name="strong")
    events = Recorder()
    suggest = Judgement(select=pool_of(cheap, strong, enforce_at=0.95, suggest_at=0.5))
    agent = Agent(strong, on_event=events, options=AgentOptions(judgement=suggest))
    await agent.run("What is 2+2?")
    assert cheap.calls == [] and len(strong.calls) == 1
    assert events.of("model.selected")[0]["mode"] == "suggest"
    assert "suggested cheap" in events.of("model.selected")[0]["reason"]
    events.clear()
    defer = Judgement(select=pool_of(cheap, strong, enforce_at=0.99, suggest_at=0.95))
    await Agent(strong, on_event=events, options=AgentOptions(judgement=defer)).run("What is 2+2?")
    assert cheap.calls == [] and events.of("model.selected")[0]["mode"] == "defer"


async def test_suggest_upgrades_to_a_stronger_model() -> None:
    cheap = ScriptedModel([], name="cheap")
    strong = ScriptedModel(["Plan and patch done."], name="strong")
    pool = pool_of(cheap, strong, enforce_at=0.99, suggest_at=0.3)
    agent = Agent(cheap, options=AgentOptions(judgement=Judgement(assess=HEURISTIC, select=pool)))
    await agent.run("Refactor the billing module to use the new Money class.")
    assert cheap.calls == [] and len(strong.calls) == 1


async def test_selection_over_the_loopback_sends_reasoning_effort(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("Paris", model="mini")),
                   Reply(body=completion("Implemented the decorator.", model="big")))
    mini = OpenAICompatModel("mini", base_url=server.base_url)
    big = OpenAICompatModel("big", base_url=server.base_url)
    pool = ModelPool([PoolModel(mini, 1), PoolModel(big, 3, reasoning_effort="medium")])
    events = Recorder()
    agent = Agent(big, on_event=events,
                  options=AgentOptions(judgement=Judgement(assess=HEURISTIC, select=pool)))
    assert (await agent.run("Capital of France?")).text == "Paris"
    await agent.run("Implement a retry decorator with exponential backoff for the "
                    "HTTP client.")
    assert [r["model"] for r in server.requests] == ["mini", "big"]
    assert "reasoning_effort" not in server.requests[0]
    assert server.requests[1]["reasoning_effort"] == "medium"
    assert [e["model"] for e in events.of("llm.response")] == ["mini", "big"]
    await mini.aclose()
    await big.aclose()


def test_reasoning_effort_is_a_quirk() -> None:
    settings = ModelSettings(reasoning_effort="low")
    on = json.loads(request_body("m", b"[]", None, settings, stream=False, quirks=WireQuirks()))
    off = json.loads(request_body("m", b"[]", None, settings, stream=False,
                                  quirks=WireQuirks(reasoning_effort=False)))
    assert on["reasoning_effort"] == "low" and "reasoning_effort" not in off


def test_pool_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    pool = parse_pool("openai:gpt-4o-mini=1, openai:o4-mini=3/high")
    assert [(p.capability, p.reasoning_effort) for p, _ in pool.entries()] == [
        (1, None), (3, "high")]
    for bad in ["openai:gpt-4o", "x=high", "m=2/extreme", ""]:
        with pytest.raises(ConfigError):
            parse_pool(bad)
    every = Judgement.parse("all")
    assert every is not None and every.select is None and every.assess is not None
    with pytest.raises(ConfigError, match="needs a model pool"):
        Judgement.parse("select")


def test_cli_select_routes_by_task(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("4")))
    env = {"OPENAI_BASE_URL": server.base_url}
    proc = thinkloop_cli("run", "What is 2+2?", "--model", "openai:big", "--json",
                         "--judgement", "select", "--model-pool",
                         "openai:small=1,openai:big=3/high", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["output"] == "4"
    assert server.requests[0]["model"] == "small"
    assert "reasoning_effort" not in server.requests[0]


async def test_the_pool_resolves_its_models_with_the_agents_settings(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from thinkloop.settings import load_settings

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # only the agent's settings say where
    server.clear()
    server.enqueue(Reply(body=completion("Paris")))
    config = load_settings({"models.openai_base_url": server.base_url,
                            "models.openai_api_key": "sk-settings"}, env={})
    judgement = Judgement.parse("select", "openai:mini=1,openai:big=3")
    agent = Agent("openai:big", guard=False,
                  options=AgentOptions(judgement=judgement, config=config))
    assert (await agent.run("Capital of France?")).output == "Paris"
    assert [r["model"] for r in server.requests] == ["mini"]
    await agent.aclose()


async def test_the_model_judges_difficulty_and_risk_and_price_picks(
        server: OpenAIServer) -> None:
    """A short production change the step heuristic calls simple: the model's assessment
    says strong and irreversible, so the strong model answers; a plain question the model
    calls easy goes to the cheap one."""
    server.clear()
    server.enqueue(
        Reply(body=completion(json.dumps({
            "decision": "plan_with_rollback", "risk": "irreversible", "strong_model": True,
            "reasons": ["production schema"], "questions": [], "steps": ["backup", "alter"]}),
            model="judge")),
        Reply(body=completion("Planned the migration with a backup first.", model="big")),
        Reply(body=completion(json.dumps({
            "decision": "direct", "risk": "none", "strong_model": False, "reasons": [],
            "questions": [], "steps": []}), model="judge")),
        Reply(body=completion("A haiku about autumn.", model="mini")))
    judge = OpenAICompatModel("judge", base_url=server.base_url)
    mini = OpenAICompatModel("mini", base_url=server.base_url)
    big = OpenAICompatModel("big", base_url=server.base_url)
    pool = ModelPool([PoolModel(mini, 1), PoolModel(big, 3)])
    events = Recorder()
    agent = Agent(mini, on_event=events, guard=False,
                  options=AgentOptions(judgement=Judgement(
                      assess=AssessSettings(model=judge, ask=False), select=pool)))
    await agent.run("Add a NOT NULL column to the orders table in the production database.")
    await agent.run("Write me a haiku about autumn leaves falling in the park.")
    assert [r["model"] for r in server.requests] == ["judge", "big", "judge", "mini"]
    first, second = events.of("model.selected")
    assert first["model"] == "openai:big" and "risk irreversible" in first["reason"]
    assert second["model"] == "openai:mini" and "not needed" in second["reason"]
    for m in (judge, mini, big):
        await m.aclose()
