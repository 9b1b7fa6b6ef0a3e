"""``parse_tool_calls``: every open-model tool-call format, read in one left-to-right pass.

One regex finds the next place a format can start; a handler for that format reads the region
and either consumes it (calls, thoughts) or declines, and the scan moves on. Consumed regions
are never read again, so nothing is executed twice. Where a region ends is found by lookups
that do not rescan: a one-pass bracket map for JSON, and memoised forward searches for closing
tags, so a reply of any shape costs linear time.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

from thinkloop.protocols import formats as fmt
from thinkloop.protocols.jsonfix import JsonRepairError, loads_lenient
from thinkloop.protocols.scanbase import SPACE
from thinkloop.protocols.xmlcalls import XmlHandlers
from thinkloop.types import ToolCall

_MARKER = re.compile(
    r"(?P<utool><<TOOL:)"
    r"|(?P<uthink><<THINK>>)|(?P<uthink_end><</THINK>>)"
    r"|(?P<think><(?P<tname>think|thinking|thought|antthinking|reasoning)>)"
    r"|(?P<think_end></(?:think|thinking|thought)>)"
    r"|(?P<pytag><\|python_tag\|>)"
    r"|(?P<mistral>\[TOOL_CALLS\])"
    r"|(?P<func><function=(?P<fname>[^<>\s]+)>)"
    r"|(?P<wrap></?(?:function_calls|tool_calls)>)"
    r"|(?P<xml><(?P<xname>tool_call_name|tool_call|function_call|tool_use|invoke"
    r"|minimax:tool_call)(?P<xattr>(?:[\s=][^<>]*)?)>)"
    r"|(?P<fence>```)"
    r"|(?P<brace>\{)|(?P<bracket>\[)"
    r"|(?P<tag><(?P<gname>[A-Za-z_][\w.-]*)>)",
    re.IGNORECASE,
)
_UTOOL = re.compile(r"([\w.-]+)\s*(:|>>)")
_KEY_START = re.compile(r"\s*(?:[\"']|[A-Za-z_]\w*\s*:)")
_PY_START = re.compile(r"\s*[A-Za-z_][\w.]*\s*\(")
_MISTRAL_NAMED = re.compile(r"\s*([\w.-]+)(?:\[CALL_ID\][^\[]*)?\[ARGS\]")
# Broken JSON counts as an attempted call (reported, not kept as prose) only when it has both
# a quoted name key and an arguments key, so prose like "{name: your name}" stays prose.
_CALL_NAME_KEY = re.compile(r"[\"'](?:name|tool|function)[\"']\s*:")
_CALL_ARGS_KEY = re.compile(r"[\"']?(?:arguments|args|parameters|params|input|metadata|tools)"
                            r"[\"']?\s*:")
_TAGGED_CALL = re.compile(
    r"<tool_call|<function=|<<TOOL:|\[TOOL_CALLS\]|<\|python_tag\|>|<invoke\b|<function_call",
    re.IGNORECASE)
_BLANK_RUNS = re.compile(r"\n{3,}")
_FENCE_LANGS = frozenset({"", "json", "json5", "tool_call", "tool_calls", "tool_code", "tool"})
_STRICT_FENCES = frozenset({"tool_call", "tool_calls", "tool_code", "tool"})
# Tags that are prose markup or answer wrappers, never a tool named after the tag.


@dataclass(frozen=True, slots=True)
class Parsed:
    """What a reply said: the calls it makes, its prose, its reasoning.

    ``completed``/``answer`` are set when the reply was an OrcBot decision object;
    ``problems`` names each region that looked like a tool call but could not be read.
    """

    calls: list[ToolCall]
    content: str
    thoughts: list[str]
    answer: str | None = None
    completed: bool | None = None
    problems: list[str] = field(default_factory=list)


def parse_tool_calls(
    text: str,
    *,
    tool_names: Collection[str] | None = None,
    ids: Iterator[str] | None = None,
) -> Parsed:
    """Read every tool call, thinking block and the leftover prose from a model reply.

    ``tool_names`` enables tool-name-as-tag calls (``<read_file><path>x</path></read_file>``)
    for exactly those names; without it any non-markup tag with child elements counts.
    ``ids`` supplies call ids (default ``call_1``, ``call_2``, ...).
    """
    scan = _Scan(text, tool_names, 0)
    scan.run()
    ids = ids if ids is not None else (f"call_{n}" for n in itertools.count(1))
    calls = [ToolCall(next(ids), name, args, err) for name, args, err in scan.found.calls]
    return Parsed(calls, _tidy("".join(scan.pieces)), scan.found.thoughts,
                  scan.found.answer, scan.found.completed, scan.problems)


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


class _Scan(XmlHandlers):
    def __init__(self, text: str, tool_names: Collection[str] | None, depth: int) -> None:
        super().__init__(text, tool_names, depth)
        self.handlers: dict[str, Callable[[re.Match[str]], int | None]] = {
            "utool": self._utool, "uthink": self._think, "think": self._think,
            "uthink_end": self._drop, "think_end": self._think_end, "pytag": self._pytag,
            "mistral": self._mistral, "func": self._function, "wrap": self._drop,
            "xml": self._xml, "fence": self._fence, "brace": self._brace,
            "bracket": self._bracket, "tag": self._named_tag,
        }

    def run(self) -> None:
        pos = 0
        while pos < self.n:
            m = _MARKER.search(self.text, pos)
            if m is None:
                break
            assert m.lastgroup is not None
            kind = m.lastgroup if m.lastgroup in self.handlers else _outer_group(m)
            end = self.handlers[kind](m)
            if end is None:
                pos = m.start() + 1
            elif self.keep:
                self.keep = False
                pos = end
            else:
                self.pieces.append(self.text[self.emitted:m.start()])
                self.emitted = pos = max(end, m.start() + 1)
        self.pieces.append(self.text[self.emitted:])

    # Handlers: each returns the end of the region it consumed, or None to decline. ---------
    def _drop(self, m: re.Match[str]) -> int:
        return m.end()

    def _think(self, m: re.Match[str]) -> int:
        closer = "<</THINK>>" if m.group().startswith("<<") else f"</{m.group('tname')}>"
        body_end, end = self._after(closer, m.end()) or (self.n, self.n)
        thought = self.text[m.end():body_end].strip()
        if thought:
            self.found.thoughts.append(thought)
        return end

    def _think_end(self, m: re.Match[str]) -> int:
        # DeepSeek-R1 style: the template opened the block, so only its end is in the reply.
        if not self.found.thoughts:
            before = ("".join(self.pieces) + self.text[self.emitted:m.start()]).strip()
            self.pieces.clear()
            self.emitted = m.start()
            if before:
                self.found.thoughts.append(before)
        return m.end()

    def _utool(self, m: re.Match[str]) -> int | None:
        head = _UTOOL.match(self.text, m.end())
        if head is None:
            self._problem("unreadable <<TOOL:NAME:param>> tag", m.start())
            return None
        name = head.group(1)
        if head.group(2) == ">>":
            return self._take(fmt.Found(calls=[(name, {}, None)]), head.end())
        start = SPACE.match(self.text, head.end()).end()  # type: ignore[union-attr]
        json_end = self._span_end(start) if self.text.startswith("{", start) else None
        if json_end is not None:
            close = SPACE.match(self.text, json_end).end()  # type: ignore[union-attr]
            if self.text.startswith(">>", close):
                args, error = fmt.decode_arguments(self.text[start:json_end])
                if error is None:
                    return self._take(fmt.Found(calls=[(name, args, None)]), close + 2)
        close = self.finder.find(">>", head.end())
        if close < 0:
            self._problem(f"<<TOOL:{name}:...>> is missing its closing '>>'", m.start())
            return None
        param = self.text[head.end():close].strip()
        args = {fmt.PLAIN_PARAM: param} if param else {}
        if param.startswith("{"):
            decoded, error = fmt.decode_arguments(param)
            args = decoded if error is None else args
        return self._take(fmt.Found(calls=[(name, args, None)]), close + 2)

    def _pytag(self, m: re.Match[str]) -> int | None:
        ends = [self.finder.find(t, m.end()) for t in ("<|eom_id|>", "<|eot_id|>")]
        ends = [e for e in ends if e >= 0]
        if not ends and self.open_attempts <= 0:
            return None
        if not ends:
            self.open_attempts -= 1
        body_end = min(ends) if ends else self.n
        end = body_end + 10 if ends else self.n
        found = fmt.found_in_blob(self.text[m.end():body_end], pythonic=True)
        if found is None or not found.calls:
            self._problem("could not read the call after <|python_tag|>", m.start())
            return self._skip(end) if end < self.n else None
        return self._take(found, end)

    def _mistral(self, m: re.Match[str]) -> int | None:
        start = SPACE.match(self.text, m.end()).end()  # type: ignore[union-attr]
        named = _MISTRAL_NAMED.match(self.text, start)
        if named is not None:
            json_end = self._span_end(named.end())
            if json_end is not None:
                args, err = fmt.decode_arguments(self.text[named.end():json_end])
                return self._take(fmt.Found(calls=[(named.group(1), args, err)]), json_end)
        else:
            json_end = self._span_end(start)
            if json_end is not None:
                found = fmt.found_in_blob(self.text[start:json_end], pythonic=False)
                if found is not None and found.calls:
                    return self._take(found, json_end)
        self._problem("could not read the calls after [TOOL_CALLS]", m.start())
        return None

    def _fence(self, m: re.Match[str]) -> int | None:
        line_end = self.finder.find("\n", m.end())
        if line_end < 0:
            return None
        lang = self.text[m.end():line_end].strip().lower()
        body_end = self.finder.find("```", line_end)
        end = body_end + 3 if body_end >= 0 else self.n
        body_end = body_end if body_end >= 0 else self.n
        if lang not in _FENCE_LANGS:
            return self._skip(end)
        body = self.text[line_end + 1:body_end]
        strict = lang in _STRICT_FENCES
        found = fmt.found_in_blob(body, pythonic=strict, need_args=not strict)
        if found is not None and (found.calls or found.completed is not None):
            return self._take(found, end)
        if lang in _STRICT_FENCES:
            self._problem(f"could not read the ```{lang} block", m.start())
        return None if body_end >= self.n else self._skip(end)

    def _brace(self, m: re.Match[str]) -> int | None:
        start = m.start()
        close = self.pairs.get(start)
        if close is None:
            if self.open_attempts <= 0 or not _KEY_START.match(self.text, start + 1):
                return None
            self.open_attempts -= 1
            last = self.text.rfind("}")
            end = last + 1 if last > start else self.n
        else:
            end = close + 1
        region = self.text[start:end]
        try:
            value = loads_lenient(region)
        except JsonRepairError as exc:
            if close is None or self._holds_tagged_call(region):
                return None
            if _CALL_NAME_KEY.search(region, 0, 400) and _CALL_ARGS_KEY.search(region, 0, 4000):
                self._problem(f"a JSON tool call could not be decoded: {exc}", start)
            return self._skip(end)
        found = fmt.found_in_value(value, need_args=True)
        if found is None:
            return None if close is None else self._skip(end)
        return self._take(found, end)

    def _holds_tagged_call(self, region: str) -> bool:
        """Whether an unreadable bracket region holds a tagged call, so it must be rescanned.

        Stray quotes in prose can pair a brace with one far away and swallow a real call.
        Rescanning costs the region's length, so it is allowed only a few times per reply.
        """
        if self.open_attempts <= 0 or not _TAGGED_CALL.search(region):
            return False
        self.open_attempts -= 1
        return True

    def _bracket(self, m: re.Match[str]) -> int | None:
        start = m.start()
        close = self.pairs.get(start)
        if close is None:
            return None
        region = self.text[start:close + 1]
        nxt = SPACE.match(self.text, start + 1).end()  # type: ignore[union-attr]
        # A region that was tried and is not calls is kept as prose and not re-read, so
        # nested brackets cost one try, not one per level.
        if self.text.startswith("{", nxt):
            try:
                found = fmt.found_in_value(loads_lenient(region), need_args=True)
            except JsonRepairError:
                found = None
            if found and found.calls:
                return self._take(found, close + 1)
            return None if self._holds_tagged_call(region) else self._skip(close + 1)
        if _PY_START.match(self.text, start + 1):
            calls = fmt.pythonic_calls(region)
            if calls:
                return self._take(fmt.Found(calls=[(n, a, None) for n, a in calls]), close + 1)
            return None if self._holds_tagged_call(region) else self._skip(close + 1)
        return None

def _outer_group(m: re.Match[str]) -> str:
    """The handler group of a match whose last group is a nested name group."""
    return next(k for k, v in m.groupdict().items() if v is not None)
