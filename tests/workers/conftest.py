"""A fleet for the tests: gateways (``thinkloop serve --queue``) and workers (``thinkloop
worker``) as separate processes, on the real Redis and PostgreSQL of 127.0.0.1, against the
deterministic model server. Each fleet has a PostgreSQL schema and a Redis key prefix of its
own, both removed afterwards.

The workers' ``echo`` tool is a plugin (a ``thinkloop.tools`` entry point, found on their
PYTHONPATH as an installed package would be) that records every execution in a file: the
model's ``steps-N`` workload calls it once per step.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from thinkloop.testing.openai_server import OpenAIServer

PG_DSN = os.environ.get("THINKLOOP_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("THINKLOOP_TEST_REDIS", "redis://127.0.0.1:6379/0")
SRC = Path(__file__).resolve().parents[2] / "src"

AGENTS = """
agents:
  steps:
    model: openai:steps-2
    tools: none
    memory: false
    guards: false
  one:
    model: openai:steps-1
    tools: none
    memory: false
    guards: false
  slow:
    model: openai:steps-6
    tools: none
    memory: false
    guards: false
  asker:
    model: openai:fake
    tools: [ask_human, calculator]
    memory: false
    approve: ask
    ask_before: [calculator]
    guards: false
  crasher:
    model: openai:fake
    tools: none
    memory: false
    guards: false
