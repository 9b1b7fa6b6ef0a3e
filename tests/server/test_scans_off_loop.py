"""One user's megabyte never stalls another user's requests, through a real gateway (uvicorn).

A 96 KB single-line file once froze a gateway's other users for 43 s: the scan ran on the
event loop. Here the scanner of a long text is held at a barrier until another user's
requests have been answered: scanning on the event loop it would hold the loop with it, none
of them would be answered, and the test would fail at its client's timeout. No timings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.server.conftest import AGENTS, Gateway, Stack, wait_for

from thinkloop.guard import input as input_guard
from thinkloop.judgement.secrets import Vault
from thinkloop.loop import run as loop_run
from thinkloop.server import GatewayConfig
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

MEGABYTE_LINE = "ai " * 350_000  # one line of a megabyte: the shape that froze the gateway
LONGEST_TASK = "ai " * 66_666  # a message as long as the gateway takes (200,000 characters)
LONG_TASK = "ai " * 50_000  # a long task, with room for a secret within the limit
LONG = 10_000  # texts the barrier holds: the long one's scan, never the other user's


class Held:
    """A scanner that, given a long text, says it started and waits to be let go."""

    def __init__(self, scan: Callable[..., Any]) -> None:
        self.scan = scan
        self.started, self.release, self.finished = (threading.Event() for _ in range(3))
        self.threads: list[str] = []

    def __call__(self, text: str, *args: Any) -> Any:
        if len(text) < LONG:
            return self.scan(text, *args)
        self.threads.append(threading.current_thread().name)
        self.started.set()
        self.release.wait(60)  # let go by the test (or, if it failed, not held forever)
        try:
            return self.scan(text, *args)
        finally:
            self.finished.set()


def _hold(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> Iterator[Held]:
    """``module.name`` (a scanner) replaced by a :class:`Held` one; let go at the end."""
    held = Held(getattr(module, name))
    monkeypatch.setattr(module, name, held)
    yield held
    held.release.set()


@pytest.fixture
def held_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    """The input guard's patterns, held on a long text (a user's message)."""
    yield from _hold(monkeypatch, input_guard, "scan_input")


@pytest.fixture
def held_sanitizer(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    """The answer sanitizer, held on a long answer (a model's)."""
    yield from _hold(monkeypatch, loop_run, "sanitize_output")


@pytest.fixture
def held_vault(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    """The secrets vault's search of a text, held on a long one (a user's task)."""
    hide = Vault.hide
    held = Held(lambda text, vault: hide(vault, text))
    monkeypatch.setattr(Vault, "hide", lambda vault, text: held(text, vault))
    yield held
    held.release.set()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer
            ) -> Iterator[Stack]:
    """A gateway whose ``guarded`` agent hides the secrets of its tasks (judgement
    ``sensitive``)."""
    tmp = tmp_path_factory.mktemp("gw-secrets")
    agents = tmp / "agents.yaml"
    agents.write_text(AGENTS + "  guarded:\n    model: openai:fake\n    memory: false\n"
                               "    judgement: sensitive\n")
    with Gateway(GatewayConfig(agents_file=agents, approval_timeout_s=20),
                 tmp / "gateway.db") as gw:
        yield Stack(gw, model_server)


def others_are_answered_meanwhile(stack: Stack, held: Held, ana_run: str) -> None:
    """While Ana's scan is held: Ben's health check, and a whole run of his, are answered;
    then Ana's scan goes on and her run completes."""
    ana, ben = stack.client(stack.gateway.key("ana")), stack.client(stack.gateway.key("ben"))
    with ana, ben:
        wait_for(held.started.is_set, 120)  # a megabyte streamed in, at any load
        assert ben.get("/healthz").status_code == 200
        r = ben.post("/v1/runs", json={"agent": "helper", "task": "Say hello."})
        assert r.status_code == 202, r.text
        ben_run = r.json()["id"]
        wait_for(lambda: ben.get(f"/v1/runs/{ben_run}").json()["status"] == "completed", 30)
        assert not held.finished.is_set()  # Ana's scan was still held all along
        assert ana.get(f"/v1/runs/{ana_run}").json()["status"] == "running"
        held.release.set()
        wait_for(lambda: ana.get(f"/v1/runs/{ana_run}").json()["status"] == "completed", 60)
    assert held.finished.is_set()
    # The scan ran in a worker thread, not in the gateway's (its event loop's).
    assert held.threads and stack.gateway.thread.name not in held.threads, held.threads


def test_the_longest_message_is_scanned_while_other_users_are_answered(
    stack: Stack, held_guard: Held
) -> None:
    stack.model.clear()
    with stack.client(stack.gateway.key("ana")) as ana:
        r = ana.post("/v1/runs", json={"agent": "helper", "task": LONGEST_TASK})
        assert r.status_code == 202, r.text
    others_are_answered_meanwhile(stack, held_guard, r.json()["id"])


def test_a_megabyte_answer_is_sanitized_while_other_users_are_answered(
    stack: Stack, held_sanitizer: Held
) -> None:
    stack.model.clear()
    stack.model.enqueue(Reply(body=completion(MEGABYTE_LINE)))
    with stack.client(stack.gateway.key("ana")) as ana:
        r = ana.post("/v1/runs", json={"agent": "helper", "task": "Repeat 'ai' a lot."})
        assert r.status_code == 202, r.text
    others_are_answered_meanwhile(stack, held_sanitizer, r.json()["id"])


def test_a_long_tasks_secrets_are_hidden_while_other_users_are_answered(
    guarded: Stack, held_vault: Held
) -> None:
    """The vault searched a long task for secrets in ``Agent.start``, on the event loop;
    now in a worker thread, first thing in the run, and the task keeps none of them."""
    guarded.model.clear()
    secret = "AKIAIOSFODNN7EXAMPLE"
    with guarded.client(guarded.gateway.key("ana")) as ana:
        r = ana.post("/v1/runs", json={"agent": "guarded",
                                       "task": f"My key is {secret}. " + LONG_TASK})
        assert r.status_code == 202, r.text
    run = r.json()["id"]
    others_are_answered_meanwhile(guarded, held_vault, run)
    with guarded.client(guarded.gateway.key("ana")) as ana:
        assert secret not in ana.get(f"/v1/runs/{run}").text
    sent = [str(request) for request in guarded.model.requests]
    assert any("[SECRET_1]" in r for r in sent) and not any(secret in r for r in sent)
