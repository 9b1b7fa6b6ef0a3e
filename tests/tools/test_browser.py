from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web
from tests.tools.helpers import call

from thinkloop.tools.base import Tool
from thinkloop.tools.builtin.browser import BrowserSession, browser_tools
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.workspace import Workspace

pytest.importorskip("playwright")
if not Path("/usr/bin/chromium").exists():
    pytest.skip("needs Debian's chromium (apt-get install chromium)", allow_module_level=True)

pytestmark = pytest.mark.asyncio(loop_scope="module")

FORM = """<!doctype html><html><head><title>Search demo</title></head><body>
<h1>Find a book</h1>
<nav><a href="/about">About us</a></nav>
<form action="/results" method="get">
  <label for="q">Title</label><input id="q" name="q" placeholder="e.g. Dune">
  <label><input type="checkbox" name="used"> Used copies</label>
  <button type="submit">Search</button>
</form>
<p style="display:none">hidden text</p>
<button id="count" onclick="this.textContent = 'Clicked ' + (++window.n) + ' times'">
Click me</button>
<script>window.n = 0;</script>
</body></html>"""


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def site() -> AsyncIterator[str]:
    async def index(_: web.Request) -> web.Response:
        return web.Response(text=FORM, content_type="text/html")

    async def results(request: web.Request) -> web.Response:
        q = request.query.get("q", "")
        used = "used" in request.query
        return web.Response(
            text=f"<html><head><title>Results</title></head><body><h2>Results for {q}</h2>"
                 f"<p>used only: {used}</p><a href='/'>Back</a></body></html>",
            content_type="text/html")

    app = web.Application()
    app.add_routes([web.get("/", index), web.get("/results", results)])
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def session() -> AsyncIterator[BrowserSession]:
    s = BrowserSession(allow_private=True)  # the test site is on loopback
    yield s
    await s.close()


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Tool], Workspace, ToolSettings]:
    base = tmp_path_factory.mktemp("bws")
    settings = ToolSettings(workspace=base, fetch_allow_private=True)
    return [], Workspace(base), settings


def _ref(outline: str, line_start: str) -> str:
    for line in outline.splitlines():
        if line.strip().startswith(line_start):
            m = re.search(r"\[ref=(e\d+)\]", line)
            assert m, line
            return m.group(1)
    raise AssertionError(f"{line_start!r} not in:\n{outline}")


async def test_open_snapshot_type_click(site: str, session: BrowserSession, ws) -> None:
    _, workspace, settings = ws
    tools = browser_tools(session, workspace, settings)
    opened = await call(tools, "browser_open", url=f"{site}/")
    assert not opened.is_error, opened.content
    assert opened.content.splitlines()[:3] == ["HTTP 200", "page: Search demo", f"url: {site}/"]
    outline = opened.content.split("\n\n", 1)[1]
    assert outline.splitlines()[0] == '- heading "Find a book" [level=1]'
    assert '- link "About us" [ref=' in outline
    assert '- textbox "Title" [ref=' in outline
    assert '- checkbox "Used copies" [ref=' in outline
    assert "hidden text" not in outline

    box = _ref(outline, '- textbox "Title"')
    typed = await call(tools, "browser_type", ref=box, text="Dune")
    assert re.search(r'- textbox "Title" \[ref=e\d+\]: Dune', typed.content)
    check = _ref(typed.content, '- checkbox "Used copies"')
    checked = await call(tools, "browser_click", ref=check)
    assert '- checkbox "Used copies" [checked]' in checked.content
    search = _ref(checked.content, '- button "Search"')
    after = await call(tools, "browser_click", ref=search)
    assert "page: Results" in after.content
    assert '- heading "Results for Dune" [level=2]' in after.content
    assert '- paragraph "used only: True"' in after.content

    stale = await call(tools, "browser_click", ref="e99")
    assert stale.is_error and "call browser_snapshot for fresh refs" in stale.content


async def test_click_updates_page_and_screenshot(site: str, session: BrowserSession, ws) -> None:
    _, workspace, settings = ws
    tools = browser_tools(session, workspace, settings)
    opened = await call(tools, "browser_open", user="bob", url=f"{site}/")
    button = _ref(opened.content, '- button "Click me"')
    await call(tools, "browser_click", user="bob", ref=button)
    again = await call(tools, "browser_click", user="bob", ref=_ref(
        (await call(tools, "browser_snapshot", user="bob")).content, '- button "Clicked 1'))
    assert '- button "Clicked 2 times"' in again.content
    shot = await call(tools, "browser_screenshot", user="bob", path="shots/page.png")
    target = workspace.root("bob") / "shots/page.png"
    assert shot.content == f"saved {target.stat().st_size} bytes to shots/page.png"
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    escape = await call(tools, "browser_screenshot", user="bob", path="../x.png")
    assert escape.is_error and "not allowed" in escape.content


async def test_private_addresses_refused_by_default(ws) -> None:
    _, workspace, _ = ws
    session = BrowserSession()  # the default policy: public addresses only
    tools = browser_tools(session, workspace, ToolSettings(workspace=workspace.base))
    r = await call(tools, "browser_open", url="http://127.0.0.1:1/")
    assert r.is_error and "non-public address" in r.content
    await session.close()