"""

PLUGIN = '''
import os
from thinkloop.tools.base import ToolContext

def echo(text: str, ctx: ToolContext) -> str:
    """Echo the text back (and record that it ran)."""
    line = f"{ctx.run_id} {text}\\n".encode()
    fd = os.open(os.environ["RECORD_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return text

def held(text: str, ctx: ToolContext) -> str:
    """Echo the text back once RELEASE_FILE exists (it records that it ran at once)."""
    import time
    echo(text, ctx)
    while not os.path.exists(os.environ["RELEASE_FILE"]):
        time.sleep(0.01)
    return text

def crash(reason: str) -> str:
    """Stop this process at once, as a lost machine would."""
    os.kill(os.getpid(), 9)
    return "never"
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _plugin_site(root: Path) -> Path:
    site = root / "site"
    dist = site / "echo_recorder-1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "echo_recorder.py").write_text(PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-recorder\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[thinkloop.tools]\necho = echo_recorder:echo\ncrash = echo_recorder:crash\n"
        "held = echo_recorder:held\n")
    return site


class Fleet:
    """Gateways and workers of one test fleet, and what they share."""

    def __init__(self, root: Path, model: OpenAIServer) -> None:
        self.root = root
        self.model = model
        self.schema = "w_" + uuid.uuid4().hex[:12]
        self.prefix = "tlt-" + uuid.uuid4().hex[:12]
        self.records = root / "records.txt"
        self.agents = root / "agents.yaml"
        self.agents.write_text(AGENTS)
        site = _plugin_site(root)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("THINKLOOP_", "OPENAI_", "ANTHROPIC_"))}
        self.env.update({
            "PYTHONPATH": os.pathsep.join([str(SRC), str(site)]),
            "THINKLOOP_HOME": str(root / "home"), "THINKLOOP_MODEL": "openai:fake",
            "OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "sk-test",
            "THINKLOOP_DATABASE_URL": f"{PG_DSN}?schema={self.schema}",
            "THINKLOOP_QUEUE_URL": REDIS_URL, "THINKLOOP_WORKER_PREFIX": self.prefix,
            "THINKLOOP_WORKER_LEASE_S": "4", "THINKLOOP_WORKER_POLL_S": "0.05",
            "THINKLOOP_GATEWAY_PER_USER_RUNS": "500", "THINKLOOP_GATEWAY_MAX_RUNS": "1000",
            "RECORD_FILE": str(self.records), "RELEASE_FILE": str(root / "release")})
        self.gateways: list[tuple[subprocess.Popen[bytes], str]] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        self._logs: list[Any] = []

    def _spawn(self, args: list[str], env: dict[str, str] | None = None,
               ) -> subprocess.Popen[bytes]:
        log = open(self.root / f"proc-{len(self._logs)}.log", "wb")  # noqa: SIM115
        self._logs.append(log)
        return subprocess.Popen(
            [sys.executable, "-c", "from thinkloop.cli.app import main; main()", *args],
            env={**self.env, **(env or {})}, stdout=log, stderr=subprocess.STDOUT)

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", "from thinkloop.cli.app import main; main()", *args],
            env=self.env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def gateway(self, **env: str) -> str:
        port = free_port()
        proc = self._spawn(["serve", "--no-auth", "--port", str(port), "--agents",
                            str(self.agents)], env)
        base = f"http://127.0.0.1:{port}"
        self.gateways.append((proc, base))
        return base

    def worker(self, name: str, **env: str) -> subprocess.Popen[bytes]:
        proc = self._spawn(["worker", "--agents", str(self.agents), "--name", name], env)
        self.workers.append(proc)
        return proc

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        for proc, base in self.gateways:
            while True:
                try:
                    if httpx.get(base + "/healthz", timeout=2).json().get("queue") == "ok":
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None, self.logs()
                assert time.monotonic() < deadline, "gateway did not come up\n" + self.logs()
                time.sleep(0.2)
        want = sum(1 for w in self.workers if w.poll() is None)
        base = self.gateways[0][1]
        while httpx.get(base + "/healthz", timeout=2).json().get("workers", 0) < want:
            assert time.monotonic() < deadline, "workers did not come up\n" + self.logs()
            time.sleep(0.2)

    @property
    def g1(self) -> str:
        return self.gateways[0][1]

    @property
    def g2(self) -> str:
        return self.gateways[1][1]

    def live_workers(self) -> list[subprocess.Popen[bytes]]:
        return [w for w in self.workers if w.poll() is None]

    def token(self, url: str) -> dict[str, str]:
        """The header a program sends to a --no-auth gateway: the token from its file."""
        file = self.root / "home" / "gateway" / f"{httpx.URL(url).port}.token"
        return {"X-Thinkloop-Token": file.read_text()} if file.exists() else {}

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.token(url), **kwargs.pop("headers", {})}
        return httpx.post(url, **kwargs, headers=headers)

    def delete(self, url: str, **kwargs: Any) -> httpx.Response:
        return httpx.delete(url, **kwargs, headers=self.token(url))

    def start(self, base: str, agent: str, task: str = "go", **extra: Any) -> str:
        r = self.post(base + "/v1/runs", json={"task": task, "agent": agent, **extra},
                      timeout=10)
        assert r.status_code == 202, r.text
        return str(r.json()["id"])

    def status(self, base: str, run_id: str) -> dict[str, Any]:
        r = httpx.get(f"{base}/v1/runs/{run_id}", timeout=10)
        assert r.status_code == 200, r.text
        return dict(r.json())

    def wait_done(self, base: str, ids: list[str], timeout: float = 60) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        views: dict[str, dict[str, Any]] = {}
        while True:
            for run_id in ids:
                if run_id not in views:
                    v = self.status(base, run_id)
                    if v["finished_at"] is not None:
                        views[run_id] = v
            if len(views) == len(ids):
                return [views[i] for i in ids]
            assert time.monotonic() < deadline, (
                f"{len(ids) - len(views)} runs not done\n" + self.logs())
            time.sleep(0.1)

    def metric(self, name: str) -> float:
        text = httpx.get(self.g1 + "/metrics", timeout=10).text
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return 0.0

    def runs_on(self, worker: str) -> int:
        return int(self.metric(f'thinkloop_worker_runs{{worker="{worker}"}}'))

    def hold(self, count: int, timeout: float = 60) -> None:
        """Hold the model until ``count`` requests wait for it."""
        self.model.pause()
        deadline = time.monotonic() + timeout
        while self.model.held < count:
            assert time.monotonic() < deadline, (
                f"{self.model.held} of {count} runs reached the model\n" + self.logs())
            time.sleep(0.02)

    def start_in_step(self, base: str, agent: str, count: int) -> list[str]:
        """Start ``count`` runs and catch them all waiting for the model after their first
        tool call, in step: each at a known point, its finished calls checkpointed
        (``model.resume()`` lets them go on)."""
        self.hold(0)
        ids = [self.start(base, agent, f"task {i}") for i in range(count)]
        self.hold(count)  # all at their first model call
        self.model.resume()
        deadline = time.monotonic() + 60
        while {r for r, _ in self.executions()} < set(ids):
            assert time.monotonic() < deadline, "the runs did not step\n" + self.logs()
            time.sleep(0.01)
        self.hold(count)  # all past a tool call, at the model again
        return ids

    def executions(self) -> list[tuple[str, str]]:
        if not self.records.exists():
            return []
        lines = self.records.read_text().splitlines()
        return [(ln.split(" ", 1)[0], ln.split(" ", 1)[1]) for ln in lines]

    def logs(self) -> str:
        out = []
        for f in sorted(self.root.glob("proc-*.log")):
            out.append(f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}")
        return "\n".join(out)

    def stop(self) -> None:
        procs = [p for p, _ in self.gateways] + self.workers
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        for log in self._logs:
            log.close()
        asyncio.run(_cleanup(self.schema, self.prefix))


async def _cleanup(schema: str, prefix: str) -> None:
    import asyncpg
    from redis.asyncio import Redis

    conn = await asyncpg.connect(PG_DSN)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()
    redis = Redis.from_url(REDIS_URL)
    try:
        keys = [k async for k in redis.scan_iter(match=f"{prefix}:*", count=1000)]
        for i in range(0, len(keys), 500):
            await redis.delete(*keys[i:i + 500])
    finally:
        await redis.aclose()


@contextmanager
def started_fleet(tmp_path: Path, env: dict[str, str],
                  workers: tuple[str, ...] = ()) -> Iterator[Fleet]:
    """One gateway (and the named workers) against a model server of its own, with ``env``
    on top of the fleet's settings; stopped, schema and keys removed, on the way out."""
    with OpenAIServer(record=False) as model:
        f = Fleet(tmp_path, model)
        f.env.update(env)
        try:
            f.gateway()
            for name in workers:
                f.worker(name)
            f.wait_ready()
            yield f
        finally:
            f.stop()


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIServer]:
    with OpenAIServer(record=False, delay_s=0.2) as srv:
        yield srv


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, model: OpenAIServer) -> Iterator[Fleet]:
    """Two gateways and two workers, shared by a module's tests (starting them is most of
    the time a test takes); a test that stops a worker starts another."""
    f = Fleet(tmp_path_factory.mktemp("fleet"), model)
    try:
        f.gateway()
        f.gateway()
        f.worker("w1")
        f.worker("w2")
        f.wait_ready()
        yield f
    finally:
        f.stop()


