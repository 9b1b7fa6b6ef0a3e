"""``parse_tool_calls``: every open-model tool-call format, read in one left-to-right pass.

One regex finds the next place a format can start; a handler for that format reads the region
and either consumes it (calls, thoughts) or declines, and the scan moves on. Consumed regions
are never read again, so nothing is executed twice. Where a region ends is found by lookups
that do not rescan: a one-pass bracket map for JSON, and memoised forward searches for closing
tags, so a reply of any shape costs linear time.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from thinkloop.core.errors import JsonRepairError
from thinkloop.core.types import ToolCall, ToolSpec
from thinkloop.protocols import formats as fmt
from thinkloop.protocols import table
from thinkloop.protocols.coerce import coerce_arguments, find_spec, tool_specs
from thinkloop.protocols.formats import PLAIN_PARAM
from thinkloop.protocols.jsonfix import loads_lenient
from thinkloop.protocols.prompts import single_argument
from thinkloop.protocols.scanbase import SPACE, Unsettled
from thinkloop.protocols.tokens import TokenHandlers

_UTOOL = re.compile(r"([\w.-]+)\s*(:|>>)")
_KEY_START = re.compile(r"\s*(?:[\"']|[A-Za-z_]\w*\s*:)")
_PY_START = re.compile(r"\s*[A-Za-z_][\w.]*\s*\(")
# Broken JSON counts as an attempted call (reported, not kept as prose) only when it has both
# a quoted name key and an arguments key, so prose like "{name: your name}" stays prose.
_CALL_NAME_KEY = re.compile(r"[\"'](?:name|tool|function)[\"']\s*:")
_CALL_ARGS_KEY = re.compile(r"[\"']?(?:arguments|args|parameters|params|input|metadata|tools)"
                            r"[\"']?\s*:")
_TAGGED_CALL = re.compile(
    r"<tool_call|<function=|<<TOOL:|\[TOOL_CALLS\]|<\|python_tag\|>|<invoke\b|<function_call",
    re.IGNORECASE)
# Longer than any marker of fixed length in the table.
_LONGEST_FIXED = 48
# Every marker that can be cut off starts with one of these ("{" is whole on its own).
_MARKER_STARTS = frozenset("<[`fF")
_BLANK_RUNS = re.compile(r"\n{3,}")
_SEMICOLON = re.compile(r"[ \t]*;[ \t]*")
# Names models give a "final answer" tool that prompts of other agents offer.
_ANSWER_NAME = re.compile(r"(?:final[_ -]?)?answer|final(?:[_ -]?(?:response|result))?|finish"
                          r"|respond(?:[_ -]to[_ -]user)?|submit(?:[_ -]answer)?", re.IGNORECASE)
_FENCE_LANGS = frozenset({"", "json", "json5", "tool_call", "tool_calls", "tool_code", "tool"})
_STRICT_FENCES = frozenset({"tool_call", "tool_calls", "tool_code", "tool"})


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
    tools: Sequence[ToolSpec | Mapping[str, Any]] | None = None,
    tool_names: Collection[str] | None = None,
    ids: Iterator[str] | None = None,
    formats: Collection[str] | None = None,
) -> Parsed:
    """Read every tool call, thinking block and the leftover prose from a model reply.

    ``tools`` (ToolSpecs or OpenAI-style tool dicts): calls are matched to these tools, their
    argument values typed by each tool's JSON schema, and a region that names no known tool
    stays in ``content`` as text (no call is invented). ``tool_names`` enables
    tool-name-as-tag calls (``<read_file><path>x</path></read_file>``) for exactly those
    names; without it any non-markup tag with child elements counts. ``ids`` supplies call ids
    (default ``call_1``, ``call_2``, ...). ``formats``: read only these formats (names from
    ``table.FORMATS``; thinking, fences and wrappers are always read); default all.
    """
    specs = tool_specs(tools) if tools is not None else None
    names = set(specs) if specs is not None else tool_names
    scan = Scan(text, names, 0, specs=specs, formats=format_key(formats))
    scan.run()
    return scan.parsed(ids if ids is not None else default_ids())


def default_ids() -> Iterator[str]:
    return (f"call_{n}" for n in itertools.count(1))


def format_key(formats: Collection[str] | None) -> frozenset[str] | None:
    if formats is None:
        return None
    unknown = set(formats) - set(table.FORMAT_NAMES)
    if unknown:
        raise ValueError(f"unknown formats {sorted(unknown)}; known: {table.FORMAT_NAMES}")
    return frozenset(formats)


def answer_of(call: tuple[str, dict[str, Any], str | None]) -> str | None:
    """The text a ``final_answer``-like call carries (None: it carries none)."""
    args = call[1]
    for key in ("answer", "final_answer", "text", "response", "content", "result", "message"):
        if isinstance(args.get(key), str):
            return str(args[key])
    strings = [v for v in args.values() if isinstance(v, str)]
    if len(strings) == 1:
        return strings[0]
    return json.dumps(args, ensure_ascii=False) if args else None


def tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.split("\n")]
    return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def fit(call: tuple[str, dict[str, Any], str | None],
        specs: Mapping[str, ToolSpec]) -> tuple[str, dict[str, Any], str | None] | None:
    """A call matched to its tool and typed by the tool's schema; None for an unknown tool."""
    name, args, err = call
    spec = find_spec(specs, name)
    if spec is None:
        return None
    if PLAIN_PARAM in args:
        target = single_argument(spec)
        if target is None:
            return spec.name, {}, err or f"{spec.name} takes several arguments; pass a JSON object"
        args = {**{k: v for k, v in args.items() if k != PLAIN_PARAM}, target: args[PLAIN_PARAM]}
    return spec.name, coerce_arguments(args, spec.parameters), err


