"""``GET /metrics`` in the Prometheus text format, from the gateway's own registry (no global
state): active runs, runs by final status, tokens, and how long each step took."""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from thinkloop.core.events import (
    Event,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    StepCompleted,
)

STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    def __init__(self, active: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        gauge = Gauge("thinkloop_active_runs", "Runs in progress", registry=self.registry)
        gauge.set_function(lambda: float(active()))
        self.runs = Counter("thinkloop_runs", "Finished runs by final status", ["status"],
                            registry=self.registry)
        self.started = Counter("thinkloop_runs_started", "Runs started",
                               registry=self.registry)
        self.tokens = Counter("thinkloop_tokens", "Model tokens used by runs", ["kind"],
                              registry=self.registry)
        self.steps = Histogram("thinkloop_step_seconds", "Time per think-act-observe step",
                               buckets=STEP_BUCKETS, registry=self.registry)
        self._step_start: dict[str, float] = {}

    def observe(self, event: Event) -> None:
        """Fed every event of every run the gateway serves."""
        match event:
            case RunStarted():
                self.started.inc()
                self._step_start[event.run_id] = time.perf_counter()
            case StepCompleted():
                now = time.perf_counter()
                began = self._step_start.get(event.run_id)
                if began is not None:
                    self.steps.observe(now - began)
                self._step_start[event.run_id] = now
            case RunCompleted() | RunFailed() | RunCancelled():
                self._step_start.pop(event.run_id, None)
                self.tokens.labels("input").inc(event.usage.get("input_tokens", 0))
                self.tokens.labels("output").inc(event.usage.get("output_tokens", 0))

    def finished(self, status: str) -> None:
        self.runs.labels(status).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
