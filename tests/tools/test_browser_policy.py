"""Every request a page makes goes through the address policy, not only the first URL."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web
from tests.tools.helpers import call

from thinkloop.errors import ToolExecutionError
from thinkloop.tools.builtin.browser import BrowserSession, browser_tools
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.workspace import Workspace

pytest.importorskip("playwright")
if not Path("/usr/bin/chromium").exists():
    pytest.skip("needs Debian's chromium (apt-get install chromium)", allow_module_level=True)


async def _serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, int(runner.addresses[0][1])


@pytest_asyncio.fixture(loop_scope="function")
async def sites() -> AsyncIterator[tuple[str, str, list[str]]]:
    """A "public" site and an "internal" one that must never be reached."""
    internal_hits: list[str] = []

    async def internal(request: web.Request) -> web.Response:
        internal_hits.append(request.path)
        return web.Response(text="<title>admin</title>secret", content_type="text/html")

    inner_app = web.Application()
    inner_app.add_routes([web.get("/{tail:.*}", internal)])
    inner, inner_port = await _serve(inner_app)
    secret = f"http://127.0.0.1:{inner_port}"

    async def index(_: web.Request) -> web.Response:
        return web.Response(content_type="text/html", text=(
            f"<title>Public</title><h1>Hello</h1><img src='{secret}/img'>"
            f"<iframe src='{secret}/frame'></iframe>"
            f"<script>fetch('{secret}/xhr').catch(() => null)</script>"
            f"<a href='{secret}/admin'>Admin</a>"))

    async def go(_: web.Request) -> web.Response:
        raise web.HTTPFound(f"{secret}/redirected")

    outer_app = web.Application()
    outer_app.add_routes([web.get("/", index), web.get("/go", go)])
    outer, outer_port = await _serve(outer_app)
    yield f"http://127.0.0.1:{outer_port}", secret, internal_hits
    await outer.cleanup()
    await inner.cleanup()


async def test_subresources_redirects_and_clicks_are_checked(
    sites: tuple[str, str, list[str]], tmp_path: Path
) -> None:
    public, secret, hits = sites

    async def policy(url: str) -> None:  # the public site's port is "public", nothing else
        if not url.startswith(public):
            raise ToolExecutionError(f"refused {url}")

    session = BrowserSession(check=policy)
    tools = browser_tools(session, Workspace(tmp_path / "ws"), ToolSettings(workspace=tmp_path))
    try:
        opened = await call(tools, "browser_open", url=f"{public}/")
        assert not opened.is_error and "page: Public" in opened.content, opened.content
        await asyncio.sleep(0.3)  # let the fetch() settle
        refused = await call(tools, "browser_open", url=f"{public}/go")
        assert refused.is_error and "policy refuses" in refused.content, refused.content
        direct = await call(tools, "browser_open", url=f"{secret}/admin")
        assert direct.is_error and "refused" in direct.content
        back = await call(tools, "browser_open", url=f"{public}/")
        found = re.search(r'link "Admin" \[ref=(e\d+)\]', back.content)
        assert found, back.content
        ref = found.group(1)
        await call(tools, "browser_click", ref=ref)
    finally:
        await session.close()
    assert hits == []
    assert {u.removeprefix(secret) for u in session.blocked} >= {
        "/img", "/frame", "/xhr", "/redirected", "/admin"}
