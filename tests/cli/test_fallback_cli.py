"""Provider fallbacks from the command line and the settings: ``thinkloop run --fallback``
(repeatable, in order), ``THINKLOOP_FALLBACKS`` / ``fallbacks`` in thinkloop.toml, and the
``thinkloop config`` row. Real processes against two loopback model servers: ``openai:``
models reach the first, ``compat:`` ones the second."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import thinkloop  # tests/cli is on sys.path (rootdir, no package)

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

DOWN = Reply(status=500, body={"error": {"message": "upstream down"}})


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[OpenAIServer, OpenAIServer]]:
    with OpenAIServer() as first, OpenAIServer() as second:
        yield first, second


def _env(first: OpenAIServer, second: OpenAIServer, **extra: str) -> dict[str, str]:
    return {"OPENAI_BASE_URL": first.base_url, "OPENAI_API_KEY": "sk-test",
            "THINKLOOP_BASE_URL": second.base_url, **extra}


def test_run_fallback_answers_when_the_model_fails(
        servers: tuple[OpenAIServer, OpenAIServer]) -> None:
    first, second = servers
    first.clear()
    second.clear()
    first.enqueue(*[DOWN] * 3)  # the model's own retries, all failing
    second.enqueue(Reply(body=completion("Answered by the fallback.")))
    proc = thinkloop("run", "Say hello", "--model", "openai:fake", "--fallback", "compat:fake",
                     "--tools", "none", "--json", env=_env(first, second))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "completed" and out["text"] == "Answered by the fallback."
    assert len(first.requests) == 3 and len(second.requests) == 1


def test_fallbacks_are_tried_in_the_order_given(
        servers: tuple[OpenAIServer, OpenAIServer]) -> None:
    first, second = servers
    first.clear()
    second.clear()
    # The model fails, then the first fallback (another model on the same server) fails too.
    first.enqueue(*[DOWN] * 6)
    second.enqueue(Reply(body=completion("Third time lucky.")))
    proc = thinkloop("run", "Say hello", "--model", "openai:fake", "--fallback", "openai:other",
                     "--fallback", "compat:fake", "--tools", "none", "--json",
                     env=_env(first, second))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["text"] == "Third time lucky."
    assert [r["model"] for r in first.requests] == ["fake"] * 3 + ["other"] * 3
    assert len(second.requests) == 1


def test_without_a_fallback_the_failure_is_the_answer(
        servers: tuple[OpenAIServer, OpenAIServer]) -> None:
    first, second = servers
    first.clear()
    second.clear()
    first.enqueue(*[DOWN] * 3)
    proc = thinkloop("run", "Say hello", "--model", "openai:fake", "--tools", "none",
                     env=_env(first, second))
    assert proc.returncode != 0 and "500" in proc.stderr
    assert second.requests == []


def test_the_setting_gives_fallbacks_from_the_environment_and_the_toml(
        servers: tuple[OpenAIServer, OpenAIServer], tmp_path: Path) -> None:
    first, second = servers
    first.clear()
    second.clear()
    first.enqueue(*[DOWN] * 3)
    second.enqueue(Reply(body=completion("From the setting.")))
    env = _env(first, second, THINKLOOP_FALLBACKS="compat:fake")
    proc = thinkloop("run", "Say hello", "--model", "openai:fake", "--tools", "none", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "From the setting.\n"
    shown = json.loads(thinkloop("config", "--json", env=env).stdout)
    assert shown["fallbacks"] == {"value": ["compat:fake"], "source": "environment"}
    env = _env(first, second, THINKLOOP_FALLBACKS="compat:a, compat:b")
    shown = json.loads(thinkloop("config", "--json", env=env).stdout)
    assert shown["fallbacks"]["value"] == ["compat:a", "compat:b"]
    home = tmp_path / "home"
    home.mkdir()
    (home / "thinkloop.toml").write_text('fallbacks = ["anthropic:claude-haiku-4-5"]\n')
    shown = json.loads(thinkloop("config", "--json", env={"THINKLOOP_HOME": str(home)}).stdout)
    assert shown["fallbacks"] == {"value": ["anthropic:claude-haiku-4-5"],
                                  "source": "thinkloop.toml"}
    shown = json.loads(thinkloop("config", "--json", env={"THINKLOOP_HOME": str(tmp_path)})
                       .stdout)
    assert shown["fallbacks"] == {"value": [], "source": "default"}
