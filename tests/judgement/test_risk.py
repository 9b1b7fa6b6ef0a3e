"""Risk words in any wording ask first; talking about them does not; the model judges."""

from __future__ import annotations

import json

import pytest

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.errors import ModelResponseError
from thinkloop.judgement import Assessor, AssessSettings, Judgement, heuristic
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.scripted import ScriptedModel
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

from .helpers import Recorder


@pytest.mark.parametrize("task", [
    "Cancel my gym membership.", "I cancelled the order by mistake, cancel the new one too.",
    "Get rid of the old feature branches.", "Clean up the shared drive.",
    "Revoke Dana's access.", "Transfer 200 euros to my landlord.", "Pay the plumber.",
    "Publish the draft post.", "Deploy the release.", "Force-push my branch.",
    "Rotate the database credentials.", "Drop the staging tables.",
    "Migrate the users table.", "I no longer need my Spotify."])
def test_irreversible_actions_ask_first(task: str) -> None:
    found = heuristic(task)
    assert found.decision == "ask_first", (task, found.reasons)
    assert found.question


@pytest.mark.parametrize("task", [
    "Explain what DROP TABLE does.", "Format today's date as ISO 8601.",
    "How do I cancel a rebase that is halfway through?",
    "What does git push --force do compared with --force-with-lease?",
    "Delete test.db in this folder, the test suite regenerates it anyway.",
    "Permanently delete ~/Downloads/old.dmg, yes I'm sure."])
def test_benign_mentions_and_explicit_requests_stay_direct(task: str) -> None:
    assert heuristic(task).decision == "direct", task


def _verdict(decision: str, **kw: object) -> str:
    return json.dumps({"decision": decision, "risk": kw.get("risk", "none"),
                       "strong_model": kw.get("strong", False), "reasons": ["r"],
                       "questions": kw.get("questions", []), "steps": []})


async def test_the_model_judges_once_per_task_text(server: OpenAIServer) -> None:
    """Two runs of the same task: one side call (cached); the model's question is the
    answer, though the heuristic alone would have gone ahead."""
    server.clear()
    server.enqueue(Reply(body=completion(_verdict(
        "ask_first", risk="irreversible",
        questions=["Which of your three subscriptions should I end?"]))))
    model = OpenAICompatModel("judge", base_url=server.base_url)
    events = Recorder()
    agent = Agent(model, on_event=events,
                  options=AgentOptions(judgement=Judgement(learn=None, sensitive=None)))
    task = "Please sort out those subscriptions I keep paying for but never really use."
    for _ in range(2):
        result = await agent.run(task)
        assert result.text == "Which of your three subscriptions should I end?"
    assert len(server.requests) == 1
    assert [e["source"] for e in events.of("assessment")] == ["model", "model"]
    assert events.of("assessment")[0]["risk"] == "irreversible"
    await model.aclose()


async def test_a_failing_side_call_leaves_the_heuristic_and_the_run_goes_on() -> None:

    model = ScriptedModel([ModelResponseError("server gone"), "Done: renamed the file."])
    events = Recorder()
    agent = Agent(model, on_event=events,
                  options=AgentOptions(judgement=Judgement(learn=None, sensitive=None)))
    result = await agent.run("Rename notes.txt to notes-2026.txt in the project folder, "
                             "then list the folder so I can see it.")
    assert result.text == "Done: renamed the file."
    (found,) = events.of("assessment")
    assert found["source"] == "heuristic"
    assert any("model assessment failed" in r for r in found["reasons"])


async def test_the_tiny_local_model_does_not_judge() -> None:
    class Local(ScriptedModel):
        pass
    model = Local(["ok"], name="local")
    assessor = Assessor(AssessSettings())
    found = await assessor.judge("Cancel my subscription to the newspaper.", model=model)
    assert found.source == "heuristic" and model.calls == []


async def test_instructions_in_the_user_message_for_templates_without_a_system_role(
        server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(Reply(body=completion('{"decision": "direct", "risk": "none", '
                                         '"strong_model": false, "reasons": []')))  # cut short
    model = OpenAICompatModel("gemma", base_url=server.base_url)
    assessor = Assessor(AssessSettings(use_model=True, system_role=False))
    found = await assessor.judge("Rename the notes file to notes-2026.txt please.", model=model)
    (sent,) = server.requests
    assert [m["role"] for m in sent["messages"]] == ["user"]
    assert sent["messages"][0]["content"].startswith("You decide how an assistant agent")
    assert found.source == "model" and found.decision == "direct"  # read from a cut reply
    assert found.strong_model is False
    await model.aclose()
