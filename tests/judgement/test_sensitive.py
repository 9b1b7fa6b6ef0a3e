"""Sensitive calls: classification, secrets kept from the model and logs, the supervisor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.guard import GuardSettings
from thinkloop.guard.approval import ApprovalRequest, ApprovalSettings, CallbackApprover
from thinkloop.judgement import Judgement, SensitivitySettings, Supervisor, classify_call
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.store import SQLiteStore
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.tools.base import tool
from thinkloop.types import ToolCall

from .helpers import Recorder, run_through, thinkloop_cli

KEY = "sk-proj-Zx81kQ0vN3mW7pL2aR5tY9uB"
APPROVE = json.dumps({"verdict": "approve", "confidence": 0.95,
                      "reason": "looking up the customer the user named"})


def c(name: str, **args: Any) -> ToolCall:
    return ToolCall("1", name, args)


def test_classification_rules() -> None:
    assert classify_call(c("read_file", path=".env")).level == "SECRET"
    assert classify_call(c("read_file", path="/home/u/.ssh/config")).level == "SECRET"
    assert classify_call(c("http_get", url="x", headers=f"Bearer {KEY}")).level == "SECRET"
    assert classify_call(c("memory_search", query="my doctor")).level == "SENSITIVE"
    assert classify_call(c("lookup", who="bob@example.com")).level == "SENSITIVE"
    assert classify_call(c("web_search", query="weather paris")).level == "PUBLIC"
    assert classify_call(c("read_file", path="notes.txt")).level == "NORMAL"
    assert classify_call(c("web_search", query=KEY)).level == "SECRET"  # a value outranks


class Weather:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def tool(self) -> Any:
        @tool
        def weather(city: str, api_key: str) -> str:
            """Current weather from the weather API.

            Args:
                city: the city
                api_key: the API key to use
            """
            self.keys.append(api_key)
            return f"{city}: 8C, cloudy (authenticated with {api_key})"

        return weather


async def test_secrets_never_reach_the_model_the_events_or_the_store(tmp_path: Path) -> None:
    weather = Weather()
    store = SQLiteStore(tmp_path / "t.db")
    asked: list[ApprovalRequest] = []

    def human(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    model = ScriptedModel([
        reply("", call("weather", city="Paris", api_key="[SECRET_1]")),
        APPROVE,  # the supervisor's verdict: still escalated, the data is secret
        "Paris is 8C and cloudy.",
    ])
    events = Recorder()
    guard = GuardSettings(approval=ApprovalSettings(CallbackApprover(human)))
    agent = Agent(model, tools=[weather.tool()], store=store, guard=guard, on_event=events,
                  options=AgentOptions(judgement=Judgement(assess=None)))
    result = await run_through(agent, f"Use my weather API key {KEY} to get the weather "
                                      "in Paris.", session="s")
    assert result.text == "Paris is 8C and cloudy."
    assert weather.keys == [KEY]  # the tool got the real value
    assert [r.arguments["api_key"] for r in asked] == ["[SECRET_1]"]
    assert "SECRET" in asked[0].reason
    seen = orjson.dumps([[m.content for m in mc.messages] for mc in model.calls]).decode()
    assert KEY not in seen and "[SECRET_1]" in seen
    logged = orjson.dumps([(e.type, e.payload) for e in events.events], default=str).decode()
    assert KEY not in logged
    assert "secrets.redacted" in events.types()
    assert KEY not in orjson.dumps(result.to_dict(), default=str).decode()
    stored = orjson.dumps([m.content for m in await store.load("s")]).decode()
    assert KEY not in stored and "authenticated with [SECRET_1]" in stored
    assert events.of("supervisor.escalated")[0]["reason"] == (
        "secret data always goes to a human")
    await store.aclose()


@tool
def lookup_customer(email: str) -> str:
    """Find a customer record.

    Args:
        email: the customer's e-mail
    """
    return f"{email}: 3 open orders"


async def test_supervisor_approves_a_confident_safe_call_without_the_human() -> None:
    asked: list[ApprovalRequest] = []
    model = ScriptedModel([reply("", call("lookup_customer", email="bob@example.com")),
                           APPROVE, "Bob has 3 open orders."])
    events = Recorder()
    guard = GuardSettings(approval=ApprovalSettings(CallbackApprover(
        lambda r: asked.append(r) or False)))
    agent = Agent(model, tools=[lookup_customer], guard=guard, on_event=events,
                  options=AgentOptions(judgement=Judgement(assess=None)))
    result = await agent.run("How many open orders does bob@example.com have?")
    assert result.text == "Bob has 3 open orders." and asked == []
    assert result.steps[0].results[0].content == "bob@example.com: 3 open orders"
    (classified,) = events.of("sensitivity.classified")
    assert classified["level"] == "SENSITIVE"
    (decided,) = events.of("approval.decided")
    assert decided["approved"] and decided["reason"].startswith("supervisor approved (0.95)")
    assert [e["purpose"] for e in events.of("llm.request") if "purpose" in e] == ["supervisor"]
    assert result.usage.requests == 3  # the supervisor's call is the run's too


async def test_unsure_or_malformed_verdicts_escalate_to_the_human() -> None:
    for verdict in [json.dumps({"verdict": "approve", "confidence": 0.5, "reason": "maybe"}),
                    '{"verdict": "approve", "confidence": 0.99, "reason": "ok", "extra": 1}',
                    "sure, go ahead"]:
        asked: list[ApprovalRequest] = []
        model = ScriptedModel([reply("", call("lookup_customer", email="eve@example.com")),
                               verdict, "I was not allowed to look that up."])
        guard = GuardSettings(approval=ApprovalSettings(CallbackApprover(
            lambda r, asked=asked: asked.append(r) or False)))
        agent = Agent(model, tools=[lookup_customer], guard=guard,
                      options=AgentOptions(judgement=Judgement(assess=None)))
        result = await agent.run("Orders of eve@example.com?")
        assert len(asked) == 1, verdict
        obs = result.steps[0].results[0]
        assert obs.is_error and "escalated by supervisor" in obs.content


async def test_without_a_human_an_escalation_is_denied() -> None:
    model = ScriptedModel([reply("", call("read_file", path=".env")),
                           APPROVE, "I may not read that file."])
    read: list[str] = []

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        read.append(path)
        return "SECRET=1"

    agent = Agent(model, tools=[read_file], options=AgentOptions(judgement=Judgement(assess=None)))
    result = await agent.run("Show me the .env file")
    assert read == [] and "no human approver" in result.steps[0].results[0].content


async def test_supervisor_stands_in_front_of_tools_that_require_approval() -> None:
    sent: list[str] = []

    @tool(needs_approval=True)
    def post_status(text: str) -> str:
        """Post a status update."""
        sent.append(text)
        return "posted"

    model = ScriptedModel([reply("", call("post_status", text="Deploy finished.")),
                           APPROVE, "Posted."])
    agent = Agent(model, tools=[post_status],
                  options=AgentOptions(judgement=Judgement(assess=None)))
    result = await agent.run("Post that the deploy finished.")
    assert sent == ["Deploy finished."] and result.text == "Posted."
    # Without judgement the same call is refused: there is no approver.
    model = ScriptedModel([reply("", call("post_status", text="Deploy finished.")), "No."])
    await Agent(model, tools=[post_status]).run("Post that the deploy finished.")
    assert sent == ["Deploy finished."]


async def test_supervisor_model_over_the_loopback_server(server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(Reply(body=completion(APPROVE, prompt_tokens=50, completion_tokens=12)))
    judge = OpenAICompatModel("judge", base_url=server.base_url)
    model = ScriptedModel([reply("", call("lookup_customer", email="bob@example.com")),
                           "Bob has 3 open orders."])
    sens = SensitivitySettings(supervisor=Supervisor(model=judge))
    agent = Agent(model, tools=[lookup_customer],
                  options=AgentOptions(judgement=Judgement(assess=None,
                                                                      sensitive=sens)))
    result = await agent.run("Orders of bob@example.com?")
    await judge.aclose()
    assert result.text == "Bob has 3 open orders."
    body = server.requests[0]
    assert body["model"] == "judge"
    assert "Tool: lookup_customer" in body["messages"][1]["content"]
    assert result.usage.input_tokens >= 50


def test_cli_keeps_a_secret_out_of_the_model_and_output(server: OpenAIServer,
                                                        tmp_path: Path) -> None:
    server.clear()
    server.enqueue(Reply(body=completion(tool_calls=[("read_file", {"path": ".env"})])),
                   Reply(body=completion(APPROVE)),
                   Reply(body=completion("I was not allowed to read .env.")))
    proc = thinkloop_cli("run", f"My token is {KEY}; check the .env file", "--model",
                         "openai:fake", "--judgement", "sensitive", "--approve", "deny",
                         "--json", env={"OPENAI_BASE_URL": server.base_url,
                                        "THINKLOOP_HOME": str(tmp_path)})
    # Its only tool call was refused: the run ends, with the refusals' own exit code.
    assert proc.returncode == 10, proc.stderr
    out = json.loads(proc.stdout)
    assert out["output"] == "I was not allowed to read .env."
    assert "Not approved" in out["steps"][0]["results"][0]["content"]
    assert [r["tool"] for r in out["refused"]] == ["read_file"]
    assert KEY not in proc.stdout and KEY not in proc.stderr
    assert KEY not in json.dumps(server.requests)
