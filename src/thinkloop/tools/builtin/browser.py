"""``browser_*`` tools: a headless Chromium session through Playwright (extra ``browser``).

The system's Chromium (Debian ``chromium``) is used; Playwright never downloads a browser.
Each user gets an isolated browser context and page. ``browser_snapshot`` prints an outline of
the page (roles, names, ``[ref=eN]`` on interactive elements) that ``browser_click`` and
``browser_type`` address elements by.

Every request the page makes (navigations, redirect hops, frames, scripts, images, fetch/XHR)
is checked against the same address policy as ``web_fetch`` before it leaves the browser;
a refused one is aborted. A navigation is fetched without following redirects, so each hop
comes back through the check.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from thinkloop.core.errors import ConfigError, ToolExecutionError
from thinkloop.core.tool import Tool, ToolContext, make_tool
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.builtin.web import check_address
from thinkloop.tools.workspace import Workspace, split_path

CHROMIUM_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync",
)
_SNAPSHOT_JS = files("thinkloop.tools.builtin").joinpath("browser_snapshot.js").read_text


AddressCheck = Callable[[str], Awaitable[object]]
_MAX_HOPS = 10


@dataclass
class BrowserSession:
    """One Chromium process shared by all users; a context and page per user, lazily."""

    executable: Path = Path("/usr/bin/chromium")
    timeout_s: float = 30.0
    allow_private: bool = False
    # The address policy (default: web_fetch's, with ``allow_private``); raises to refuse.
    check: AddressCheck | None = None
    blocked: list[str] = field(default_factory=list)
    _pw: Any = None
    _browser: Any = None
    _pages: dict[str, Any] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def page(self, user_id: str | None) -> Any:
        async with self._lock:
            if self._browser is None:
                await self._launch()
            key = user_id or ""
            if key not in self._pages:
                context = await self._browser.new_context(viewport={"width": 1280, "height": 800})
                context.set_default_timeout(self.timeout_s * 1000)
                if self.check is not None or not self.allow_private:
                    await context.route("**/*", self._route)
                self._pages[key] = await context.new_page()
            return self._pages[key]

    async def _launch(self) -> None:
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            raise ConfigError("the browser tools need: pip install 'thinkloop[browser]'") from None
        if not Path(self.executable).exists():  # noqa: ASYNC240 - one stat, once per session
            raise ConfigError(f"no Chromium at {self.executable}; apt-get install chromium")
        self._pw = await async_playwright().start()
        try:
            self._browser = await self._pw.chromium.launch(
                executable_path=str(self.executable), headless=True, args=list(CHROMIUM_ARGS))
        except Exception:
            await self._pw.stop()
            self._pw = None
            raise

    async def allowed(self, url: str) -> None:
        """Raise :class:`ToolExecutionError` when the policy refuses ``url``."""
        if url.startswith(("data:", "about:", "blob:")):
            return
        if self.check is not None:
            await self.check(url)
        else:
            await check_address(url, self.allow_private)

    async def _refused(self, url: str) -> bool:
        try:
            await self.allowed(url)
        except ToolExecutionError:
            self.blocked.append(url)
            return True
        return False

    async def _route(self, route: Any, request: Any) -> None:
        if await self._refused(request.url):
            await route.abort("blockedbyclient")
            return
        if not request.is_navigation_request():
            await route.continue_()
            return
        # Chromium follows redirects without showing the hops to this handler, so a navigation
        # is fetched here one hop at a time, each hop checked; the browser then goes straight
        # to the final, checked address.
        try:
            url, response = request.url, await route.fetch(max_redirects=0)
            for _ in range(_MAX_HOPS):
                location = response.headers.get("location")
                if not 300 <= response.status < 400 or not location:
                    break
                url = urljoin(url, location)
                if await self._refused(url):
                    await route.abort("blockedbyclient")
                    return
                response = await request.frame.page.context.request.get(url, max_redirects=0)
        except Exception:  # a network failure is the page's to report, as a failed load
            await route.abort("failed")
            return
        if url == request.url:
            await route.fulfill(response=response)
        else:
            await route.fulfill(status=302, headers={"location": url})

    async def close(self) -> None:
        async with self._lock:
            browser, pw = self._browser, self._pw
            self._browser = self._pw = None
            self._pages.clear()
            if browser is not None:
                await browser.close()
            if pw is not None:
                await pw.stop()

    async def snapshot(self, page: Any) -> str:
        outline = await page.evaluate(_SNAPSHOT_JS())
        title = await page.title()
        return f"page: {title}\nurl: {page.url}\n\n{outline or '(empty page)'}"

    @staticmethod
    async def element(page: Any, ref: str) -> Any:
        locator = page.locator(f'[data-tlref="{ref}"]')
        if await locator.count() == 0:
            raise ToolExecutionError(
                f"no element with ref {ref!r} on this page; call browser_snapshot for fresh refs")
        return locator.first


def browser_tools(session: BrowserSession, workspace: Workspace, settings: ToolSettings
                  ) -> list[Tool]:
    async def browser_open(ctx: ToolContext, url: str) -> str:
        """Open a URL in the browser and return the page outline with element refs.

        Args:
            url: the http(s) URL to open
        """
        await session.allowed(url)
        page = await session.page(ctx.user_id)
        try:
            response = await _goto(page, url)
        except Exception as exc:
            if "ERR_BLOCKED_BY_CLIENT" in str(exc):
                # Chromium shows its error page next; let that finish and leave a blank page,
                # so the next navigation is not interrupted by it.
                with contextlib.suppress(Exception):
                    await page.wait_for_load_state()
                    await page.goto("about:blank")
                raise ToolExecutionError(
                    f"{url} led to an address the policy refuses (blocked: "
                    f"{', '.join(session.blocked[-3:])})") from None
            raise
        status = f"HTTP {response.status}\n" if response is not None else ""
        return status + await session.snapshot(page)

    async def browser_snapshot(ctx: ToolContext) -> str:
        """The current page as an outline; interactive elements carry [ref=eN]."""
        return await session.snapshot(await session.page(ctx.user_id))

    async def browser_click(ctx: ToolContext, ref: str) -> str:
        """Click an element by its ref from the latest snapshot; returns the new outline.

        Args:
            ref: element ref such as e3
        """
        page = await session.page(ctx.user_id)
        await (await session.element(page, ref)).click()
        await page.wait_for_load_state()
        return await session.snapshot(page)

    async def browser_type(ctx: ToolContext, ref: str, text: str, submit: bool = False) -> str:
        """Type text into a field by its ref (replacing its content); optionally press Enter.

        Args:
            ref: element ref such as e2
            text: the text to enter
            submit: press Enter afterwards
        """
        page = await session.page(ctx.user_id)
        el = await session.element(page, ref)
        await el.fill(text)
        if submit:
            await el.press("Enter")
            await page.wait_for_load_state()
        return await session.snapshot(page)

    async def browser_screenshot(
        ctx: ToolContext, path: str = "screenshot.png", full_page: bool = False
    ) -> str:
        """Save a PNG screenshot of the page into the workspace.

        Args:
            path: where to save it, relative to the workspace
            full_page: capture the whole scrollable page
        """
        page = await session.page(ctx.user_id)
        data = await page.screenshot(full_page=full_page, type="png")
        # Written the way the file tools write: no-follow, atomic, serialised.
        await asyncio.to_thread(workspace.write_bytes, ctx.user_id, path, data)
        return f"saved {len(data)} bytes to {'/'.join(split_path(path))}"

    kw: dict[str, Any] = {"idempotent": False, "trusted_output": False}
    # Clicking and typing can submit forms (send, buy, delete): a person approves them.
    acts: dict[str, Any] = {**kw, "needs_approval": True}
    # Opening a URL is a request leaving the machine: provenance gating checks what it carries.
    opener = replace(make_tool(browser_open, **kw), meta={"outbound": ("url",)})
    return [opener, make_tool(browser_snapshot, **kw),
            make_tool(browser_click, **acts), make_tool(browser_type, **acts),
            make_tool(browser_screenshot, **kw)]


async def _goto(page: Any, url: str, attempts: int = 3) -> Any:
    """``page.goto``, again after a navigation that was still settling interrupted it
    (Chromium's error page for a refused hop, a page's own redirect): not the model's fault."""
    for attempt in range(attempts):
        try:
            return await page.goto(url, wait_until="load")
        except Exception as exc:
            if "interrupted by another navigation" not in str(exc) or attempt == attempts - 1:
                raise
            with contextlib.suppress(Exception):
                await page.wait_for_load_state()
    raise AssertionError("unreachable")  # the last attempt returns or raises
