"""Every section of the one Settings is set from thinkloop.toml and from the environment and is
shown by ``thinkloop config`` (a real process); model providers get the typed ``[models]``
section, read once at the edge, with its keys kept secret until they go on the wire."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from thinkloop.agent import Agent, AgentOptions
from thinkloop.core.settings import (
    GatewaySettings,
    HostSettings,
    ProviderSettings,
    Settings,
    ToolSettings,
    WorkerSettings,
    describe,
    env_names,
    load_settings,
)
from thinkloop.models.registry import default_registry, resolve_model
from thinkloop.models.scripted import ScriptedModel
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

SECTIONS: dict[str, type] = {"tools": ToolSettings, "models": ProviderSettings,
                             "gateway": GatewaySettings, "worker": WorkerSettings,
                             "host": HostSettings}


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def _config(cwd: Path, env: dict[str, str]) -> dict[str, dict[str, object]]:
    """``thinkloop config --json`` as a user runs it, in ``cwd``, with only ``env`` set of
    thinkloop's variables."""
    ours = {n for names in env_names().values() for n in names}
    base = {k: v for k, v in os.environ.items()
            if k not in ours and not k.startswith(("THINKLOOP_", "TELEGRAM_", "SLACK_"))}
    proc = subprocess.run([sys.executable, "-m", "thinkloop", "config", "--json"], cwd=cwd,
                          env={**base, **env}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, dict[str, object]] = json.loads(proc.stdout)
    return out


def test_every_setting_of_every_section_has_a_variable_and_a_row(tmp_path: Path) -> None:
    names = env_names()
    rows = {name for name, _, _ in describe(load_settings(env={}, cwd=tmp_path))}
    keys = [n for n in Settings.model_fields if n not in (*SECTIONS, "channels")]
    keys += [f"{group}.{n}" for group, cls in SECTIONS.items() for n in cls.model_fields]
    assert [k for k in keys if k not in names] == []
    assert [k for k in keys if k not in rows] == []


