"""deploy/docker-compose.yml, without Docker: its services' own commands and environment,
started as processes here (hosts and ports mapped to this machine), serve a run end to end."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from tests.workers.conftest import PG_DSN, REDIS_URL, Fleet, free_port

from thinkloop.testing.openai_server import OpenAIServer

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "docker-compose.yml"


def _local(value: str, fleet: Fleet, port: int) -> str:
    """A compose value on this machine: its services' hosts, the test's schema and prefix."""
    value = value.replace("redis://redis:6379/0", REDIS_URL)
    value = re.sub(r"postgresql://[^ ]*@postgres:5432/\w+", f"{PG_DSN}?schema={fleet.schema}",
                   value)
    return value.replace("0.0.0.0", "127.0.0.1").replace("8080", str(port))


def _env(service: dict[str, Any], fleet: Fleet) -> dict[str, str]:
    env = {k: _local(str(v), fleet, 0) for k, v in service["environment"].items()
           if not str(v).startswith("${")}  # the operator's own: the test sets its model
    return {**env, "THINKLOOP_MODEL": "openai:fake"}


def test_the_compose_file_brings_up_postgres_redis_a_gateway_and_two_workers(
        tmp_path: Path) -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "gateway", "worker"}
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")
    gateway, worker = services["gateway"], services["worker"]
    assert worker["deploy"]["replicas"] == 2
    assert gateway["command"][:2] == ["thinkloop", "serve"]
    assert worker["command"][:2] == ["thinkloop", "worker"]
    with OpenAIServer(record=False) as model:
        fleet = Fleet(tmp_path, model)
        try:
            port = free_port()
            fleet.env.pop("THINKLOOP_QUEUE_URL")  # the commands name their queue
            cmd = [_local(a, fleet, port) for a in gateway["command"][1:]]
            fleet.gateways.append((fleet._spawn(cmd, _env(gateway, fleet)),
                                   f"http://127.0.0.1:{port}"))
            for i in range(worker["deploy"]["replicas"]):
                cmd = [_local(a, fleet, 0) for a in worker["command"][1:]] + ["--name", f"c{i}"]
                fleet.workers.append(fleet._spawn(cmd, _env(worker, fleet)))
            fleet.wait_ready()
            # As docs/scaling.md says: a key, then runs over HTTP.
            key = fleet.cli("keys", "create", "--user", "me").strip()
            headers = {"Authorization": f"Bearer {key}"}
            r = httpx.post(fleet.g1 + "/v1/runs", json={"task": "hello"}, headers=headers,
                           timeout=10)
            assert r.status_code == 202, r.text
            run_id = r.json()["id"]
            deadline = time.monotonic() + 60
            while (view := httpx.get(f"{fleet.g1}/v1/runs/{run_id}", headers=headers,
                                     timeout=10).json())["finished_at"] is None:
                assert time.monotonic() < deadline, fleet.logs()
                time.sleep(0.1)
            assert view["status"] == "completed" and view["worker"] in ("c0", "c1"), view
            health = httpx.get(fleet.g1 + "/healthz", timeout=10).json()
            assert health == {"status": "ok", "active_runs": 0, "queue": "ok", "workers": 2,
                              "store": "ok"}
        finally:
            fleet.stop()
