"""Token estimates, and context windows (from the model catalog, ``models/catalog.py``).

tiktoken's encodings are downloaded on first use (there is no offline copy on PyPI that we
trust), so the default estimate is a heuristic calibrated on English prose and code: about
four bytes of UTF-8 per token, plus a per-message overhead for the chat framing. Any exact
counter (a tokenizer's ``len(encode(text))``) can be passed instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from thinkloop.core.types import Message
from thinkloop.models.catalog import CONTEXT_WINDOWS, DEFAULT_WINDOW, facts_of, window_of

TokenCounter = Callable[[str], int]

MESSAGE_OVERHEAD = 4  # role and separators in the chat template


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
    """The model's context window from the catalog (``overrides`` first), else 32k."""
    return window_of(model_name, overrides)


def model_window(model: Any) -> int:
    """The model's own context window where it knows it (the local model: its n_ctx, through
    any wrapper), else the catalog's for its name."""
    return facts_of(model).window


__all__ = ["CONTEXT_WINDOWS", "DEFAULT_WINDOW", "MESSAGE_OVERHEAD", "TokenCounter",
           "context_window", "estimate_tokens", "heuristic_count", "message_tokens",
           "model_window"]
