"""Assess before acting, through the public API and the CLI, every default on."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.events import Assessed
from thinkloop.guard import GuardSettings, PlanSettings
from thinkloop.judgement import AssessSettings, Judgement, heuristic
from thinkloop.memory.manager import Memory
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.store import SQLiteStore
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.tools.subagents import AgentSpec, SubAgents

from .helpers import Recorder, run_through, thinkloop_cli

HEURISTIC = AssessSettings(use_model=False)  # the tests of the heuristic's decisions


def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: the file
    """
    return f"contents of {path}"


async def test_ask_first_answers_with_a_question_and_never_calls_the_model(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    model = ScriptedModel(["should never be asked"])
    events = Recorder()
    agent = Agent(model, tools=[read_file], store=store,
                  on_event=events, options=AgentOptions(judgement=Judgement(assess=HEURISTIC)))
    result = await run_through(agent, "Delete build/old.log", session="s1")
    assert result.status == "completed"
    assert result.text.startswith("Before I delete anything")
    assert model.calls == []
    (assessed,) = events.of("assessment")
    assert assessed["decision"] == "ask_first" and assessed["signals"]["destructive"] == 1.0
    # The question is the turn's answer in the session, and the plan artifact is stored.
    history = await store.load("s1")
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[1].content == result.text
    (plan,) = await store.memories("session:s1", "plan")
    artifact = orjson.loads(plan.content)
    assert plan.key == result.run_id and artifact["decision"] == "ask_first"
    assert artifact["task"] == "Delete build/old.log"
    await store.aclose()


async def test_vague_direct_task_escalates_below_the_threshold() -> None:
    found = heuristic("fix it")
    assert found.decision == "ask_first" and found.signals["ambiguity"] >= 0.5
    events = Recorder()
    agent = Agent(ScriptedModel([]), on_event=events, options=AgentOptions(judgement=True))
    result = await agent.run("handle this somehow")
    assert result.status == "completed" and "more precisely" in result.text
    assert events.of("assessment")[0]["decision"] == "ask_first"


async def test_ask_false_keeps_acting_with_guidance() -> None:
    model = ScriptedModel(["I removed build/old.log after checking it was a stale log."])
    agent = Agent(model, options=AgentOptions(judgement=Judgement(assess=AssessSettings(ask=False,
                                                                   use_model=False))))
    result = await agent.run("Delete build/old.log")
    assert result.status == "completed" and len(model.calls) == 1
    assert "ask before anything that cannot be undone" in model.calls[0].messages[0].content


async def test_plan_with_rollback_guides_the_model_and_the_run_goes_on() -> None:
    model = ScriptedModel([
        reply("", call("read_file", path="pagination.py")),
        "Plan: 1) read 2) patch. Fixed the off-by-one in pagination.py.",
    ])
    events = Recorder()
    agent = Agent(model, tools=[read_file], on_event=events,
                  options=AgentOptions(judgement=Judgement(assess=HEURISTIC)))
    result = await agent.run("Refactor pagination.py: split the page maths into its own "
                             "module, then fix the off-by-one where the last page is missing.")
    assert result.status == "completed" and len(result.steps) == 2
    system = model.calls[0].messages[0].content
    assert "keep a way back" in system
    assert events.of("assessment")[0]["decision"] == "plan_with_rollback"
    assert events.of("assessment")[0]["suggested_subagents"] == ["plan"]


async def test_parallelize_fans_out_to_sub_agents_before_step_one() -> None:
    child_model = ScriptedModel(["London: 12C, cloudy.", "Berlin: 9C, rain."])
    subagents = SubAgents([AgentSpec("research", "looks things up")], model=child_model,
                          max_concurrency=1)
    model = ScriptedModel(["London is 12C and cloudy; Berlin is 9C with rain."])
    events = Recorder()
    judgement = Judgement(assess=HEURISTIC, subagents=subagents)
    agent = Agent(model, on_event=events, options=AgentOptions(judgement=judgement))
    result = await agent.run("Find the weather in London; find the weather in Berlin.")
    assert result.status == "completed"
    (fan,) = events.of("assessment.fan_out")
    assert fan["tasks"] == ["Find the weather in London", "find the weather in Berlin"]
    assert [m.messages[-1].content for m in child_model.calls] == fan["tasks"]
    system = model.calls[0].messages[0].content
    assert "SUB-AGENT RESULTS" in system and "Berlin: 9C, rain." in system
    assert [e["direction"] for e in events.of("handoff")] == [
        "to_child", "to_parent", "to_child", "to_parent"]
    # The children's model calls are charged to the parent run.
    assert result.usage.requests == 3


async def test_delegate_runs_the_explorer_first() -> None:
    explorer = ScriptedModel(["Auth is done in auth/session.py with signed cookies."])
    subagents = SubAgents([AgentSpec("explore", "reads code"), AgentSpec("code", "writes")],
                          model=explorer)
    model = ScriptedModel(["Authentication uses signed cookies (auth/session.py)."])
    events = Recorder()
    judgement = Judgement(assess=HEURISTIC, subagents=subagents)
    agent = Agent(model, on_event=events, options=AgentOptions(judgement=judgement))
    await agent.run("Explore the repository and tell me how authentication is done.")
    assert events.of("assessment.fan_out")[0]["agents"] == ["explore"]
    assert "signed cookies" in model.calls[0].messages[0].content


async def test_model_assessment_over_the_loopback_server(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(
        Reply(body=completion(json.dumps({
            "decision": "ask_first", "confidence": 0.9,
            "question": "Which report do you mean: the Q3 sales or the Q3 costs?"}),
            prompt_tokens=40, completion_tokens=20)),
    )
    events = Recorder()
    model = OpenAICompatModel("fake", base_url=server.base_url)
    judgement = Judgement(assess=AssessSettings(use_model=True, model_below=1.0))
    agent = Agent(model, on_event=events, options=AgentOptions(judgement=judgement))
    result = await agent.run("Write a summary of the Q3 report for the board.")
    assert result.text == "Which report do you mean: the Q3 sales or the Q3 costs?"
    assert len(server.requests) == 1
    sent = server.requests[0]
    assert sent["messages"][1]["content"].endswith("Request: Write a summary of the Q3 report "
                                                   "for the board.")
    assert "its guess:" in sent["messages"][1]["content"]  # the heuristic's hints
    assert sent["max_tokens"] == 300
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["decision", "risk", "strong_model", "reasons", "questions",
                                  "steps"]
    assert events.of("assessment")[0]["source"] == "model"
    assert events.of("llm.request")[0]["purpose"] == "assess"
    assert result.usage.input_tokens == 40
    await model.aclose()


async def test_unreadable_model_assessment_falls_back_to_the_heuristic() -> None:
    model = ScriptedModel(["I think you should just do it", "Paris."])
    events = Recorder()
    agent = Agent(model,
                  on_event=events,
                      options=AgentOptions(judgement=Judgement(assess=AssessSettings(use_model=True,
                                                                   model_below=1.0))))
    result = await agent.run("Tell me about the history of the Eiffel Tower in Paris, France")
    assert result.text == "Paris."
    assert events.of("assessment")[0]["source"] == "heuristic"


async def test_lean_mode_skips_recall_planning_and_the_model_assessment(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    # An episode reaches the prompt only through recall (a search on the task).
    await store.add_memory("user:u", "episode", "",
                           "User: the capital of France?\nAssistant: Paris, says the atlas.")
    guard = GuardSettings(plan=PlanSettings(enabled=True))
    model = ScriptedModel(["Hello!", '{"decision": "direct", "confidence": 0.9}',
                           "1. look it up\n2. answer", "Paris is the capital."])
    events = Recorder()
    agent = Agent(model, store=store, memory=Memory(store, embedder=None), guard=guard,
                  on_event=events, options=AgentOptions(judgement=Judgement(
                      assess=AssessSettings(use_model=True, model_below=1.0), learn=None)))
    await run_through(agent, "capital of France?", user_id="u")
    assert len(model.calls) == 1  # no plan call, no assessment call
    assert "says the atlas" not in model.calls[0].messages[0].content
    assert events.types().count("memory.recall_skipped") == 1
    assert events.types().count("plan.skipped") == 1
    events.clear()
    result = await run_through(agent, "What is the capital of France? Look it up in your "
                               "notes.", user_id="u")
    assert result.text == "Paris is the capital."
    # Not trivial: the model assessment, the plan and recall all happen.
    assert events.of("llm.request")[0]["purpose"] == "assess"
    assert events.of("assessment")[0]["source"] == "model"
    assert "memory.recall_skipped" not in events.types() and "plan.created" in events.types()
    assert "says the atlas" in model.calls[-1].messages[0].content
    await store.aclose()


def test_cli_judgement_assess_asks_first(server: OpenAIServer) -> None:
    server.clear()
    proc = thinkloop_cli("run", "Wipe my downloads folder.", "--model", "openai:fake",
                         "--judgement", "assess", "--json",
                         env={"OPENAI_BASE_URL": server.base_url})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "completed" and "wipe" in out["output"].lower()
    assert server.requests == []  # a trivial task: lean, the heuristic alone


def test_cli_judgement_setting_and_bad_value(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("4")))
    proc = thinkloop_cli("run", "What is 2+2?", "--model", "openai:fake", "--json",
                         env={"OPENAI_BASE_URL": server.base_url,
                              "THINKLOOP_JUDGEMENT": "all"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["output"] == "4"
    proc = thinkloop_cli("run", "hi", "--judgement", "assess,psychic", "--model", "openai:x")
    assert proc.returncode == 2
    assert "unknown judgement part(s) psychic" in proc.stderr


@pytest.mark.parametrize("spec", ["", "off", "OFF"])
def test_parse_off(spec: str) -> None:
    assert Judgement.parse(spec) is None


def test_events_are_json() -> None:
    found = heuristic("Research the prices of Tesla and also summarize news about BYD")
    e = Assessed("r", 0, **found.to_dict())
    assert json.loads(json.dumps(e.payload))["decision"] == found.decision
