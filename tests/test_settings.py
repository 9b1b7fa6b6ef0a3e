"""The one Settings: sources in order arguments > environment > thinkloop.toml > defaults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.tools.helpers import approving

from thinkloop.agent import Agent, AgentOptions
from thinkloop.errors import ConfigError
from thinkloop.models.scripted import ScriptedModel, reply
from thinkloop.models.scripted import call as model_call
from thinkloop.settings import Settings, describe, load_settings
from thinkloop.spotlight import unwrap
from thinkloop.tools.builtin import Toolbox

SRC = Path(__file__).resolve().parents[1] / "src" / "thinkloop"

TOML = """
model = "ollama:from-toml"
timeout_s = 30
protocol = "json"

[models]
openai_base_url = "http://toml.invalid/v1"
max_attempts = 5

[tools]
shell_timeout_s = 11
fetch_timeout_s = 12
grep_max_matches = 13
"""


def test_arguments_beat_environment_beat_toml_beat_defaults(tmp_path: Path) -> None:
    (tmp_path / "thinkloop.toml").write_text(TOML)
    env = {"THINKLOOP_TIMEOUT_S": "40", "THINKLOOP_TOOLS_SHELL_TIMEOUT_S": "21",
           "THINKLOOP_TOOLS_FETCH_TIMEOUT_S": "22", "OPENAI_BASE_URL": "http://env.invalid/v1",
           "THINKLOOP_HOME": str(tmp_path / "home")}
    s = load_settings({"tools.shell_timeout_s": 31, "protocol": "tags"}, env=env, cwd=tmp_path)
    assert (s.model, s.timeout_s, s.protocol, s.tool_timeout_s) == (
        "ollama:from-toml", 40.0, "tags", 60.0)
    assert (s.tools.shell_timeout_s, s.tools.fetch_timeout_s, s.tools.grep_max_matches) == (
        31.0, 22.0, 13)
    assert (s.models.openai_base_url, s.models.max_attempts) == ("http://env.invalid/v1", 5)
    assert {k: s.origin(k) for k in ("model", "timeout_s", "protocol", "tool_timeout_s",
                                     "tools.shell_timeout_s", "tools.fetch_timeout_s",
                                     "tools.grep_max_matches", "models.openai_base_url",
                                     "models.max_attempts", "home")} == {
        "model": "thinkloop.toml", "timeout_s": "environment", "protocol": "argument",
        "tool_timeout_s": "default", "tools.shell_timeout_s": "argument",
        "tools.fetch_timeout_s": "environment", "tools.grep_max_matches": "thinkloop.toml",
        "models.openai_base_url": "environment", "models.max_attempts": "thinkloop.toml",
        "home": "environment"}


def test_the_toml_in_the_working_directory_wins_over_the_one_in_the_home(
    tmp_path: Path,
) -> None:
    home, cwd = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    cwd.mkdir()
    (home / "thinkloop.toml").write_text('model = "ollama:home"\n')
    env = {"THINKLOOP_HOME": str(home)}
    assert load_settings(env=env, cwd=cwd).model == "ollama:home"
    (cwd / "thinkloop.toml").write_text('model = "ollama:project"\n')
    assert load_settings(env=env, cwd=cwd).model == "ollama:project"


def test_the_home_moves_the_store_and_the_tools_workspace(tmp_path: Path) -> None:
    s = load_settings(env={"THINKLOOP_HOME": str(tmp_path)}, cwd=tmp_path)
    assert s.tools.workspace == tmp_path / "workspaces" / "thinkloop"
    assert s.store_location == str(tmp_path / "thinkloop.db")
    assert s.origin("tools.workspace") == "default"
    url = load_settings(env={"THINKLOOP_HOME": str(tmp_path),
                             "THINKLOOP_DATABASE_URL": "postgresql://h/db"}, cwd=tmp_path)
    assert url.store_location == "postgresql://h/db"
    own = load_settings({"tools.workspace": tmp_path / "workspaces" / "ws"},
                        env={"THINKLOOP_HOME": str(tmp_path)}, cwd=tmp_path)
    assert own.tools.workspace == tmp_path / "workspaces" / "ws"


@pytest.mark.parametrize(("where", "clash"), [
    ("home", "holds"), ("home-parent", "holds"), ("inside-home", "is inside")])
def test_a_tools_workspace_that_holds_or_lies_inside_the_home_is_a_config_error(
    tmp_path: Path, where: str, clash: str
) -> None:
    # Not only `run --workspace`: the variable and the library's own Settings are refused alike
    # (the model would get the store and the agent's own bootstrap files to edit).
    home = tmp_path / "home"
    chosen = {"home": home, "home-parent": tmp_path,
              "inside-home": home / "agents" / "thinkloop"}[where]
    chosen.mkdir(parents=True, exist_ok=True)
    why = (f"{chosen} {clash} THINKLOOP_HOME ({home.resolve()}); choose the project's own "
           "directory, or set THINKLOOP_HOME outside it")
    env = {"THINKLOOP_HOME": str(home), "THINKLOOP_TOOLS_WORKSPACE": str(chosen)}
    with pytest.raises(ConfigError) as caught:
        load_settings(env=env, cwd=tmp_path)
    assert str(caught.value) == f"invalid settings: tools.workspace (environment): {why}"
    with pytest.raises(ConfigError, match=re.escape(f"tools.workspace (argument): {why}")):
        load_settings({"tools.workspace": chosen}, env={"THINKLOOP_HOME": str(home)},
                      cwd=tmp_path)
    with pytest.raises(ValueError, match=re.escape(why)):
        Settings(home=home, tools={"workspace": chosen})


def test_the_homes_own_workspaces_folder_and_a_folder_beside_it_are_allowed(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    for chosen in (home / "workspaces", home / "workspaces" / "team", tmp_path / "project"):
        s = load_settings(env={"THINKLOOP_HOME": str(home),
                               "THINKLOOP_TOOLS_WORKSPACE": str(chosen)}, cwd=tmp_path)
        assert s.tools.workspace == chosen


async def test_the_file_tools_write_under_thinkloop_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("THINKLOOP_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("THINKLOOP_TOOLS_WORKSPACE", raising=False)
    monkeypatch.setenv("THINKLOOP_TOOLS_SANDBOX", "none")
    async with Toolbox(browser=False, sub_agents=False) as box:
        model = ScriptedModel([reply("", model_call("write_file", path="a.txt", content="hi")),
                               "done"])
        result = await Agent(model, tools=box.tools, guard=approving()).run("write", user_id="ana")
    assert unwrap(result.steps[0].results[0].content) == "wrote 2 bytes to a.txt"
    written = tmp_path / "home" / "workspaces" / "thinkloop" / "ana" / "a.txt"
    assert written.read_text() == "hi"


def test_the_agent_takes_its_model_and_store_from_the_settings(tmp_path: Path) -> None:
    config = load_settings(env={"OPENAI_API_KEY": "sk-test", "OPENAI_MODEL": "gpt-x",
                                "THINKLOOP_HOME": str(tmp_path)}, cwd=tmp_path)
    agent = Agent(options=AgentOptions(config=config))
    assert agent.model.name == "openai:gpt-x"
    assert getattr(agent.store, "path", None) == str(tmp_path / "thinkloop.db")
    assert load_settings(env={"ANTHROPIC_API_KEY": "a"}, cwd=tmp_path).model_spec() == (
        "anthropic:claude-haiku-4-5")


def test_bad_values_and_unknown_names_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"timeout_s \(environment\): Input should be a"):
        load_settings(env={"THINKLOOP_TIMEOUT_S": "soon"}, cwd=tmp_path)
    (tmp_path / "thinkloop.toml").write_text("[tools]\nshel_timeout_s = 3\n")
    with pytest.raises(ConfigError, match=r"tools\.shel_timeout_s \(thinkloop\.toml\)"):
        load_settings(env={}, cwd=tmp_path)
    (tmp_path / "thinkloop.toml").write_text("model = \n")
    with pytest.raises(ConfigError, match=r"thinkloop\.toml"):
        load_settings(env={}, cwd=tmp_path)


def test_describe_masks_secrets_and_says_where_each_came_from(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-live-0123456789abcd",
           "THINKLOOP_DATABASE_URL": "postgresql://app:hunter2@db:5432/tl"}
    rows = {name: (value, origin) for name, value, origin in
            describe(load_settings(env=env, cwd=tmp_path))}
    assert rows["models.openai_api_key"] == ("****abcd", "environment")
    assert rows["database_url"] == ("postgresql://app:****@db:5432/tl", "environment")
    assert rows["models.anthropic_api_key"] == (None, "default")
    assert rows["timeout_s"] == (600.0, "default")


def test_only_settings_reads_the_environment() -> None:
    pattern = re.compile(r"os\.environ|getenv")
    readers = [f"{p.relative_to(SRC)}:{n}" for p in sorted(SRC.rglob("*.py"))
               if p.name != "settings.py" or p.parent != SRC / "core"
               for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert readers == []


def test_the_readme_toml_example_loads(tmp_path: Path) -> None:
    readme = (SRC.parents[1] / "docs" / "cli.md").read_text()
    block = re.search(r"^```toml\n(.*?)^```", readme, re.S | re.M)
    assert block is not None
    (tmp_path / "thinkloop.toml").write_text(block.group(1))
    s = load_settings(env={}, cwd=tmp_path)
    assert (s.model, s.timeout_s, s.tools.shell_timeout_s) == ("ollama:llama3.2", 300.0, 30.0)
    assert s.models.openai_base_url == "http://127.0.0.1:8000/v1"
    assert s.origin("tools.sandbox") == "thinkloop.toml"


def test_the_gateway_group_comes_from_toml_environment_and_flags(tmp_path: Path) -> None:
    from thinkloop.server.config import GatewayConfig

    (tmp_path / "thinkloop.toml").write_text("[gateway]\nport = 9100\nkeep_runs = 10\n")
    env = {"THINKLOOP_GATEWAY_MAX_RUNS": "5", "THINKLOOP_HOME": str(tmp_path)}
    s = load_settings({"gateway.per_user_runs": 2, "gateway.host": None}, env=env, cwd=tmp_path)
    config = GatewayConfig.from_settings(s, no_auth=True)
    assert (config.host, config.port, config.max_runs, config.per_user_runs,
            config.keep_runs, config.approval_timeout_s) == ("127.0.0.1", 9100, 5, 2, 10, 300.0)
    assert [s.origin(f"gateway.{k}") for k in ("host", "port", "max_runs", "per_user_runs")] == [
        "default", "thinkloop.toml", "environment", "argument"]
    with pytest.raises(ConfigError, match=r"gateway\.max_runs \(environment\)"):
        load_settings(env={**env, "THINKLOOP_GATEWAY_MAX_RUNS": "0"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="gateway settings: per_user_runs"):
        GatewayConfig(per_user_runs=0)


def test_command_flags_join_the_settings_as_arguments(tmp_path: Path) -> None:
    from thinkloop.cli.build import AgentOptions, build_agent

    s = load_settings(env={"THINKLOOP_HOME": str(tmp_path), "THINKLOOP_PROTOCOL": "json",
                           "THINKLOOP_MAX_STEPS": "9"}, cwd=tmp_path)
    agent = build_agent(AgentOptions(model="ollama:flagged", max_steps=4, tools="none"), s)
    c = agent.config
    assert (agent.model.name, agent.limits.max_steps, agent.protocol.name) == (
        "ollama:flagged", 4, "json")
    assert [c.origin(k) for k in ("model", "max_steps", "protocol", "timeout_s")] == [
        "argument", "argument", "environment", "default"]
    assert s.with_arguments({"model": None}) is s
    with pytest.raises(ConfigError, match=r"max_steps \(argument\)"):
        s.with_arguments({"max_steps": "many"})


async def test_ask_human_waits_as_long_as_the_setting_says(tmp_path: Path) -> None:
    from thinkloop.core.channel import Outgoing
    from thinkloop.settings import ToolSettings

    asked: list[float] = []

    class Person:
        name = "person"

        async def send(self, message: Outgoing) -> None:
            raise AssertionError("ask_human asks, it does not send")

        async def ask(self, message: Outgoing, timeout_s: float) -> str:
            asked.append(timeout_s)
            return "blue"

    settings = ToolSettings(workspace=tmp_path, ask_timeout_s=42.0, sandbox="none")
    box = Toolbox(settings, channels=[Person()], browser=False, sub_agents=False)
    model = ScriptedModel([reply("", model_call("ask_human", question="Which colour?")),
                           "Blue, then."])
    result = await Agent(model, tools=box.tools).run("Paint the shed in the colour I like.")
    assert result.output == "Blue, then." and asked == [42.0]
    assert unwrap(result.steps[0].results[0].content) == "The user answered: blue"
    assert next(t for t in box.tools if t.name == "ask_human").timeout_s == 47.0


def test_the_two_kinds_of_settings_mixed_up_are_one_clear_error_at_construction() -> None:
    from thinkloop.models.base import ModelSettings

    settings = load_settings({"home": "/tmp/nowhere-used"})
    with pytest.raises(ConfigError, match=r"settings= takes ModelSettings .* got Settings; "
                                          r"thinkloop's Settings go in config="):
        Agent(ScriptedModel(["hi"]), options=AgentOptions(settings=settings))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"config= takes thinkloop's Settings .* got "
                                          r"ModelSettings; per-call ModelSettings go in"):
        Agent(ScriptedModel(["hi"]), options=AgentOptions(config=ModelSettings()))  # type: ignore[arg-type]
    agent = Agent(ScriptedModel(["hi"]), store="memory",
                  options=AgentOptions(settings=ModelSettings(temperature=0.2), config=settings))
    assert agent.settings.temperature == 0.2 and agent.config is settings


def test_channel_settings_come_from_toml_and_environment_and_tokens_are_masked(
        tmp_path: Path) -> None:
    from thinkloop.channels.config import TelegramSettings, channel_settings

    (tmp_path / "thinkloop.toml").write_text(
        "[channels.telegram]\nagent = \"helper\"\nmax_messages = 4\n"
        "[channels.telegram.missions.42]\ninstructions = \"Chess club\"\n")
    env = {"THINKLOOP_HOME": str(tmp_path), "TELEGRAM_BOT_TOKEN": "123456:secret-token-value",
           "THINKLOOP_CHANNELS_TELEGRAM_API_URL": "http://127.0.0.1:8081/bot",
           "THINKLOOP_CHANNELS_TELEGRAM_ALLOW_USERS": '["7", "8"]'}
    s = load_settings(env=env, cwd=tmp_path)
    tg = channel_settings(s, "telegram")
    assert isinstance(tg, TelegramSettings)
    assert (tg.agent, tg.max_messages, tg.allow_users) == ("helper", 4, ["7", "8"])
    assert tg.api_url == "http://127.0.0.1:8081/bot" and tg.files() == \
        "http://127.0.0.1:8081/file/bot"
    assert tg.missions["42"].instructions == "Chess club"
    assert tg.token is not None and "secret-token-value" not in repr(tg)
    shown = {k: (v, o) for k, v, o in describe(s)}
    assert shown["channels.telegram.token"] == ("****alue", "environment")
    assert shown["channels.telegram.max_messages"] == (4, "thinkloop.toml")
    with pytest.raises(ConfigError, match=r"channels\.telegram: max_messages: Input should"):
        channel_settings(load_settings(env={**env, "THINKLOOP_CHANNELS_TELEGRAM_MAX_MESSAGES":
                                            "0"}, cwd=tmp_path), "telegram")
