from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from aiohttp import web
from tests.tools.helpers import call

from thinkloop.errors import ConfigError
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.builtin.web import pinned_request, web_fetch_tool
from thinkloop.tools.builtin.websearch import (
    Brave,
    DuckDuckGo,
    SearxNG,
    Tavily,
    backend_from_settings,
    web_search_tool,
)

PAGE = """<!doctype html><html><head><title>Otters</title><style>.x{color:red}</style>
<script>var tracking = 1;</script></head><body>
<nav><a href="/home">Home</a> | <a href="/about">About</a></nav>
<article><h1>Sea otters</h1>
<p>Sea otters hold hands while they sleep so that they do not drift apart. This behaviour is
called rafting and groups of otters can number in the hundreds.</p>
<p>They use <a href="https://example.org/rocks">rocks</a> as tools to open shellfish, one of the
few mammals besides primates known to do so.</p>
<ul><li>Length: about 1.2 m</li><li>Weight: up to 45 kg</li></ul>
</article></body></html>"""


@pytest_asyncio.fixture(loop_scope="function")
async def site() -> AsyncIterator[str]:
    async def page(_: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def big(_: web.Request) -> web.Response:
        return web.Response(text="a" * 50_000, content_type="text/plain")

    async def image(_: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG....", content_type="image/png")

    done = asyncio.Event()  # set at teardown: the slow page answers only after every test

    async def slow(_: web.Request) -> web.Response:
        # Late for a 0.5 s fetch either way; the teardown no longer waits out a fixed sleep.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), 5)
        return web.Response(text="late")

    async def redirect(_: web.Request) -> web.Response:
        raise web.HTTPFound("/page")

    async def missing(_: web.Request) -> web.Response:
        raise web.HTTPNotFound()

    async def searx(request: web.Request) -> web.Response:
        assert request.query["format"] == "json"
        q = request.query["q"]
        return web.json_response({"results": [
            {"title": f"About {q}", "url": "https://a.example/1", "content": "first"},
            {"title": "Second", "url": "https://a.example/2", "content": "second"},
            {"title": "Third", "url": "https://a.example/3", "content": "third"},
        ]})

    app = web.Application()
    app.add_routes([web.get("/page", page), web.get("/big", big), web.get("/image", image),
                    web.get("/slow", slow), web.get("/redirect", redirect),
                    web.get("/missing", missing), web.get("/search", searx)])
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    done.set()
    await runner.cleanup()


def _settings(tmp_path: Path, **kw: object) -> ToolSettings:
    return ToolSettings(workspace=tmp_path, fetch_allow_private=True, **kw)  # type: ignore[arg-type]


async def test_fetch_html_as_markdown(site: str, tmp_path: Path) -> None:
    r = await call([web_fetch_tool(_settings(tmp_path))], "web_fetch", url=f"{site}/page")
    assert not r.is_error, r.content
    assert r.content.startswith(f"# {site}/page\n\n")
    assert "Sea otters hold hands while they sleep" in r.content
    assert "[rocks](https://example.org/rocks)" in r.content
    assert "- Length: about 1.2 m" in r.content
    assert "tracking" not in r.content and "color:red" not in r.content


async def test_fetch_follows_redirects(site: str, tmp_path: Path) -> None:
    r = await call([web_fetch_tool(_settings(tmp_path))], "web_fetch", url=f"{site}/redirect")
    assert r.content.startswith(f"# {site}/page") and "rafting" in r.content


async def test_fetch_refuses_loopback_by_default(site: str, tmp_path: Path) -> None:
    tool = web_fetch_tool(ToolSettings(workspace=tmp_path))
    for url in (f"{site}/page", "http://localhost:1/", "http://[::1]:1/", "http://10.0.0.1/",
                "http://169.254.169.254/latest/meta-data", "http://[::ffff:127.0.0.1]/"):
        r = await call([tool], "web_fetch", url=url)
        assert r.is_error and "non-public address" in r.content, (url, r.content)
    r = await call([tool], "web_fetch", url="file:///etc/passwd")
    assert r.is_error and "only http(s) URLs" in r.content


async def test_fetch_caps_checks_type_and_times_out(site: str, tmp_path: Path) -> None:
    tool = web_fetch_tool(_settings(tmp_path, fetch_max_bytes=1000, fetch_timeout_s=0.5))
    big = await call([tool], "web_fetch", url=f"{site}/big")
    assert big.content == (f"# {site}/big\n\n" + "a" * 1000 +
                           "\n\n[page larger than 1000 bytes; read the start only]")
    img = await call([tool], "web_fetch", url=f"{site}/image")
    assert img.is_error and "is image/png, not a text page" in img.content
    slow = await call([tool], "web_fetch", url=f"{site}/slow")
    assert slow.is_error and "did not answer within 0.5s" in slow.content
    gone = await call([tool], "web_fetch", url=f"{site}/missing")
    assert gone.is_error and "answered HTTP 404" in gone.content


async def test_web_search_searxng(site: str, tmp_path: Path) -> None:
    backend = backend_from_settings(_settings(tmp_path, search_backend="searxng",
                                              searxng_url=site))
    assert backend == SearxNG(site)
    r = await call([web_search_tool(backend)], "web_search", query="otters", count=2)
    assert r.content == ("1. About otters\n   https://a.example/1\n   first\n\n"
                         "2. Second\n   https://a.example/2\n   second")


def test_web_search_is_keyless_by_default_and_keyed_backends_are_settings(
        tmp_path: Path) -> None:
    assert backend_from_settings(ToolSettings(workspace=tmp_path)) == DuckDuckGo(20.0)
    assert backend_from_settings(ToolSettings(workspace=tmp_path, search_backend="none")) is None
    keyed = ToolSettings(workspace=tmp_path, search_backend="brave", brave_api_key="k")
    assert backend_from_settings(keyed) == Brave("k")
    keyed = ToolSettings(workspace=tmp_path, search_backend="tavily", tavily_api_key="k")
    assert backend_from_settings(keyed) == Tavily("k")
    with pytest.raises(ConfigError, match="needs its setting"):
        backend_from_settings(ToolSettings(workspace=tmp_path, search_backend="brave"))
    with pytest.raises(ConfigError, match="known backends: ddgs"):
        backend_from_settings(ToolSettings(workspace=tmp_path, search_backend="bing"))


async def test_keyless_search_without_a_network_is_one_clear_error(tmp_path: Path) -> None:
    """A real failure: ddgs goes through a proxy on a closed local port."""
    tool = web_search_tool(DuckDuckGo(5.0, proxy="http://127.0.0.1:9"))
    r = await call([tool], "web_search", query="otters")
    assert r.is_error
    assert "web search could not reach any search engine (no network" in r.content
    assert "Traceback" not in r.content


async def test_fetch_connects_to_the_address_it_checked(
    site: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the name answers a public address to the check, loopback afterwards."""
    import socket

    hits: list[str] = []
    real = socket.getaddrinfo

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "rebind.test":
            hits.append(host)
            # First answer public (the check passes), then loopback (where a second lookup
            # at connect time would go).
            ip = "1.1.1.1" if len(hits) == 1 else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    served: list[str] = []

    async def record(request: web.Request) -> web.Response:
        served.append(request.path)
        return web.Response(text="internal admin page", content_type="text/plain")

    app = web.Application()
    app.add_routes([web.get("/admin", record)])
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    settings = ToolSettings(workspace=tmp_path / "ws", fetch_timeout_s=2.0)
    try:
        r = await call([web_fetch_tool(settings)], "web_fetch",
                       url=f"http://rebind.test:{port}/admin")
    finally:
        await runner.cleanup()
    assert served == [] and "internal admin page" not in r.content
    assert r.is_error


def test_pinned_request_keeps_host_sni_and_port() -> None:
    url, headers, ext = pinned_request("https://example.org:8443/a?b=1", "93.184.216.34")
    assert str(url) == "https://93.184.216.34:8443/a?b=1"
    assert headers == {"host": "example.org:8443"} and ext == {"sni_hostname": "example.org"}
    url6, headers6, _ = pinned_request("http://example.org/x", "2606:2800:220:1::1")
    assert str(url6) == "http://[2606:2800:220:1::1]/x" and headers6 == {"host": "example.org"}
    assert pinned_request("http://localhost/x", None) == (httpx.URL("http://localhost/x"), {}, {})
