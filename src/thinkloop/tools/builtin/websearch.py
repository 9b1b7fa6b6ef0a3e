"""``web_search`` over a pluggable backend: SearxNG, Brave or Tavily. Off unless configured."""

from __future__ import annotations

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


def backend_from_settings(settings: ToolSettings) -> SearchBackend | None:
    """The configured backend, or None when web search is off."""
    kind = (settings.search_backend or "").lower()
    if not kind:
        return None
    if kind == "searxng" and settings.searxng_url:
        return SearxNG(settings.searxng_url)
    if kind == "brave" and settings.brave_api_key:
        return Brave(settings.brave_api_key)
    if kind == "tavily" and settings.tavily_api_key:
        return Tavily(settings.tavily_api_key)
    raise ConfigError(
        f"search_backend={kind!r} needs its setting (searxng_url, brave_api_key or "
        "tavily_api_key); known backends: searxng, brave, tavily"
    )


def web_search_tool(backend: SearchBackend, timeout_s: float = 20.0) -> Tool:
    async def web_search(query: str, count: int = 5) -> str:
        """Search the web; returns numbered results with title, URL and snippet.

        Args:
            query: what to search for
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
