"""Queued runs start by priority: one worker that executes one run at a time takes a
high-priority run submitted after twenty low ones before any of them that waits; the API and
`thinkloop runs` show each run's priority and status (queued, running, done)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.workers.conftest import Fleet, started_fleet


@pytest.fixture
def one_at_a_time(tmp_path: Path) -> Iterator[Fleet]:
    with started_fleet(tmp_path, {"THINKLOOP_WORKER_CONCURRENCY": "1"}, ("solo",)) as f:
        yield f


def test_a_high_priority_run_submitted_after_twenty_low_ones_starts_before_them(
        one_at_a_time: Fleet) -> None:
    f = one_at_a_time
    f.hold(0)  # the first run to start waits at the model; the others wait in the queue
    low = [f.start(f.g1, "one", f"low {i}", priority=-1) for i in range(20)]
    f.hold(1)
    high = f.start(f.g1, "one", "urgent", priority=5)
    listed = {r["id"]: r for r in httpx.get(f.g1 + "/v1/runs", params={"limit": 100},
                                            timeout=10).json()["runs"]}
    assert (listed[high]["status"], listed[high]["priority"]) == ("queued", 5)
    assert {listed[i]["priority"] for i in low} == {-1}
    assert sorted(listed[i]["status"] for i in low) == ["queued"] * 19 + ["running"]
    cli = {r["id"]: r for r in map(json.loads, f.cli("runs", "--json", "--limit", "100")
                                   .splitlines())}
    assert (cli[high]["status"], cli[high]["priority"]) == ("queued", 5)
    assert sorted(cli[i]["status"] for i in low) == ["queued"] * 19 + ["running"]
    assert {cli[i]["worker"] for i in low if cli[i]["status"] == "running"} == {"solo"}
    _the_page_lists_them(f.g1, high, low)
    f.model.resume()
    views = f.wait_done(f.g1, [*low, high], timeout=120)
    assert {v["status"] for v in views} == {"completed"}
    # Each run calls the recording tool once: the order they executed in.
    order = [run_id for run_id, _ in f.executions()]
    assert sorted(order) == sorted([*low, high])
    first = next(i for i in low if cli[i]["status"] == "running")
    assert order[:2] == [first, high], order
    done = {r["id"]: r for r in map(json.loads, f.cli("runs", "--json", "--limit", "100")
                                    .splitlines())}
    assert {done[i]["status"] for i in [*low, high]} == {"completed"}


def test_a_priority_out_of_range_is_one_clear_error(one_at_a_time: Fleet) -> None:
    r = one_at_a_time.post(one_at_a_time.g1 + "/v1/runs", timeout=10,
                   json={"task": "x", "agent": "one", "priority": 1000})
    assert r.status_code == 422 and "priority" in r.text


def _the_page_lists_them(base: str, high: str, low: list[str]) -> None:
    """The gateway's page lists the runs from GET /v1/runs: queued ones with their
    priority, the one executing with its worker."""
    html = httpx.get(base + "/", timeout=10).text
    assert 'id="runs"' in html and '"/v1/runs?limit=50"' in html
    if not Path("/usr/bin/chromium").exists():
        return  # the page's script needs a browser; the data it reads is checked above
    from playwright.sync_api import expect, sync_playwright

    from thinkloop.tools.builtin.browser import CHROMIUM_ARGS

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page()
            page.goto(base + "/")
            rows = page.locator("#runs tbody tr")
            expect(rows).to_have_count(21, timeout=15_000)
            urgent = page.locator(f'#runs tr[data-id="{high}"] td')
            expect(urgent).to_have_text([high[:12], "queued", "one", "-", "5", re.compile(".")])
            running = page.locator("#runs tr", has_text="running").locator("td")
            expect(running.nth(3)).to_have_text("solo")
            expect(running.nth(4)).to_have_text("-1")
        finally:
            browser.close()
