"""Shared state and lookups of the tool-call scanner (see ``parse``).

The same scanner reads a whole reply (``final=True``) and a stream that may still continue
(``final=False``). Every lookup that could give another answer once more text arrives (a
closing tag not found yet, a bracket not closed yet, spaces running into the end, a regex cut
off by the end) raises :class:`Unsettled` when the text is not final; the stream reader then
keeps that region and waits. So a region is only ever read from text that decides it, and a
stream reads exactly what the whole text reads.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Collection, Mapping

import regex

from thinkloop.core.types import ToolSpec
from thinkloop.protocols import formats as fmt
from thinkloop.protocols.jsonfix import match_brackets

CLOSING_TAG = re.compile(r"</([A-Za-z_][\w.:-]*)\s*>")
SPACE = re.compile(r"\s*")
_NONBLANK = re.compile(r"\S")
# Bodies that run to the end of the text are tried at most this often per reply.
OPEN_ATTEMPTS = 3
_PARTIAL: dict[tuple[str, int], regex.Pattern[str]] = {}


class Unsettled(Exception):
    """The text so far does not decide this region; more text may change how it reads.

    ``stop``: where the unsettled text starts, when not at the region's marker.
    """

    def __init__(self, stop: int | None = None) -> None:
        super().__init__()
        self.stop = stop


def partial_match(pattern: re.Pattern[str], text: str, pos: int) -> regex.Match[str] | None:
    """``pattern.match`` that can tell a match cut off by the end of ``text`` (``.partial``)."""
    key = (pattern.pattern, pattern.flags)
    compiled = _PARTIAL.get(key)
    if compiled is None:
        flags = regex.IGNORECASE if pattern.flags & re.IGNORECASE else 0
        compiled = _PARTIAL[key] = regex.compile(pattern.pattern, flags | regex.VERSION0)
    return compiled.match(text, pos, partial=True)


class Finder:
    """Forward search for fixed needles, memoised so a scan that only moves forward never
    searches the same stretch of text twice for the same needle."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.memo: dict[str, tuple[int, int, int]] = {}
        self._closers: dict[str, list[tuple[int, int]]] | None = None

    def find(self, needle: str, start: int) -> int:
        return self.find_re(re.escape(needle), start)[0]

    def find_re(self, pattern: str, start: int) -> tuple[int, int]:
        """(start, end) of the first match of ``pattern`` at or after ``start``, or (-1, -1)."""
        searched_from, at, end = self.memo.get(pattern, (-1, -2, -2))
        if searched_from != -1 and searched_from <= start and (at == -1 or at >= start):
            return at, end
        m = re.compile(pattern, re.IGNORECASE).search(self.text, start)
        at, end = (m.start(), m.end()) if m else (-1, -1)
        self.memo[pattern] = (start, at, end)
        return at, end

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
    """One reply being scanned: its text, what was found so far, and the region lookups.

    ``pairs``/``offset``: a bracket map kept by a stream reader over the whole stream, and
    where this text starts in it. ``line_blank``: the prose before this text on its line is
    blank (bare JSON counts as a call only on a line of its own); ``line_tail``: the end of
    that prose (a call may follow a sentence on its line).
    """

    def __init__(self, text: str, tool_names: Collection[str] | None, depth: int, *,
                 final: bool = True, pairs: Mapping[int, int] | None = None, offset: int = 0,
                 line_blank: bool = True, attempts: int = OPEN_ATTEMPTS,
                 thoughts_seen: bool = False, specs: Mapping[str, ToolSpec] | None = None,
                 in_fence: bool = False, line_tail: str = "") -> None:
        self.text = text
        self.n = len(text)
        self.tool_names = tool_names
        self.specs = specs
        self.depth = depth
        self.final = final
        self._pairs = pairs
        self.offset = offset
        self.line_blank = line_blank
        self.line_tail = line_tail
        self.thoughts_seen = thoughts_seen
        self.finder = Finder(text)
        self.pieces: list[str] = []
        self.log: list[str | fmt.Found] = []  # prose and regions, in text order
        self.found = fmt.Found()
        self.region: fmt.Found | None = None  # what the last handler read
        self.problems: list[str] = []
        self.open_attempts = attempts
        self.emitted = 0  # text before this index is already in pieces or consumed
        self.keep = False  # set by a handler that skips its region but keeps it as prose
        self.stop = 0  # where an unsettled region starts (streams)
        self.in_fence = in_fence  # a stream is inside a code fence opened earlier
        self._newline = (0, -1)  # (searched up to, last newline before it)

    def run(self) -> None:
        """Scan the whole text (the loop lives in ``parse``, beside the format markers)."""
        raise NotImplementedError

    # Lookups that more text could change: they raise Unsettled unless the text is final. --
    def close_of(self, i: int) -> int | None:
        """Index of the closer of the bracket opening at ``i``."""
        if self._pairs is None:
            self._pairs = match_brackets(self.text)
        close = self._pairs.get(i + self.offset)
        if close is None:
            if not self.final:
                raise Unsettled
            return None
        return close - self.offset

    def space(self, i: int) -> int:
        """Index of the first non-space character at or after ``i``."""
        j = SPACE.match(self.text, i).end()  # type: ignore[union-attr]
        if j >= self.n and not self.final:
            raise Unsettled
        return j

    def at(self, literal: str, i: int) -> bool:
        """Whether ``literal`` (any case) is written at ``i``."""
        seg = self.text[i:i + len(literal)].lower()
        if seg == literal.lower():
            return True
        if not self.final and len(seg) < len(literal) and literal.lower().startswith(seg):
            raise Unsettled
        return False

    def find(self, needle: str, start: int) -> int:
        at = self.finder.find(needle, start)
        if at < 0 and not self.final:
            raise Unsettled
        return at

    def find_re(self, pattern: str, start: int) -> tuple[int, int]:
        span = self.finder.find_re(pattern, start)
        if span[0] < 0 and not self.final:
            raise Unsettled
        return span

    def match(self, pattern: re.Pattern[str], i: int) -> re.Match[str] | regex.Match[str] | None:
        """``pattern.match`` at ``i``; in a stream, a match the end cut off is unsettled."""
        if self.final:
            return pattern.match(self.text, i)
        m = partial_match(pattern, self.text, i)
        if m is not None and m.partial:
            raise Unsettled
        return m

    def closing_tag(self, name: str, start: int) -> tuple[int, int] | None:
        span = self.finder.closing_tag(name, start)
        if span is None and not self.final:
            raise Unsettled
        return span

    # Results -------------------------------------------------------------------------------
    def _take(self, found: fmt.Found | None, end: int) -> int | None:
        if found is None:
            return None
        self.region = found
        return end

    def _problem(self, what: str, at: int) -> None:
        if not self.final and at + 60 > self.n:
            raise Unsettled  # the problem quotes text that has not arrived yet
        snippet = self.text[at:at + 60].replace("\n", " ")
        self.problems.append(f"{what} (at {snippet!r})")

    def _span_end(self, start: int) -> int | None:
        """Index just past the JSON value opening at ``start`` (after optional spaces)."""
        i = self.space(start)
        if self.text[i:i + 1] not in ("{", "["):
            return None
        close = self.close_of(i)
        return close + 1 if close is not None else None

    def _after(self, needle: str, start: int) -> tuple[int, int] | None:
        """(end of body, end of region) for a body closed by ``needle`` or by the text's end.

        A body that runs to the end of the text is tried only a few times per reply: each try
        reads the rest of the text, so unlimited tries would make many openers quadratic.
        """
        at = self.find(needle, start)
        if at >= 0:
            return at, at + len(needle)
        return self._to_end()

    def _after_re(self, pattern: str, start: int) -> tuple[int, int] | None:
        """As ``_after``, for a closer written in several ways."""
        at, end = self.find_re(pattern, start)
        return (at, end) if at >= 0 else self._to_end()

    def _to_end(self) -> tuple[int, int] | None:
        if self.open_attempts <= 0:
            return None
        self.open_attempts -= 1
        return self.n, self.n

    def _skip(self, end: int) -> int:
        """Step over a region (code, JSON data) without scanning it, keeping it as prose."""
        self.keep = True
        return end

    # Bare JSON and pythonic lists are calls only on a line of their own. -----------------
    def standalone(self, start: int, end: int) -> bool:
        """Whether ``text[start:end]`` stands alone on its line: a call, not a mention.

        A sentence may come before it on its line (``Let me check. {"name": ...}``); nothing
        but spaces and end-of-turn tokens may follow it, so JSON inside a sentence is data.
        """
        return self._line_blank_after(end) and (
            self._line_blank_before(start) or self._after_sentence(start))

    def _after_sentence(self, start: int) -> bool:
        """Whether the prose before ``start`` on its line ends a sentence (only its end is
        looked at, so many openers on one long line stay linear)."""
        lo = max(self.emitted, start - SENTENCE_WINDOW)
        seg = self.text[lo:start]
        nl = seg.rfind("\n")
        if nl >= 0:
            seg = seg[nl + 1:]
        elif lo == 0:
            seg = self.line_tail + seg  # a stream: prose settled before this text
        return _SENTENCE_END.search(seg[-SENTENCE_WINDOW:]) is not None

    def _line_blank_before(self, start: int) -> bool:
        upto, last = self._newline
        if start < upto:
            last = self.text.rfind("\n", self.emitted, start)
        elif start > upto:
            nl = self.text.rfind("\n", upto, start)
            last = nl if nl >= 0 else last
            self._newline = (start, last)
        if last >= self.emitted:
            return _NONBLANK.search(self.text, last + 1, start) is None
        blank = _NONBLANK.search(self.text, self.emitted, start) is None
        return blank and (self.emitted > 0 or self.line_blank)

    def _line_blank_after(self, end: int) -> bool:
        if self.match(_TAIL_LINE, end) is not None:
            return True
        return self.final and _TAIL_END.match(self.text, end) is not None


# What may follow a standalone call on its line: spaces and end-of-turn tokens.
_TAIL = r"[ \t\r\f\v]*(?:(?:<\|\w{1,30}\|>|</s>|<｜[^｜\n]{1,40}｜>)[ \t\r\f\v]*)*"
_TAIL_LINE = re.compile(_TAIL + r"\n")
_TAIL_END = re.compile(_TAIL + r"\Z")
# A sentence's end: a word, then . ! or ? (and a closing quote), then spaces.
_SENTENCE_END = re.compile(r"\w[.!?][\"'”)]?[ \t]*\Z")
SENTENCE_WINDOW = 64
