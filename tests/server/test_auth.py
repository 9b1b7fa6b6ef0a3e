"""Keys, users and limits: who may do what through the gateway."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.server.conftest import Stack, start_stack, wait_for
from tests.server.test_runs import calling

from thinkloop.errors import ConfigError
from thinkloop.server import GatewayConfig
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion


def test_requests_without_a_valid_key_are_refused(stack: Stack) -> None:
    with stack.client(None) as c:
        r = c.post("/v1/runs", json={"task": "hi", "agent": "helper"})
        assert r.status_code == 401
        assert r.json()["error"]["message"] == "an API key is required (Authorization: Bearer KEY)"
        assert r.headers["www-authenticate"] == "Bearer"
    with stack.client("tlk_0000_not-a-real-key") as c:
        r = c.get("/v1/agents")
        assert r.status_code == 401 and r.json()["error"]["message"] == "invalid API key"
    with stack.client("something else entirely") as c:
        assert c.get("/v1/agents").status_code == 401
    assert stack.model.requests == [] or all("hi" not in str(r) for r in stack.model.requests)


def test_another_users_runs_and_sessions_are_404_never_data(stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(calling("c1", "calculator", {"expression": "7*6"}))
    ana, ben = stack.client(stack.gateway.key("ana")), stack.client(stack.gateway.key("ben"))
    with ana, ben:
        run_id = ana.post("/v1/runs", json={"agent": "worker", "task": "private sum 7*6",
                                            "session": "diary"}).json()["id"]
        wait_for(lambda: ana.get(f"/v1/runs/{run_id}").json()["waiting_for"] != [])
        for method, path, body in [
            ("GET", f"/v1/runs/{run_id}", None),
            ("GET", f"/v1/runs/{run_id}/events", None),
            ("GET", f"/v1/runs/{run_id}/trace", None),
            ("POST", f"/v1/runs/{run_id}/abort", None),
            ("POST", f"/v1/runs/{run_id}/input", {"id": "c1", "approved": True}),
            ("GET", "/v1/sessions/diary", None),
        ]:
            r = ben.request(method, path, json=body)
            assert r.status_code == 404, (path, r.text)
            assert "private" not in r.text and "7*6" not in r.text
        assert ben.post("/v1/sessions/diary/abort").json()["aborted"] == []
        # Ben's own session of the same name is a different one.
        assert ben.get("/v1/sessions/diary").status_code == 404
        # Ana's run was not touched by any of that.
        state = ana.get(f"/v1/runs/{run_id}").json()
        assert state["status"] == "running" and state["waiting_for"] == [
            {"id": "c1", "kind": "approval"}]
        assert ana.post(f"/v1/runs/{run_id}/abort").status_code == 202
        wait_for(lambda: ana.get(f"/v1/runs/{run_id}").json()["status"] == "cancelled")


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({}, 422, "task: Field required"),
        ({"task": ""}, 422, "task: String should have at least 1 character"),
        ({"task": "hi", "temperature": 1}, 422, "temperature: Extra inputs are not permitted"),
        ({"task": "hi", "stream": "maybe"}, 422, "stream: Input should be a valid boolean"),
        ({"task": "hi", "agent": "nobody"}, 404, "no agent named 'nobody'"),
        ({"task": "hi", "agent": "helper", "session": "../etc"}, 400, "session ids are"),
    ],
)
def test_bad_run_requests_get_one_clear_4xx(
    stack: Stack, body: dict[str, object], status: int, message: str
) -> None:
    with stack.client(stack.gateway.key("ana")) as c:
        r = c.post("/v1/runs", json=body)
        assert r.status_code == status, r.text
        assert message in r.json()["error"]["message"]
        bad = c.post("/v1/runs", content=b"{not json", headers={"content-type":
                                                                 "application/json"})
        assert bad.status_code == 422 and "JSON decode error" in bad.json()["error"]["message"]
        r = c.post("/v1/runs/nope/input", json={"id": "x", "approved": True, "answer": "y"})
        assert r.status_code == 422 and "exactly one of" in r.json()["error"]["message"]


def test_admins_define_agents_and_the_router_drops_stale_ones(stack: Stack) -> None:
    stack.model.clear()
    with stack.client(stack.gateway.key("ana")) as user, \
            stack.client(stack.gateway.key("root", "user", "admin")) as admin:
        spec = {"model": "openai:fake", "tools": "none", "memory": False,
                "instructions": "You are Poet One."}
        assert user.put("/v1/agents/poet", json=spec).status_code == 403
        r = admin.put("/v1/agents/poet", json={**spec, "temperature": 2})
        assert r.status_code == 400 and "temperature: Extra inputs" in r.json()["error"]["message"]
        assert admin.put("/v1/agents/poet", json=spec).status_code == 200
        names = [a["name"] for a in user.get("/v1/agents").json()["agents"]]
        assert names == ["asker", "bench", "helper", "keeper", "poet", "worker"]

        def run_poet() -> str:
            stack.model.enqueue(Reply(body=completion("a verse")))
            run_id = user.post("/v1/runs", json={"agent": "poet", "task": "a poem"}).json()["id"]
            wait_for(lambda: user.get(f"/v1/runs/{run_id}").json()["status"] == "completed")
            return str(stack.model.requests[-1]["messages"][0]["content"])

        assert "You are Poet One." in run_poet()
        # A new definition takes effect on the next run, well within the router's TTL.
        admin.put("/v1/agents/poet", json={**spec, "instructions": "You are Poet Two."})
        system = run_poet()
        assert "You are Poet Two." in system and "Poet One" not in system
        assert admin.delete("/v1/agents/poet").status_code == 200
        r = user.post("/v1/runs", json={"agent": "poet", "task": "again"})
        assert r.status_code == 404


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer
          ) -> Iterator[Stack]:
    yield from start_stack(tmp_path_factory.mktemp("tight"), model_server, per_user_runs=2,
                           max_runs=3)


def test_per_user_and_global_run_limits(tight: Stack, stack: Stack) -> None:
    tight.model.clear()
    tight.model.enqueue(*[calling(f"c{i}", "calculator", {"expression": f"{i}+1"})
                          for i in range(3)])
    ana, ben = tight.client(tight.gateway.key("ana")), tight.client(tight.gateway.key("ben"))
    with ana, ben:
        start = {"agent": "worker", "task": "add one"}
        held = [ana.post("/v1/runs", json=start), ana.post("/v1/runs", json=start)]
        assert [r.status_code for r in held] == [202, 202]
        r = ana.post("/v1/runs", json=start)
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        assert r.json()["error"]["message"] == "you already have 2 runs in progress"
        held.append(ben.post("/v1/runs", json=start))
        assert held[-1].status_code == 202
        r = ben.post("/v1/runs", json=start)  # ben is under his own limit, the gateway is not
        assert r.status_code == 429
        assert r.json()["error"]["message"] == "the gateway is running 3 runs, its limit"
        metrics = ana.get("/metrics").text
        assert "thinkloop_active_runs 3.0" in metrics
        for client, resp in zip([ana, ana, ben], held, strict=True):
            client.post(f"/v1/runs/{resp.json()['id']}/abort")
        wait_for(lambda: ana.get("/healthz").json()["active_runs"] == 0)
        assert ana.post("/v1/runs", json={"agent": "helper", "task": "x"}).status_code == 202


def test_no_auth_only_on_loopback(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="only on loopback"):
        GatewayConfig(host="0.0.0.0", no_auth=True)
    GatewayConfig(host="::1", no_auth=True)
    env = {**os.environ, "THINKLOOP_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", "from thinkloop.cli.app import main; main()", "serve",
         "--no-auth", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2 and "only on loopback" in proc.stderr


def test_keys_cli_shows_the_key_once_and_stores_only_its_hash(tmp_path: Path) -> None:
    env = {**os.environ, "THINKLOOP_HOME": str(tmp_path)}
    env.pop("THINKLOOP_DATABASE_URL", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", "from thinkloop.cli.app import main; main()",
                               "keys", *args], capture_output=True, text=True, timeout=60,
                              env=env)

    made = cli("create", "--user", "ana")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("tlk_") and len(key) > 40
    listed = cli("list", "--json")
    (row,) = __import__("json").loads(listed.stdout)
    assert row["user"] == "ana" and row["roles"] == ["user"] and key not in listed.stdout
    db = (tmp_path / "thinkloop.db").read_bytes()
    assert key.encode() not in db and key.split("_", 2)[2].encode() not in db
    with sqlite3.connect(tmp_path / "thinkloop.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM api_keys").fetchone() == (1,)
    bad = cli("create", "--user", "a b")
    assert bad.returncode == 2 and "invalid user id 'a b'" in bad.stderr
    assert cli("revoke", row["id"]).returncode == 0
    assert cli("revoke", row["id"]).returncode == 2
