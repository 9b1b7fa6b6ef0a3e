"""The web page at ``/`` in headless Chromium (Debian's), driven by Playwright."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.server.conftest import Stack
from tests.server.test_runs import calling

from thinkloop.testing.openai_server import Reply, completion

pytest.importorskip("playwright")
if not Path("/usr/bin/chromium").exists():
    pytest.skip("needs Debian's chromium (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import Page, expect, sync_playwright

from thinkloop.tools.builtin.browser import CHROMIUM_ARGS


@pytest.fixture(scope="module")
def page(stack: Stack) -> Iterator[Page]:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                     args=list(CHROMIUM_ARGS))
        try:
            p = browser.new_page()
            p.set_default_timeout(15_000)
            p.goto(stack.url + "/")
            p.fill("#key", stack.gateway.key("ana"))
            p.dispatch_event("#key", "change")
            expect(p.locator("#agent option")).to_have_count(4)
            yield p
        finally:
            browser.close()


def test_start_watch_approve_and_read_the_answer(page: Page, stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(calling("call_p", "calculator", {"expression": "12*7"}),
                        Reply(body=completion("12*7 is 84.")))
    page.select_option("#agent", "worker")
    page.fill("#task", "What is 12*7?")
    page.click("#start")
    expect(page.locator("#status")).to_have_text("running")
    prompt = page.locator(".prompt[data-kind=approval]")
    expect(prompt).to_contain_text('calculator({"expression":"12*7"})')
    prompt.locator("button.approve").click()
    expect(page.locator("#status")).to_have_text("completed")
    expect(page.locator("#answer")).to_have_text("12*7 is 84.")
    events = page.locator("#events li")
    expect(events.filter(has_text='calculator({"expression":"12*7"})')).to_have_count(2)
    expect(events.filter(has_text="calculator -> 84")).to_have_count(1)
    expect(page.locator("#events li[data-type='approval.decided']")).to_contain_text("approved")
    expect(page.locator(".prompt")).to_have_count(0)
    page.click("#trace-button")
    expect(page.locator("#message, #trace")).not_to_have_text(["", ""])


def test_abort_from_the_page(page: Page, stack: Stack) -> None:
    stack.model.clear()
    stack.model.enqueue(calling("call_s", "calculator", {"expression": "1+1"}))
    page.select_option("#agent", "worker")
    page.fill("#task", "one plus one, slowly")
    page.click("#start")
    expect(page.locator(".prompt[data-kind=approval]")).to_have_count(1)
    page.click("#abort")
    expect(page.locator("#status")).to_have_text("cancelled")
    expect(page.locator("#events li").last).to_have_attribute("data-type", "run.cancelled")
    expect(page.locator("#abort")).to_be_disabled()
    expect(page.locator("#start")).to_be_enabled()
