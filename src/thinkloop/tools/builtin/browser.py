"""``browser_*`` tools: a headless Chromium session through Playwright (extra ``browser``).

The system's Chromium (Debian ``chromium``) is used; Playwright never downloads a browser.
Each user gets an isolated browser context and page. ``browser_snapshot`` prints an outline of
the page (roles, names, ``[ref=eN]`` on interactive elements) that ``browser_click`` and
``browser_type`` address elements by.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from thinkloop.errors import ConfigError, ToolExecutionError
from thinkloop.tools.base import Tool, ToolContext, make_tool
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.builtin.web import check_address
from thinkloop.tools.workspace import Workspace, relative

CHROMIUM_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync",
)
_SNAPSHOT_JS = files("thinkloop.tools.builtin").joinpath("browser_snapshot.js").read_text


@dataclass
class BrowserSession:
    """One Chromium process shared by all users; a context and page per user, lazily."""

    executable: Path = Path("/usr/bin/chromium")
    timeout_s: float = 30.0
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
        await check_address(url, settings.fetch_allow_private)
        page = await session.page(ctx.user_id)
        response = await page.goto(url, wait_until="load")
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
        target = workspace.resolve(ctx.user_id, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        page = await session.page(ctx.user_id)
        data = await page.screenshot(path=str(target), full_page=full_page, type="png")
        return f"saved {len(data)} bytes to {relative(workspace.root(ctx.user_id), target)}"

    kw: dict[str, Any] = {"idempotent": False, "trusted_output": False}
    # Clicking and typing can submit forms (send, buy, delete): a person approves them.
    acts: dict[str, Any] = {**kw, "needs_approval": True}
    return [make_tool(browser_open, **kw), make_tool(browser_snapshot, **kw),
            make_tool(browser_click, **acts), make_tool(browser_type, **acts),
            make_tool(browser_screenshot, **kw)]
