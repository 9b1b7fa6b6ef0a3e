from pathlib import Path

import pytest

from thinkloop.agent import AgentOptions
from thinkloop.errors import ConfigError, UnknownModelError
from thinkloop.models.anthropic import AnthropicModel
from thinkloop.models.openai_compat import OpenAICompatModel
from thinkloop.models.presets import COMPAT, GEMINI, OPENAI, STRICT, MissingCredentialsError
from thinkloop.models.registry import default_registry, resolve_model
from thinkloop.models.retry import RetryPolicy
from thinkloop.models.scripted import ScriptedModel
from thinkloop.models.wrappers import FallbackModel, OverflowRecovery
from thinkloop.settings import load_settings


def _compat(spec: str, env: dict[str, str]) -> OpenAICompatModel:
    model = default_registry().resolve(spec, env)
    assert isinstance(model, OpenAICompatModel)
    return model


@pytest.mark.parametrize(
    ("spec", "env", "url", "auth", "quirks"),
    [
        ("openai:gpt-4o-mini", {"OPENAI_API_KEY": "k"}, "https://api.openai.com/v1", "k", OPENAI),
        ("openai:smol", {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1/"}, "http://127.0.0.1:9/v1",
         None, COMPAT),
        ("openrouter:meta/llama", {"OPENROUTER_API_KEY": "r"}, "https://openrouter.ai/api/v1",
         "r", STRICT),
        ("ollama:llama3.2", {}, "http://127.0.0.1:11434/v1", None, COMPAT),
        ("ollama:llama3.2", {"OLLAMA_HOST": "gpu-box:11434"}, "http://gpu-box:11434/v1", None,
         COMPAT),
        ("vllm:qwen", {"THINKLOOP_BASE_URL": "http://h:8000/v1", "THINKLOOP_API_KEY": "v"},
         "http://h:8000/v1", "v", COMPAT),
        ("compat:any", {"THINKLOOP_BASE_URL": "http://h:1/v1"}, "http://h:1/v1", None, COMPAT),
        ("gemini:gemini-2.0-flash", {"GEMINI_API_KEY": "g"},
         "https://generativelanguage.googleapis.com/v1beta/openai", "g", GEMINI),
    ],
)
def test_presets_resolve_to_their_endpoint_key_and_quirks(
    spec: str, env: dict[str, str], url: str, auth: str | None, quirks: object
) -> None:
    model = _compat(spec, env)
    assert model.name == spec
    assert model.model_id == spec.split(":", 1)[1]
    assert model.url == f"{url}/chat/completions"
    assert model.headers.get("authorization") == (f"Bearer {auth}" if auth else None)
    assert model.quirks == quirks


def test_openrouter_sends_an_app_title() -> None:
    assert _compat("openrouter:x/y", {"OPENROUTER_API_KEY": "r"}).headers["x-title"] == "thinkloop"


@pytest.mark.parametrize(
    ("spec", "env", "error", "message"),
    [
        ("gpt-4o", {}, UnknownModelError,
         "unknown model provider 'gpt-4o' in 'gpt-4o' (model strings look like 'provider:name')"),
        ("bogus:x", {}, UnknownModelError, "unknown model provider 'bogus' in 'bogus:x'"),
        ("openai:gpt-4o", {}, MissingCredentialsError,
         "model 'openai:gpt-4o' needs OPENAI_API_KEY (or OPENAI_BASE_URL for another server)"),
        ("openrouter:x", {}, MissingCredentialsError, "needs OPENROUTER_API_KEY"),
        ("openai:", {"OPENAI_API_KEY": "k"}, ConfigError,
         "model string 'openai:' needs a model name, e.g. 'openai:gpt-4o-mini'"),
        ("vllm:qwen", {}, MissingCredentialsError,
         "model 'vllm:qwen' needs a base URL: set THINKLOOP_BASE_URL"),
        ("anthropic:claude", {}, MissingCredentialsError, "needs ANTHROPIC_API_KEY"),
        ("anthropic:", {"ANTHROPIC_API_KEY": "a"}, ConfigError, "needs a model name"),
        ("local:/nope/model.gguf", {}, ConfigError, "'local:/nope/model.gguf': no such file"),
        ("openai:x", {"OPENAI_API_KEY": "k", "THINKLOOP_MODEL_MAX_ATTEMPTS": "many"},
         ConfigError, "THINKLOOP_MODEL_MAX_ATTEMPTS: Input should be a valid integer"),
        ("openai:x", {"OPENAI_API_KEY": "k", "THINKLOOP_MODEL_MAX_ATTEMPTS": "0"}, ConfigError,
         "THINKLOOP_MODEL_MAX_ATTEMPTS: Input should be greater than or equal to 1"),
    ],
)
def test_bad_model_strings_and_missing_keys_raise_one_clear_error(
    spec: str, env: dict[str, str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as info:
        resolve_model(spec, env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_attempt_limit_comes_from_the_environment() -> None:
    model = _compat("openai:x", {"OPENAI_API_KEY": "k", "THINKLOOP_MODEL_MAX_ATTEMPTS": "5"})
    assert model.retry == RetryPolicy(max_attempts=5)


def test_resolve_wraps_strings_in_overflow_recovery_and_passes_models_through() -> None:
    model = resolve_model("openai:x", {"OPENAI_API_KEY": "k"})
    assert isinstance(model, OverflowRecovery)
    assert model.name == "openai:x"
    scripted = ScriptedModel([])
    assert resolve_model(scripted) is scripted


def test_anthropic_resolves_through_the_sdk_provider() -> None:
    model = default_registry().resolve("anthropic:claude-haiku-4-5",
                                       {"ANTHROPIC_API_KEY": "a"})
    assert isinstance(model, AnthropicModel)
    assert model.model_id == "claude-haiku-4-5"


def test_fallback_list_skips_models_without_credentials(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    env = {"OLLAMA_HOST": "127.0.0.1:1"}
    model = resolve_model(["openai:a", "anthropic:b", "ollama:c", f"local:{gguf}"], env)
    assert isinstance(model, FallbackModel)
    assert [m.name for m in model.models] == ["ollama:c", f"local:{gguf}"]
    assert model.name == f"ollama:c -> local:{gguf}"
    assert resolve_model(["openai:a", "ollama:c"], env).name == "ollama:c"


def test_fallback_list_with_nothing_usable_says_why() -> None:
    with pytest.raises(ConfigError, match=r"^no usable model in the fallback list: model "
                                          r"'openai:a' needs OPENAI_API_KEY"):
        resolve_model(["openai:a"], {})
    with pytest.raises(UnknownModelError):
        resolve_model(["nope:a", "ollama:b"], {})


@pytest.mark.parametrize(
    ("env", "spec"),
    [
        ({"THINKLOOP_MODEL": "ollama:qwen", "OPENAI_API_KEY": "k"}, "ollama:qwen"),
        ({"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "a"}, "openai:gpt-4o-mini"),
        ({"OPENAI_API_KEY": "k", "OPENAI_MODEL": "gpt-4.1"}, "openai:gpt-4.1"),
        ({"ANTHROPIC_API_KEY": "a"}, "anthropic:claude-haiku-4-5"),
        ({}, "local"),
    ],
)
def test_default_model_selection_order(env: dict[str, str], spec: str) -> None:
    assert load_settings(env=env).model_spec() == spec


async def test_an_agent_resolves_a_registered_provider_prefix() -> None:
    from thinkloop import Agent

    registry = default_registry()
    seen: list[tuple[str, object]] = []

    def house(name: str, env: object) -> ScriptedModel:
        seen.append((name, env))
        return ScriptedModel(["from the house model"])

    registry.register("house", house)
    agent = Agent("house:tiny", plugins=False, store="memory",
                  options=AgentOptions(model_registry=registry))
    result = await agent.run("hi")
    await agent.aclose()
    assert result.text == "from the house model"
    assert [name for name, _ in seen] == ["tiny"]
    with pytest.raises(UnknownModelError, match="house"):
        Agent("house:tiny", plugins=False, store="memory")