@pytest.fixture
def redis_up() -> None:
    """Skip a test that talks to Redis directly when there is none on 127.0.0.1."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.skip("no Redis on 127.0.0.1")
    finally:
        client.close()



async def held_job(redis: Any, bus: Any, job: str, worker: str = "w1") -> None:
    """An arq job as a worker holds it while its run executes: its data, its lease (the
    in-progress key), its place in arq's queue, the worker's count of runs."""
    from arq import constants as arq

    await redis.set(arq.job_key_prefix + job, b"{}")
    await redis.set(arq.in_progress_key_prefix + job, b"1")
    await redis.zadd(bus.queue, {job: 1})
    await bus.running_on(worker, 1)


async def drop_keys(redis: Any, prefix: str, job: str = "") -> None:
    """Every key of a test's ``prefix``, and those of its arq ``job``."""
    from arq import constants as arq

    keys = [k async for k in redis.scan_iter(f"{prefix}*")]
    if job:
        keys += [f"{p}{job}" for p in (arq.job_key_prefix, arq.in_progress_key_prefix)]
    if keys:
        await redis.delete(*keys)


@dataclass
class RunsInRedis:
    """A test's fleet state in Redis: its own key prefix's bus, its runs' rows created there,
    and (if held) the arq job ``job`` that worker ``w1`` holds while a run executes."""

    redis: Any
    bus: Any
    rows: list[Any]
    job: str


@asynccontextmanager
async def runs_in_redis(*run_ids: str, job_held: bool = True) -> AsyncIterator[RunsInRedis]:
    """:class:`RunsInRedis` on the real Redis, every key of it dropped afterwards."""
    from redis.asyncio import Redis

    from thinkloop.workers.bus import Bus
    from thinkloop.workers.rows import RunRow

    prefix = f"tlt-{uuid.uuid4().hex[:8]}"
    job = f"{prefix}-job"
    redis = Redis.from_url(REDIS_URL)
    bus = Bus(redis, prefix)
    try:
        rows = [RunRow(run_id, "u", "steps", None, "queued", time.time()) for run_id in run_ids]
        for row in rows:
            await bus.create(row)
        if job_held:
            await held_job(redis, bus, job)
        yield RunsInRedis(redis, bus, rows, job)
    finally:
        await drop_keys(redis, prefix, job if job_held else "")
        await redis.aclose()
