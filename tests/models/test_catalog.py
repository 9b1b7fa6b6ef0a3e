"""The one model catalog: window, price, input kinds and size class per model, forwarded through
every wrapper; prices from genai-prices, an unknown price recorded as unknown (never $0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from thinkloop import Agent
from thinkloop.agent import AgentOptions
from thinkloop.context.focus import is_small
from thinkloop.context.pipeline import settings_for
from thinkloop.core.errors import ConfigError
from thinkloop.guard import GuardSettings
from thinkloop.guard.usage import UsageLimits
from thinkloop.models.catalog import facts, facts_of
from thinkloop.models.local import LocalModel
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.pricing import priced
from thinkloop.models.scripted import ScriptedModel
from thinkloop.models.wrappers import FallbackModel, OverflowRecovery
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion
from thinkloop.tracing import Tracing
from thinkloop.types import Message, ModelResponse, Usage


def test_the_local_models_configured_window_holds_behind_every_wrapper(tmp_path: Path) -> None:
    local = LocalModel(tmp_path / "model.gguf", n_ctx=16_384)
    wrapped = Tracing().wrap(OverflowRecovery(local))
    assert (facts_of(wrapped).window, facts_of(wrapped).size) == (16_384, "large")
    assert settings_for(wrapped).context_window == 16_384
    assert not is_small(wrapped)  # the name alone says 4096: a small model
    assert facts("local").window == 4096 and is_small(OverflowRecovery(
        LocalModel(tmp_path / "model.gguf")))
    assert facts_of(FallbackModel([wrapped, ScriptedModel([])])).window == 16_384


@pytest.mark.parametrize("name", ["openai:gpt-5", "openai:o3", "gemini:gemini-2.5-flash",
                                  "openrouter:deepseek/deepseek-chat", "openai:gpt-4o-mini",
                                  "anthropic:claude-sonnet-4-5", "anthropic:claude-3-haiku"])
def test_every_listed_model_has_a_price(name: str) -> None:
    found = facts(name)
    assert found.price is not None and found.price[0] > 0 and found.price[1] > found.price[0]
    assert found.price_source in ("genai-prices", "table")


def test_prices_come_from_genai_prices_and_local_models_are_free() -> None:
    from genai_prices import Usage as GenaiUsage
    from genai_prices import calc_price

    response = ModelResponse(Message.assistant("hi"), Usage(1, 200_000, 10_000), model="gpt-5")
    cost = priced(response, "openai:gpt-5").usage
    expected = calc_price(GenaiUsage(input_tokens=200_000, output_tokens=10_000), "gpt-5",
                          provider_id="openai").total_price
    assert cost.cost_usd == pytest.approx(float(expected)) and cost.cost_known
    assert facts("ollama:llama3.2").price == (0.0, 0.0)
    free = priced(ModelResponse(Message.assistant("hi"), Usage(1, 10, 5), model="llama3.2"),
                  "ollama:llama3.2").usage
    assert (free.cost_usd, free.cost_known) == (0.0, True)


async def test_a_model_with_no_known_price_records_an_unknown_cost() -> None:
    with OpenAIServer() as srv:
        srv.enqueue(Reply(body=completion("hi", model="my-own-model")))
        model = OpenAICompatModel("my-own-model", base_url=srv.base_url, api_key="k",
                                  name="compat:my-own-model")
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exported = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exported))
        agent = Agent(model, plugins=False, store="memory",
                      options=AgentOptions(tracing=Tracing(provider)))
        result = await agent.run("hello")
        await model.aclose()
    assert result.text == "hi"
    spans = exported.get_finished_spans()
    assert spans and all((s.attributes or {}).get("thinkloop.cost") == "unknown"
                         for s in spans if "thinkloop.cost_usd" in (s.attributes or {}))
    assert (result.usage.cost_usd, result.usage.unpriced, result.usage.cost_known) == (
        0.0, 1, False)


def test_a_cost_cap_on_a_model_with_no_price_is_a_config_error() -> None:
    capped = GuardSettings(limits=UsageLimits(max_cost_usd=1.0))

    def served(model_id: str, name: str) -> OpenAICompatModel:  # never called
        return OpenAICompatModel(model_id, base_url="http://127.0.0.1:9/v1", name=name)

    with pytest.raises(ConfigError, match="no known price"):
        Agent(served("my-own-model", "compat:my-own-model"), guard=capped, plugins=False,
              store="memory")
    Agent(served("gpt-5", "openai:gpt-5"), guard=capped, plugins=False,
          store="memory")  # priced: fine
    Agent(ScriptedModel(["ok"], name="mine"), guard=capped, plugins=False, store="memory")
