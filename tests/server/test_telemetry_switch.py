"""FastAPI asks whether its OpenTelemetry instrumentation is on for every request (three global
provider look-ups); the gateway asks once a second, and still sees a provider installed."""

from __future__ import annotations

import time
from typing import Any

from thinkloop.server.app import create_app
from thinkloop.server.config import GatewayConfig


def test_the_gateway_asks_whether_telemetry_is_on_once_a_second() -> None:
    app: Any = create_app(GatewayConfig(no_auth=True), store=object())
    switch = app._native_telemetry
    asked: list[float] = []
    inner_enabled = switch.inner.enabled

    def counted() -> bool:
        asked.append(time.monotonic())
        return bool(inner_enabled())

    switch.inner.enabled = counted
    switch.every_s = 0.2
    answers = [switch.enabled() for _ in range(1000)]
    assert answers == [False] * 1000 and len(asked) == 1
    switch.inner.enabled = lambda: True  # a provider installed meanwhile
    time.sleep(0.25)
    assert switch.enabled() is True