def test_each_section_comes_from_toml_and_environment_and_config_shows_it(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    (tmp_path / "thinkloop.toml").write_text(
        'model = "ollama:llama3.2"\n'
        "[tools]\nshell_timeout_s = 5\n"
        '[models]\nanthropic_api_key = "sk-ant-from-the-toml-file-9876"\nlocal_n_ctx = 2048\n'
        "[gateway]\nport = 9100\n"
        "[worker]\nconcurrency = 7\n"
        "[channels.telegram]\nmax_messages = 4\n")
    env = {"THINKLOOP_HOME": str(home), "THINKLOOP_TIMEOUT_S": "45",
           "THINKLOOP_TOOLS_GREP_MAX_MATCHES": "9", "OPENAI_API_KEY": "sk-env-secret-value-1234",
           "THINKLOOP_LOCAL_THREADS": "2", "THINKLOOP_GATEWAY_MAX_RUNS": "5",
           "THINKLOOP_WORKER_LEASE_S": "3.5", "TELEGRAM_BOT_TOKEN": "123:telegram-secret-abcd"}
    out = _config(tmp_path, env)
    shown = {k: (v["value"], v["source"]) for k, v in out.items()}
    toml, environment = "thinkloop.toml", "environment"
    assert shown["model"] == ("ollama:llama3.2", toml)
    assert shown["timeout_s"] == (45.0, environment)
    assert shown["tools.shell_timeout_s"] == (5.0, toml)
    assert shown["tools.grep_max_matches"] == (9, environment)
    assert shown["models.anthropic_api_key"] == ("****9876", toml)
    assert shown["models.openai_api_key"] == ("****1234", environment)
    assert shown["models.local_n_ctx"] == (2048, toml)
    assert shown["models.local_threads"] == (2, environment)
    assert shown["models.local_cache_dir"] == (str(home / "cache" / "llama"), "default")
    assert shown["gateway.port"] == (9100, toml)
    assert shown["gateway.max_runs"] == (5, environment)
    assert shown["worker.concurrency"] == (7, toml)
    assert shown["worker.lease_s"] == (3.5, environment)
    assert shown["channels.telegram.max_messages"] == (4, toml)
    assert shown["channels.telegram.token"] == ("****abcd", environment)
    text = json.dumps(out)
    assert not any(s in text for s in ("from-the-toml", "secret-value", "telegram-secret"))


def test_a_provider_factory_gets_the_typed_section_the_agent_read(tmp_path: Path) -> None:
    (tmp_path / "thinkloop.toml").write_text(
        '[models]\nopenai_api_key = "sk-toml-0123456789"\nmax_attempts = 5\n')
    settings = load_settings(env={"THINKLOOP_HOME": str(tmp_path)}, cwd=tmp_path)
    seen: list[ProviderSettings] = []

    def mine(name: str, given: ProviderSettings) -> ScriptedModel:
        seen.append(given)
        return ScriptedModel([], name=f"mine:{name}")

    registry = default_registry()
    registry.register("mine", mine)
    # A factory written for the old variables dict still reads its key.
    registry.register("old", lambda _, env: ScriptedModel([], name=env.get("OPENAI_API_KEY")))
    Agent("mine:m", store="memory",
          options=AgentOptions(config=settings, model_registry=registry))
    assert seen == [settings.models]
    assert isinstance(seen[0].openai_api_key, SecretStr) and seen[0].max_attempts == 5
    assert "sk-toml" not in repr(settings)
    assert registry.resolve("old:x", settings.models).name == "sk-toml-0123456789"
    openai = registry.resolve("openai:x", settings.models)
    assert openai.retry.max_attempts == 5  # type: ignore[attr-defined]  # from the toml
    assert resolve_model("openai:x", settings.models).name == "openai:x"


def test_a_key_from_the_toml_goes_on_the_wire_and_nowhere_else(
        tmp_path: Path, server: OpenAIServer) -> None:
    server.clear()
    server.enqueue(Reply(body=completion("Paris")))
    (tmp_path / "thinkloop.toml").write_text(
        f'[models]\nopenai_api_key = "sk-toml-wire-0123456789"\n'
        f'openai_base_url = "{server.base_url}"\nopenai_model = "fake"\n')
    settings = load_settings(env={"THINKLOOP_HOME": str(tmp_path)}, cwd=tmp_path)
    agent = Agent(store="memory", options=AgentOptions(config=settings))
    result = agent.run_sync("Capital of France?")
    assert result.output == "Paris" and agent.model.name == "openai:fake"
    assert server.headers[0]["authorization"] == "Bearer sk-toml-wire-0123456789"
    assert settings.models.get("OPENAI_API_KEY") == "sk-toml-wire-0123456789"
    assert "sk-toml-wire" not in repr(settings.models)


def test_the_hosts_settings_from_the_docs_toml_and_environment(tmp_path: Path) -> None:
    """docs/container.md's ``[host]`` example, as written, is what ``thinkloop config`` shows;
    a variable overrides it."""
    doc = (Path(__file__).parents[1] / "docs" / "container.md").read_text()
    toml = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    assert toml.startswith("[host]")
    (tmp_path / "thinkloop.toml").write_text(toml)
    out = _config(tmp_path, {"THINKLOOP_HOME": str(tmp_path / "home"),
                             "THINKLOOP_HOST_RETRIES": "2"})
    shown = {k: (v["value"], v["source"]) for k, v in out.items() if k.startswith("host.")}
    assert shown["host.engine"] == ("podman", "thinkloop.toml")
    assert shown["host.notify"] == (["telegram:{chat}"], "thinkloop.toml")
    assert shown["host.retries"] == (2, "environment")
    assert shown["host.timeout_s"] == (1800.0, "default")


def test_the_hosts_chats_are_a_comma_list_in_the_environment(tmp_path: Path) -> None:
    """As docs/cli.md's table says: ``THINKLOOP_HOST_NOTIFY`` is comma separated (as
    ``THINKLOOP_FALLBACKS`` is); a JSON list is read too."""
    for value in ("telegram:42, slack:C1", '["telegram:42", "slack:C1"]'):
        out = _config(tmp_path, {"THINKLOOP_HOST_NOTIFY": value})
        assert out["host.notify"]["value"] == ["telegram:42", "slack:C1"]
        assert out["host.notify"]["source"] == "environment"