class Scan(TokenHandlers):
    """The scanner: one marker regex, one handler per format (named as in ``table``)."""

    def __init__(self, text: str, tool_names: Collection[str] | None, depth: int, *,
                 formats: frozenset[str] | None = None, **state: Any) -> None:
        super().__init__(text, tool_names, depth, **state)
        self.formats = formats

    def run(self) -> None:
        """Scan the text; a stream's scan raises Unsettled where more text is needed."""
        pos = self._fence_rest() if self.in_fence else 0
        while pos < self.n:
            m = self._next_marker(pos)
            if m is None:
                break
            kind = m.lastgroup if m.lastgroup in _HANDLERS else _outer_group(m)
            before = (len(self.problems), self.open_attempts)
            try:
                end = getattr(self, _HANDLERS[kind])(m)
            except Unsettled as exc:
                del self.problems[before[0]:]
                self.open_attempts, self.keep, self.region = before[1], False, None
                self.stop = m.start() if exc.stop is None else exc.stop
                raise
            found, self.region = self.region, None
            if end is None:
                pos = m.start() + 1
            elif self.keep or (found is not None and not self._accept(found)):
                self.keep = False
                pos = max(end, m.start() + 1)
            else:
                self.emit(self.text[self.emitted:m.start()])
                if found is not None:
                    self._merge(found)
                self.emitted = pos = max(end, m.start() + 1)
        if self.final:
            self.emit(self.text[self.emitted:])
            self.emitted = self.n

    def _next_marker(self, pos: int) -> re.Match[str] | None:
        m = table.marker(self.formats).search(self.text, pos)
        if self.final:
            return m
        cut = self._cut_marker(pos, m.start() if m else self.n)
        if cut is not None:  # a marker cut off by the end of the text so far comes first
            self.stop = cut
            raise Unsettled
        return m

    def _cut_marker(self, pos: int, limit: int) -> int | None:
        """The first position before ``limit`` where a marker starts but the text ends.

        Such a marker reaches the end of the text, so it starts either near the end (every
        fixed marker is short) or at the last ``<`` or backtick (the open-ended ones).
        """
        text = self.text
        starts = {i for i in range(max(pos, self.n - _LONGEST_FIXED), limit)
                  if text[i] in _MARKER_STARTS}
        starts.update(text.rfind(c, pos, limit) for c in "<`")
        partial = table.partial_marker(self.formats)
        for q in sorted(starts - {-1}):
            m = partial.match(self.text, q, partial=True)
            if m is not None and m.partial:
                return q
        return None

    def _fence_rest(self) -> int:
        """Where the code fence a stream is inside ends (its body is prose)."""
        at = self.finder.find("```", 0)
        if at < 0:
            if self.final:
                return self.n
            self.stop = max(0, self.n - 2)  # "``" may be the start of the closer
            raise Unsettled(stop=self.stop)
        self.in_fence = False
        return at + 3

    def emit(self, prose: str) -> None:
        if prose:
            self.pieces.append(prose)
            self.log.append(prose)

    def _merge(self, found: fmt.Found) -> None:
        self.log.append(found)
        self.found.calls.extend(found.calls)
        self.found.thoughts.extend(found.thoughts)
        if found.text:
            self.emit(found.text)
        if found.completed is not None:
            self.found.completed = found.completed
        if found.answer is not None:
            self.found.answer = found.answer

    def _accept(self, found: fmt.Found) -> bool:
        """Fit the region's calls to the known tools; False: it names none, keep it as text.

        A call to ``final_answer`` (or a like name) where no such tool is offered is the
        reply's answer, not a call and not a problem.
        """
        if self.specs is None or not found.calls:
            return True
        fitted = [fit(c, self.specs) for c in found.calls]
        answers = []
        for call, ok in zip(found.calls, fitted, strict=True):
            if ok is not None:
                continue
            answer = answer_of(call) if _ANSWER_NAME.fullmatch(call[0]) else None
            if answer is None:
                self.problems.append(f"unknown tool {call[0]!r}")
            else:
                answers.append(answer)
        found.calls = [c for c in fitted if c is not None]
        if answers and not found.calls:
            found.answer, found.completed = answers[0], True
            return True
        return bool(found.calls)

    def parsed(self, ids: Iterator[str]) -> Parsed:
        calls = [ToolCall(next(ids), name, args, err) for name, args, err in self.found.calls]
        return Parsed(calls, tidy("".join(self.pieces)), self.found.thoughts,
                      self.found.answer, self.found.completed, self.problems)

    # Handlers: each returns the end of the region it consumed, or None to decline. ---------
    def _drop(self, m: re.Match[str]) -> int:
        return m.end()

    def _code(self, m: re.Match[str]) -> int:
        # Inline code quotes markup (`<tool_call>` is how the format looks): prose, not a call.
        return self._skip(m.end())

    def _think(self, m: re.Match[str]) -> int | None:
        closer = "<</THINK>>" if m.group().startswith("<<") else f"</{m.group('tname')}>"
        body_end, end = self._after(closer, m.end()) or (self.n, self.n)
        thought = self.text[m.end():body_end].strip()
        return self._take(fmt.Found(thoughts=[thought] if thought else []), end)

    def _think_end(self, m: re.Match[str]) -> int:
        # DeepSeek-R1 style: the template opened the block, so only its end is in the reply.
        if not self.found.thoughts and not self.thoughts_seen:
            before = ("".join(self.pieces) + self.text[self.emitted:m.start()]).strip()
            self.pieces.clear()
            self.log = [x for x in self.log if not isinstance(x, str)]
            self.emitted = m.start()
            if before:
                self.found.thoughts.append(before)
        return m.end()

    def _utool(self, m: re.Match[str]) -> int | None:
        head = self.match(_UTOOL, m.end())
        if head is None:
            self._problem("unreadable <<TOOL:NAME:param>> tag", m.start())
            return None
        name = head.group(1)
        if head.group(2) == ">>":
            return self._take(fmt.Found(calls=[(name, {}, None)]), head.end())
        start = self.space(head.end())
        json_end = self._span_end(start) if self.at("{", start) else None
        if json_end is not None:
            close = self.space(json_end)
            if self.at(">>", close):
                args, error = fmt.decode_arguments(self.text[start:json_end])
                if error is None:
                    return self._take(fmt.Found(calls=[(name, args, None)]), close + 2)
        close = self.finder.find(">>", head.end())
        if close < 0:
            if not self.final:
                raise Unsettled
            self._problem(f"<<TOOL:{name}:...>> is missing its closing '>>'", m.start())
            return None
        param = self.text[head.end():close].strip()
        args = {fmt.PLAIN_PARAM: param} if param else {}
        if param.startswith("{"):
            decoded, error = fmt.decode_arguments(param)
            args = decoded if error is None else args
        return self._take(fmt.Found(calls=[(name, args, None)]), close + 2)

    def _fence(self, m: re.Match[str]) -> int | None:
        line_end = self.find("\n", m.end())
        if line_end < 0:
            return None
        lang = self.text[m.end():line_end].strip().lower()
        body_end = self.finder.find("```", line_end)
        if body_end < 0 and not self.final:
            if lang in _FENCE_LANGS:
                raise Unsettled  # it may hold a call: wait for its end
            # Code: its text streams out as prose while the fence stays open.
            self.in_fence = True
            raise Unsettled(stop=max(line_end + 1, self.n - 2))
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
        close = self.close_of(start)
        if close is None:
            if self.open_attempts <= 0 or not _KEY_START.match(self.text, start + 1):
                return None
            self.open_attempts -= 1
            last = self.text.rfind("}")
            end = last + 1 if last > start else self.n
        else:
            end = close + 1
            spans, run_end = self._json_run(start, end)
            if run_end > end:
                return self._json_calls(spans, run_end)
        region = self.text[start:end]
        if not self.standalone(start, end):
            # JSON inside a sentence is data or a mention of a call, never a call.
            if close is None or self._holds_tagged_call(region):
                return None
            return self._skip(end)
        try:
            value = loads_lenient(region, complete=True)
        except JsonRepairError as exc:
            if close is not None and self._holds_tagged_call(region):
                return None
            if _CALL_NAME_KEY.search(region, 0, 400) and _CALL_ARGS_KEY.search(region, 0, 4000):
                self._problem(f"a JSON tool call could not be decoded: {exc}", start)
            return None if close is None else self._skip(end)
        found = fmt.found_in_value(value, need_args=True)
        if found is None:
            return None if close is None else self._skip(end)
        return self._take(found, end)

    def _json_run(self, start: int, end: int) -> tuple[list[tuple[int, int]], int]:
        """The JSON objects from ``start`` on that ``;`` separates (Llama 3.x writes several
        calls so), and where the run ends (after a trailing ``;``)."""
        spans = [(start, end)]
        while (sep := self.match(_SEMICOLON, end)) is not None:
            end = sep.end()
            if not self.at("{", end):
                break
            close = self.close_of(end)
            if close is None:
                break
            spans.append((end, close + 1))
            end = close + 1
        return spans, end

    def _json_calls(self, spans: list[tuple[int, int]], end: int) -> int | None:
        """A run of JSON objects on a line of its own: calls if every one of them is one."""
        start = spans[0][0]
        if self.standalone(start, end):
            found = fmt.Found()
            for s, e in spans:
                try:
                    value = loads_lenient(self.text[s:e], complete=True)
                    one = fmt.found_in_value(value, need_args=True)
                except JsonRepairError:
                    one = None
                if one is None or not one.calls:
                    break
                found.calls.extend(one.calls)
            else:
                return self._take(found, end)
        return None if self._holds_tagged_call(self.text[start:end]) else self._skip(end)

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
        close = self.close_of(start)
        if close is None:
            return None
        region = self.text[start:close + 1]
        nxt = SPACE.match(self.text, start + 1).end()  # type: ignore[union-attr]
        # A region that was tried and is not calls is kept as prose and not re-read, so
        # nested brackets cost one try, not one per level.
        if self.text.startswith("{", nxt):
            try:
                found = fmt.found_in_value(loads_lenient(region, complete=True), need_args=True)
            except JsonRepairError:
                found = None
            if found and found.calls and self.standalone(start, close + 1):
                return self._take(found, close + 1)
            return None if self._holds_tagged_call(region) else self._skip(close + 1)
        if _PY_START.match(self.text, start + 1):
            calls = fmt.pythonic_calls(region)
            if calls and self.standalone(start, close + 1):
                return self._take(fmt.Found(calls=[(n, a, None) for n, a in calls]), close + 1)
            return None if self._holds_tagged_call(region) else self._skip(close + 1)
        return None


# Each format's handler is named after it; these formats share one.
_HANDLERS = {f.name: "_" + f.name for f in table.FORMATS} | {
    "uthink": "_think", "uthink_end": "_drop", "wrap": "_drop", "eot": "_drop",
    "tag": "_named_tag", "func": "_function"}


def _outer_group(m: re.Match[str]) -> str:
    """The handler group of a match whose last group is a nested name group."""
    return next(k for k, v in m.groupdict().items() if v is not None)
