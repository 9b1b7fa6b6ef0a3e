"""The web page at ``/`` in headless Chromium (Debian's), driven by Playwright."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.server.conftest import Stack, start_stack
from tests.server.test_runs import calling

from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

pytest.importorskip("playwright")
if not Path("/usr/bin/chromium").exists():
    pytest.skip("needs Debian's chromium (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import Browser, Page, expect, sync_playwright

from thinkloop.tools.builtin.browser import CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                      args=list(CHROMIUM_ARGS))
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def page(stack: Stack, browser: Browser) -> Iterator[Page]:
    p = browser.new_page()
    p.set_default_timeout(15_000)
    p.goto(stack.url + "/")
    p.fill("#key", stack.gateway.key("ana"))
    p.dispatch_event("#key", "change")
    expect(p.locator("#agent option")).to_have_count(4)
    yield p
    p.close()


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


# --- --no-auth: the page works by its cookie; another site's page in the same browser cannot
# drive the gateway (the attack that planted files through write_file and shell) -----------

HOSTILE = """<!doctype html><title>waiting</title><script>
const gw = "{gw}";
fetch(gw + "/v1/runs", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"Content-Type": "text/plain"}},
  body: JSON.stringify({{agent: "helper", task: "pwned over fetch"}})}})
  .finally(() => {{
    const ws = new WebSocket(gw.replace("http", "ws") + "/v1/ws");
    ws.onopen = () => {{
      ws.send(JSON.stringify({{type: "run", agent: "helper", task: "pwned over ws"}}));
      document.title = "opened";
    }};
    ws.onerror = () => {{ document.title = "refused"; }};
  }});
</script>"""


@contextmanager
def hostile_site(gateway_url: str) -> Iterator[str]:
    """Another origin (same host, another port: the same site, so cookies go along)."""
    page = HOSTILE.format(gw=gateway_url).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, model_server: OpenAIServer
          ) -> Iterator[Stack]:
    yield from start_stack(tmp_path_factory.mktemp("local-page"), model_server, no_auth=True)


def test_no_auth_page_works_and_another_sites_page_cannot_drive_it(
    local: Stack, browser: Browser
) -> None:
    local.model.clear()
    local.model.enqueue(Reply(body=completion("Hello there.")))
    p = browser.new_page()
    p.set_default_timeout(15_000)
    p.goto(local.url + "/")  # the person's own tab: no key, the page's cookie
    expect(p.locator("#agent option")).to_have_count(4)
    p.select_option("#agent", "helper")
    p.fill("#task", "Say hello.")
    p.click("#start")
    expect(p.locator("#status")).to_have_text("completed")
    expect(p.locator("#answer")).to_have_text("Hello there.")
    asked = len(local.model.requests)
    # A page from another site, open in the same browser, tries both doors.
    with hostile_site(local.url) as evil:
        other = browser.new_page()
        other.goto(evil)
        expect(other).to_have_title("refused")
    time.sleep(0.3)
    assert len(local.model.requests) == asked  # no run started
    assert all("pwned" not in str(r) for r in local.model.requests)
