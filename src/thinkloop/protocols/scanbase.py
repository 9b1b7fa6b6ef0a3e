"""Shared state and lookups of the tool-call scanner (see ``parse``)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Collection

from thinkloop.protocols import formats as fmt
from thinkloop.protocols.jsonfix import match_brackets

CLOSING_TAG = re.compile(r"</([A-Za-z_][\w.:-]*)\s*>")
SPACE = re.compile(r"\s*")
# Bodies that run to the end of the text are tried at most this often per reply.
OPEN_ATTEMPTS = 3


class Finder:
    """Forward search for fixed needles, memoised so a scan that only moves forward never
    searches the same stretch of text twice for the same needle."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.memo: dict[str, tuple[int, int]] = {}
        self._closers: dict[str, list[tuple[int, int]]] | None = None

    def find(self, needle: str, start: int) -> int:
        searched_from, at = self.memo.get(needle, (-1, -2))
        if searched_from != -1 and searched_from <= start and (at == -1 or at >= start):
            return at
        pattern = re.compile(re.escape(needle), re.IGNORECASE)
        m = pattern.search(self.text, start)
        at = m.start() if m else -1
        self.memo[needle] = (start, at)
        return at

    def closing_tag(self, name: str, start: int) -> tuple[int, int] | None:
        """(start, end) of the first ``</name>`` at or after ``start``."""
        if self._closers is None:
            self._closers = {}
            for m in CLOSING_TAG.finditer(self.text):
                self._closers.setdefault(m.group(1).lower(), []).append((m.start(), m.end()))
        spans = self._closers.get(name.lower(), [])
        k = bisect.bisect_left(spans, (start, -1))
        return spans[k] if k < len(spans) else None


class ScanBase:
    """One reply being scanned: its text, what was found so far, and the region lookups."""

    def __init__(self, text: str, tool_names: Collection[str] | None, depth: int) -> None:
        self.text = text
        self.n = len(text)
        self.tool_names = tool_names
        self.depth = depth
        self._pairs: dict[int, int] | None = None
        self.finder = Finder(text)
        self.pieces: list[str] = []
        self.found = fmt.Found()
        self.problems: list[str] = []
        self.open_attempts = OPEN_ATTEMPTS
        self.emitted = 0  # text before this index is already in pieces or consumed
        self.keep = False  # set by a handler that skips its region but keeps it as prose

    def run(self) -> None:
        """Scan the whole text (the loop lives in ``parse``, beside the format markers)."""
        raise NotImplementedError

    @property
    def pairs(self) -> dict[int, int]:
        """Bracket pairs, computed on first use (replies without JSON never pay for it)."""
        if self._pairs is None:
            self._pairs = match_brackets(self.text)
        return self._pairs

    # Results -------------------------------------------------------------------------------
    def _take(self, found: fmt.Found | None, end: int) -> int | None:
        if found is None:
            return None
        self.found.calls.extend(found.calls)
        self.found.thoughts.extend(found.thoughts)
        if found.completed is not None:
            self.found.completed = found.completed
        if found.answer is not None:
            self.found.answer = found.answer
        return end

    def _problem(self, what: str, at: int) -> None:
        snippet = self.text[at:at + 60].replace("\n", " ")
        self.problems.append(f"{what} (at {snippet!r})")

    def _span_end(self, start: int) -> int | None:
        """Index just past the JSON value opening at ``start`` (after optional spaces)."""
        i = SPACE.match(self.text, start).end()  # type: ignore[union-attr]
        close = self.pairs.get(i)
        return close + 1 if close is not None else None

    def _after(self, needle: str, start: int) -> tuple[int, int] | None:
        """(end of body, end of region) for a body closed by ``needle`` or by the text's end.

        A body that runs to the end of the text is tried only a few times per reply: each try
        reads the rest of the text, so unlimited tries would make many openers quadratic.
        """
        at = self.finder.find(needle, start)
        if at >= 0:
            return at, at + len(needle)
        if self.open_attempts <= 0:
            return None
        self.open_attempts -= 1
        return self.n, self.n

    def _skip(self, end: int) -> int:
        """Step over a region (code, JSON data) without scanning it, keeping it as prose."""
        self.keep = True
        return end
