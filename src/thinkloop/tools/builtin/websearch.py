"""``web_search`` over a pluggable backend: keyless by default (the ``ddgs`` metasearch
package), or SearxNG, Brave or Tavily as settings.

Results are outside content (``trusted_output=False``): the guards wrap and datamark them like
every fetched page. A search that cannot reach any engine (no network, a dead proxy) is one
clear error result, never an empty list the model would read as "nothing exists"."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from thinkloop.core.errors import ConfigError, ToolExecutionError
from thinkloop.core.tool import Tool, make_tool
from thinkloop.tools.builtin.settings import ToolSettings

if TYPE_CHECKING:
    import httpx  # ~100 ms to import: loaded when a search runs

BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
TAVILY_URL = "https://api.tavily.com/search"


@dataclass(frozen=True, slots=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class SearchBackend(Protocol):
    @property
    def name(self) -> str: ...

    async def search(self, client: httpx.AsyncClient, query: str, count: int) -> list[SearchHit]:
        ...


def _json(response: httpx.Response, backend: str) -> Any:
    if response.status_code >= 400:
        raise ToolExecutionError(f"{backend} answered HTTP {response.status_code}")
    try:
        return response.json()
    except ValueError:
        raise ToolExecutionError(f"{backend} answered something that is not JSON") from None


@dataclass(frozen=True)
class SearxNG:
    url: str
    name: str = "searxng"

    async def search(self, client: httpx.AsyncClient, query: str, count: int) -> list[SearchHit]:
        r = await client.get(self.url.rstrip("/") + "/search", params={"q": query,
                                                                      "format": "json"})
        data = _json(r, self.name)
        return [SearchHit(h.get("title", ""), h.get("url", ""), h.get("content", ""))
                for h in data.get("results", [])[:count]]


@dataclass(frozen=True)
class Brave:
    api_key: str
    url: str = BRAVE_URL
    name: str = "brave"

    async def search(self, client: httpx.AsyncClient, query: str, count: int) -> list[SearchHit]:
        r = await client.get(self.url, params={"q": query, "count": count},
                             headers={"X-Subscription-Token": self.api_key,
                                      "accept": "application/json"})
        data = _json(r, self.name)
        return [SearchHit(h.get("title", ""), h.get("url", ""), h.get("description", ""))
                for h in data.get("web", {}).get("results", [])[:count]]


@dataclass(frozen=True)
class Tavily:
    api_key: str
    url: str = TAVILY_URL
    name: str = "tavily"

    async def search(self, client: httpx.AsyncClient, query: str, count: int) -> list[SearchHit]:
        r = await client.post(self.url, json={"query": query, "max_results": count},
                              headers={"authorization": f"Bearer {self.api_key}"})
        data = _json(r, self.name)
        return [SearchHit(h.get("title", ""), h.get("url", ""), h.get("content", ""))
                for h in data.get("results", [])[:count]]


# What ddgs says when an engine could not be reached (its exceptions carry the HTTP client's
# error text): then the search failed for want of a network, not for want of results.
_UNREACHABLE = ("connect", "dns", "timed out", "timeout", "proxy", "network", "resolve")


@dataclass(frozen=True)
class DuckDuckGo:
    """Keyless metasearch through the ``ddgs`` package (DuckDuckGo and other engines).

    ``proxy``: None reads ``DDGS_PROXY`` as ddgs does."""

    timeout_s: float = 20.0
    region: str = "wt-wt"
    proxy: str | None = None
    name: str = "ddgs"

    async def search(self, client: httpx.AsyncClient, query: str, count: int) -> list[SearchHit]:
        # ddgs is synchronous (its own HTTP client): a thread keeps the event loop free.
        return await asyncio.to_thread(self._search, query, count)

    def _search(self, query: str, count: int) -> list[SearchHit]:
        try:
            from ddgs import DDGS
            from ddgs.exceptions import DDGSException
        except ImportError:
            raise ToolExecutionError("keyless web search needs the ddgs package: "
                                     "pip install 'thinkloop[search]'") from None
        try:
            rows = DDGS(proxy=self.proxy, timeout=int(self.timeout_s) or 1).text(
                query, region=self.region, max_results=count)
        except DDGSException as exc:
            text = str(exc).strip() or type(exc).__name__
            if "no results" in text.lower():
                return []
            if any(k in text.lower() for k in _UNREACHABLE):
                raise ToolExecutionError(
                    "web search could not reach any search engine (no network or the proxy "
                    f"is down): {text.splitlines()[0][:200]}") from None
            raise ToolExecutionError(f"web search failed: {text.splitlines()[0][:200]}") from None
        return [SearchHit(str(r.get("title", "")), str(r.get("href", "")), str(r.get("body", "")))
                for r in rows[:count]]


KEYLESS = "ddgs"
OFF = ("none", "off")


def backend_from_settings(settings: ToolSettings) -> SearchBackend | None:
    """The configured backend (default: keyless ddgs), or None when web search is off."""
    kind = (settings.search_backend or KEYLESS).lower()
    if kind in OFF:
        return None
    if kind == KEYLESS:
        return DuckDuckGo(settings.fetch_timeout_s)
    if kind == "searxng" and settings.searxng_url:
        return SearxNG(settings.searxng_url)
    if kind == "brave" and settings.brave_api_key:
        return Brave(settings.brave_api_key)
    if kind == "tavily" and settings.tavily_api_key:
        return Tavily(settings.tavily_api_key)
    raise ConfigError(
        f"search_backend={kind!r} needs its setting (searxng_url, brave_api_key or "
        "tavily_api_key); known backends: ddgs (keyless, the default), searxng, brave, "
        "tavily, none"
    )


def web_search_tool(backend: SearchBackend, timeout_s: float = 20.0) -> Tool:
    async def web_search(query: str, count: int = 5) -> str:
        """Search the web; returns numbered results with title, URL and snippet.

        Args:
            query: the search terms
            count: how many results (1-20)
        """
        import httpx

        n = max(1, min(count, 20))
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            try:
                hits = await backend.search(client, query, n)
            except httpx.HTTPError as exc:
                raise ToolExecutionError(f"{backend.name} search failed: {exc}") from None
        if not hits:
            return f"no results for {query!r}"
        return "\n\n".join(
            f"{i}. {h.title}\n   {h.url}\n   {h.snippet}".rstrip() for i, h in enumerate(hits, 1)
        )

    return make_tool(web_search, trusted_output=False)
