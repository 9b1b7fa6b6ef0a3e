"""The same scripted task solved under every protocol, with identical tool executions."""

from __future__ import annotations

from typing import Any

import pytest

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.models.scripted import ScriptedModel, call, reply
from thinkloop.tools.base import Tool, tool
from thinkloop.types import Message

TASK = "What is one SOL worth in EUR?"
ANSWER = "One SOL is worth 131.1 EUR."
EXECUTED = [("lookup_price", {"symbol": "SOL"}), ("convert", {"amount": 142.5,
                                                              "currency": "EUR"})]

# Each protocol's replies for: look up the price, convert it, answer.
SCRIPTS: dict[str, list[Any]] = {
    "native": [
        reply("", call("lookup_price", symbol="SOL")),
        reply("", call("convert", amount=142.5, currency="EUR")),
        ANSWER,
    ],
    "json": [
        '{"reasoning": "I need the USD price first.", "tools": [{"name": "lookup_price", '
        '"arguments": {"symbol": "SOL"}}], "completed": false}',
        '{"reasoning": "Now convert 142.5 USD.", "tools": [{"name": "convert", "arguments": '
        '{"amount": 142.5, "currency": "EUR"}}], "completed": false}',
        '{"reasoning": "Done.", "tools": [], "completed": true, "answer": "' + ANSWER + '"}',
    ],
    "tags": [
        "<<THINK>>I need the USD price first.<</THINK>>\n<<TOOL:LOOKUP_PRICE:SOL>>",
        '<<THINK>>Now convert.<</THINK>>\n<<TOOL:convert:{"amount": 142.5, "currency": "EUR"}>>',
        "<<THINK>>Done.<</THINK>>\n" + ANSWER,
    ],
    "xml": [
        '<think>I need the USD price first.</think>\n<tool_call>\n{"name": "lookup_price", '
        '"arguments": {"symbol": "SOL"}}\n</tool_call>',
        "<tool_call>\n<function=convert>\n<parameter=amount>\n142.5\n</parameter>\n"
        "<parameter=currency>\nEUR\n</parameter>\n</function>\n</tool_call>",
        "<think>Done.</think>\n" + ANSWER,
    ],
}
# A first reply that tries to call a tool but cannot be read.
MALFORMED = {
    "json": '{"reasoning": "price", "tools": [{"name": "lookup_price", "arguments": '
            '{"symbol": SOL}}], "completed": false}',
    "tags": "<<TOOL:LOOKUP_PRICE:SOL",
    "xml": "<tool_call>lookup_price with symbol SOL</tool_call>",
}


def make_tools(executed: list[tuple[str, dict[str, Any]]]) -> list[Tool]:
    @tool
    async def lookup_price(symbol: str) -> str:
        """Look up the current USD price of a token.

        Args:
            symbol: The token's ticker, e.g. SOL.
        """
        executed.append(("lookup_price", {"symbol": symbol}))
        return "142.5 USD"

    @tool
    async def convert(amount: float, currency: str) -> str:
        """Convert a USD amount into another currency."""
        executed.append(("convert", {"amount": amount, "currency": currency}))
        return "131.1 EUR"

    return [lookup_price, convert]


def observations(protocol: str, messages: tuple[Message, ...]) -> list[str]:
    role = "tool" if protocol == "native" else "user"
    return [m.content for m in messages if m.role == role][1 if role == "user" else 0:]


@pytest.mark.parametrize("protocol", ["native", "json", "tags", "xml"])
async def test_same_task_same_executions_under_every_protocol(protocol: str) -> None:
    executed: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel(SCRIPTS[protocol])
    agent = Agent(model, tools=make_tools(executed), guard=False,
                  options=AgentOptions(protocol=protocol))
    result = await agent.run(TASK)
    assert result.status == "completed"
    assert executed == EXECUTED
    assert result.text == result.output == ANSWER
    assert len(result.steps) == 3
    assert [[(c.name, c.arguments) for c in s.tool_calls] for s in result.steps] == [
        [EXECUTED[0]], [EXECUTED[1]], []]
    ids = [c.id for s in result.steps for c in s.tool_calls]
    assert len(set(ids)) == 2
    assert [r.content for s in result.steps for r in s.results] == ["142.5 USD", "131.1 EUR"]
    first = model.calls[0]
    if protocol == "native":
        assert [t.name for t in first.tools] == ["lookup_price", "convert"]
        assert observations(protocol, result.messages) == ["142.5 USD", "131.1 EUR"]
    else:
        assert first.tools == ()  # text protocols describe tools in the prompt only
        system = first.messages[0].content
        assert "lookup_price" in system and "Example, calling lookup_price" in system
        assert observations(protocol, result.messages) == [
            "[Tool lookup_price]: 142.5 USD", "[Tool convert]: 131.1 EUR"]


@pytest.mark.parametrize("protocol", ["json", "tags", "xml"])
async def test_malformed_call_is_reported_and_costs_one_step(protocol: str) -> None:
    executed: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel([MALFORMED[protocol], *SCRIPTS[protocol]])
    agent = Agent(model, tools=make_tools(executed), guard=False,
                  options=AgentOptions(protocol=protocol))
    result = await agent.run(TASK)
    assert result.status == "completed"
    assert result.text == ANSWER
    assert executed == EXECUTED  # nothing ran twice, nothing ran from the broken reply
    assert len(result.steps) == 4
    assert result.steps[0].tool_calls == () and result.steps[0].text == MALFORMED[protocol]
    feedback = model.calls[1].messages[-1]
    assert feedback.role == "user"
    assert feedback.content.startswith("Your last reply looked like a tool call")
    assert agent.protocol.format_hint in feedback.content  # type: ignore[attr-defined]


async def test_auto_runs_a_text_call_from_a_model_without_function_calling() -> None:
    executed: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedModel([SCRIPTS["xml"][0], reply("", call("convert", amount=142.5,
                                                             currency="EUR")), ANSWER])
    result = await Agent(model, tools=make_tools(executed), guard=False,
                         options=AgentOptions(protocol="auto")).run(TASK)
    assert executed == EXECUTED
    assert result.text == ANSWER
    roles = [m.role for m in result.messages]
    # the parsed call is answered in a user message, the native one in a tool message
    assert roles == ["user", "assistant", "user", "assistant", "tool", "assistant"]


async def test_final_answer_is_sanitized() -> None:
    raw = ("<think>done</think>\n<final>" + ANSWER + "</final>\n\n" + ANSWER)
    result = await Agent(ScriptedModel([raw]), guard=False,
                         options=AgentOptions(protocol="native")).run(TASK)
    assert result.text == result.output == ANSWER
    assert result.silent is False


@pytest.mark.parametrize("protocol", ["native", "json", "xml"])
async def test_no_reply_makes_the_run_silent(protocol: str) -> None:
    text = ('{"reasoning": "nothing to say", "tools": [], "completed": true, '
            '"answer": "NO_REPLY"}' if protocol == "json" else "NO_REPLY")
    result = await Agent(ScriptedModel([text]), guard=False,
                         options=AgentOptions(protocol=protocol)).run(TASK)
    assert result.status == "completed"
    assert result.silent is True
    assert result.text == "" and result.output == ""
    assert result.to_dict()["silent"] is True
