"""Token estimates and context windows.

tiktoken's encodings are downloaded on first use (there is no offline copy on PyPI that we
trust), so the default estimate is a heuristic calibrated on English prose and code: about
four bytes of UTF-8 per token, plus a per-message overhead for the chat framing. Any exact
counter (a tokenizer's ``len(encode(text))``) can be passed instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from thinkloop.core.types import Message

TokenCounter = Callable[[str], int]

MESSAGE_OVERHEAD = 4  # role and separators in the chat template
DEFAULT_WINDOW = 32_768

# Longest matching prefix wins; names are compared without a provider prefix ("openai:").
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "claude": 200_000,
    "gemini-1.5": 1_048_576,
    "gemini-2": 1_048_576,
    "gemini": 32_768,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama3.1": 131_072,
    "llama3": 8_192,
    "qwen2.5": 32_768,
    "qwen3": 40_960,
    "mistral": 32_768,
    "deepseek": 65_536,
    "smollm2": 8_192,
    "local": 4_096,  # the in-process default runs with n_ctx 4096 (THINKLOOP_LOCAL_N_CTX)
}


def heuristic_count(text: str) -> int:
    """About one token per four UTF-8 bytes (CJK text counts about one per character)."""
    if not text:
        return 0
    return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4


def _key(counter: TokenCounter) -> Any:
    # A str key for the default counter: a message's cache then holds only untracked objects
    # (str keys, int counts, bytes encodings), so the collector never walks it (issue 19).
    return "tokens" if counter is heuristic_count else ("tokens", counter)


def message_tokens(m: Message, counter: TokenCounter = heuristic_count) -> int:
    # Messages are immutable, so a count is memoised with the message: the pipeline counts
    # the whole history before every model call and must not redo the work each step.
    key = _key(counter)
    cached = m.cache.get(key)
    if cached is None:
        cached = m.cache[key] = _count(m, counter)
    return int(cached)


def _count(m: Message, counter: TokenCounter) -> int:
    n = MESSAGE_OVERHEAD + counter(m.content)
    if m.thought:
        n += counter(m.thought)
    for c in m.tool_calls:
        n += MESSAGE_OVERHEAD + counter(c.name) + counter(orjson.dumps(c.arguments).decode())
    for p in m.parts:
        n += counter(p.text) if p.text else 85  # an image tile costs about this much
    return n


def estimate_tokens(messages: Iterable[Message], counter: TokenCounter = heuristic_count) -> int:
    # message_tokens inlined: this runs over the whole history before every model call.
    key = _key(counter)
    total = 0
    for m in messages:
        cached = m.cache.get(key)
        if cached is None:
            cached = m.cache[key] = _count(m, counter)
        total += cached
    return total


def context_window(model_name: str, overrides: Mapping[str, int] | None = None) -> int:
    """The model's context window from the table (``overrides`` first), else 32k."""
    if not overrides:
        return _table_window(model_name)
    return _lookup(model_name, overrides)


def model_window(model: Any) -> int:
    """The model's own context window where it knows it (local: its n_ctx), else the table's."""
    window = getattr(model, "context_window", None)
    return int(window) if isinstance(window, int) else context_window(str(model.name))


@functools.lru_cache(maxsize=256)
def _table_window(model_name: str) -> int:
    return _lookup(model_name, None)


def _lookup(model_name: str, overrides: Mapping[str, int] | None) -> int:
    name = model_name.lower()
    # "ollama:llama3.1:8b", "openrouter:meta-llama/llama-3.1-70b": drop leading segments.
    candidates = [name]
    while (cut := min((i for i in (name.find(":"), name.find("/")) if i >= 0), default=-1)) >= 0:
        name = name[cut + 1 :]
        candidates.append(name)
    for table in (overrides or {}, CONTEXT_WINDOWS):
        for candidate in candidates:
            best = max((p for p in table if candidate.startswith(p.lower())), key=len, default="")
            if best:
                return table[best]
    return DEFAULT_WINDOW
