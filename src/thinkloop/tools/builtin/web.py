"""``web_fetch`` (URL to readable markdown) and ``web_search`` (pluggable backends).

Every hop of a fetch, redirects included, is checked against the address policy: loopback,
private, link-local and other non-public addresses are refused unless the settings allow them.
The connection then goes to the very address that was checked (the URL's host is kept for the
``Host`` header, TLS SNI and certificate checks), so a DNS answer that changes between the
check and the connect (rebinding) cannot lead to an internal address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from thinkloop.context.inputs import RunContext, parse_context
from thinkloop.core.errors import ConfigError, ToolError, ToolExecutionError
from thinkloop.core.tool import Tool, make_tool
from thinkloop.tools.builtin.settings import ToolSettings

if TYPE_CHECKING:
    import httpx  # ~100 ms to import: loaded when a page is fetched

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml",
               "application/rss+xml", "application/atom+xml", "application/ld+json")
_MAX_REDIRECTS = 5
USER_AGENT = "thinkloop/0.1 (+web_fetch)"
HEADERS = {"user-agent": USER_AGENT, "accept": "text/html,text/plain,*/*;q=0.5"}


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def check_address(url: str, allow_private: bool) -> str | None:
    """Refuse non-http(s) URLs and, unless allowed, hosts that resolve to non-public IPs.

    Returns the checked address to connect to (None when private addresses are allowed).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolExecutionError(f"only http(s) URLs with a host can be fetched: {url!r}")
    if allow_private:
        return None
    host = parts.hostname
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except OSError as exc:
        raise ToolExecutionError(f"cannot resolve {host}: {exc}") from None
    for info in infos:
        ip = ipaddress.ip_address(info[4][0])
        if not _public(ip):
            raise ToolExecutionError(
                f"refusing to fetch {url}: {host} resolves to the non-public address {ip} "
                "(set fetch_allow_private to allow local and private networks)"
            )
    return str(infos[0][4][0])


def pinned_request(url: str, ip: str | None) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
    """(URL to connect to, extra headers, request extensions) for ``url`` pinned to ``ip``."""
    import httpx

    target = httpx.URL(url)
    if ip is None:
        return target, {}, {}
    host = target.host
    netloc = host if target.port is None else f"{host}:{target.port}"
    return target.copy_with(host=ip), {"host": netloc}, {"sni_hostname": host}


def html_to_markdown(html: str, url: str) -> str:
    """The readable part of a page as markdown: trafilatura first, markdownify as fallback."""
    try:
        import trafilatura  # slow to import; only when a page is fetched
        from markdownify import markdownify
    except ImportError:
        raise ConfigError("web_fetch needs: pip install 'thinkloop[web]'") from None
    text = trafilatura.extract(
        html, url=url, output_format="markdown", include_links=True, include_tables=True,
        favor_recall=True,
    )
    if text and text.strip():
        return text.strip()
    return str(markdownify(html, heading_style="ATX", strip=["script", "style"])).strip()


async def _read_capped(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body.extend(chunk)
        if len(body) > cap:
            return bytes(body[:cap]), True
    return bytes(body), False


async def fetch(url: str, settings: ToolSettings, client: httpx.AsyncClient) -> str:
    for _ in range(_MAX_REDIRECTS + 1):
        ip = await check_address(url, settings.fetch_allow_private)
        target, headers, extensions = pinned_request(url, ip)
        async with client.stream("GET", target, headers=headers,
                                 extensions=extensions) as response:
            if response.is_redirect and "location" in response.headers:
                url = urljoin(url, response.headers["location"])
                continue
            if response.status_code >= 400:
                raise ToolExecutionError(f"{url} answered HTTP {response.status_code}")
            ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype and not ctype.startswith(_TEXT_TYPES):
                raise ToolExecutionError(
                    f"{url} is {ctype}, not a text page; web_fetch reads HTML, text and JSON only"
                )
            body, cut = await _read_capped(response, settings.fetch_max_bytes)
            text = body.decode(response.encoding or "utf-8", errors="replace")
            break
    else:
        raise ToolExecutionError(f"too many redirects (more than {_MAX_REDIRECTS})")
    if ctype in ("text/html", "application/xhtml+xml") or (not ctype and "<html" in text[:500]):
        text = await asyncio.to_thread(html_to_markdown, text, url)
    notes = []
    if cut:
        notes.append(f"[page larger than {settings.fetch_max_bytes} bytes; read the start only]")
    if len(text) > settings.fetch_max_chars:
        text = text[: settings.fetch_max_chars]
        notes.append(f"[truncated to {settings.fetch_max_chars} characters]")
    return "\n\n".join([f"# {url}", text, *notes])


def web_fetch_tool(settings: ToolSettings) -> Tool:
    async def web_fetch(url: str) -> str:
        """Fetch a web page and return its readable content as markdown.

        Args:
            url: the http(s) URL to fetch
        """
        import httpx

        timeout = httpx.Timeout(settings.fetch_timeout_s)
        async with httpx.AsyncClient(timeout=timeout, headers=HEADERS) as client:
            try:
                return await fetch(url, settings, client)
            except httpx.TimeoutException:
                raise ToolExecutionError(
                    f"{url} did not answer within {settings.fetch_timeout_s:g}s"
                ) from None
            except httpx.HTTPError as exc:
                raise ToolExecutionError(f"fetching {url} failed: {exc}") from None

    # Its URL is a request leaving the machine: provenance gating checks what it carries.
    return replace(make_tool(web_fetch, trusted_output=False, idempotent=True),
                   meta={"outbound": ("url",)})


async def context_from_cli(
    files: Sequence[str | Path] = (), url: str | None = None, *, settings: Any = None
) -> RunContext | None:
    """The ``--file PATH`` (repeatable) and ``--context-url URL`` flags of ``thinkloop run``.

    The URL's page is fetched (public addresses only, unless ``settings`` allow private ones)
    and its readable text becomes the page context; a page that cannot be fetched is one
    clear error, before the run starts.
    """
    page = None
    if url:
        page = {"url": url, "text": await _fetch_page(url, settings)}
    return parse_context({"files": [Path(f) for f in files], "page": page})


async def _fetch_page(url: str, settings: Any) -> str:
    import httpx

    settings = settings or ToolSettings()
    async with httpx.AsyncClient(timeout=settings.fetch_timeout_s, headers=HEADERS) as client:
        try:
            text: str = await fetch(url, settings, client)
        except (ToolError, httpx.HTTPError) as exc:
            raise ConfigError(f"cannot fetch --context-url {url}: {exc}") from None
    # fetch() heads its text with "# <url>"; the page block already carries the URL.
    return text.removeprefix(f"# {url}").lstrip("\n")
