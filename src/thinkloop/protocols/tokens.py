"""Scanner handlers for the special-token formats: DeepSeek V3/V3.1/R1 and Step-3 sections,
Kimi K2 sections, OpenAI harmony (gpt-oss), Llama ``<|python_tag|>``, Granite, InternLM2,
Mistral ``[TOOL_CALLS]`` and ``[THINK]``, Phi-4-mini ``functools[...]``, LFM2
``<|tool_call_start|>``, OLMo 3 ``<function_calls>``.

Sections are described as data (``SECTIONS``): where a section ends, how calls inside it are
delimited, and what separates a call's head (its name) from its arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from thinkloop.protocols import formats as fmt
from thinkloop.protocols.scanbase import Unsettled
from thinkloop.protocols.xmlcalls import XmlHandlers


@dataclass(frozen=True, slots=True)
class Section:
    end: str  # regex: the section's end
    call_begin: re.Pattern[str]
    call_end: re.Pattern[str]
    sep: re.Pattern[str]  # between a call's head and its arguments


def _tok(words: str) -> str:
    """A DeepSeek-style token in any spelling: fullwidth or ASCII bars, ``▁`` or ``_``."""
    return "<[｜|]" + words.replace(" ", "[▁_]") + "[｜|]>"


# DeepSeek V3/V3.1/R1, Step-3 and Kimi K2 share one shape: a section of calls, each a head (the
# name, or "function" then the name) and arguments. Their token spellings differ.
SECTION = Section(
    end=(_tok("tool calls end") + "|" + _tok("end of sentence")
         + r"|<\|tool_calls_section_end\|>|<\|im_end\|>"),
    call_begin=re.compile(_tok("tool call begin"), re.IGNORECASE),
    call_end=re.compile(_tok("tool call end"), re.IGNORECASE),
    sep=re.compile(_tok("tool sep") + r"|<\|tool_call_argument_begin\|>", re.IGNORECASE),
)
_HEAD_NAME = re.compile(r"(?:functions?\.)?([\w.-]+?)(?::\d+)?")
_V3_HEAD = re.compile(r"\s*([\w.-]+)\s*")
_HARMONY_END = r"<\|(?:end|call|return|start)\|>"
_RECIPIENT = re.compile(r"\bto=(?:functions\.)?([\w.:-]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")
_MAX_HEADER = 400
_PY_END = {"<|python_tag|>": ("<|eom_id|>", "<|eot_id|>"),
           "<|python_start|>": ("<|python_end|>", "<|eom|>", "<|eot|>")}
_MISTRAL_NAMED = re.compile(r"\s*([\w.-]+)(?:\[CALL_ID\][^\[]*)?\[ARGS\]")
_LFM2_END = "<|tool_call_end|>"
_INVOKE = re.compile(r"""\s*<((?:steptml:)?invoke)\s+name\s*=\s*["']?([\w.-]+)["']?\s*>""")


class TokenHandlers(XmlHandlers):
    """Each handler returns the end of the region it consumed, or None to decline."""

    def _section(self, m: re.Match[str]) -> int | None:
        single = "section" not in m.group() and "calls" not in m.group()
        # A call without its section ends at its own end token.
        after = self._after_re(SECTION.call_end.pattern if single else SECTION.end, m.end())
        if after is None:
            return None
        body_end, end = after
        body = self.text[m.end():body_end]
        calls = [self._section_call(part) for part in ([body] if single else _calls_in(body))]
        if not calls or any(c is None for c in calls):
            self._problem("could not read the tool calls in a special-token section", m.start())
            return self._skip(end) if end < self.n else None
        return self._take(fmt.Found(calls=[c for c in calls if c is not None]), end)

    def _section_call(self, part: str) -> tuple[str, dict[str, object], str | None] | None:
        pieces = SECTION.sep.split(SECTION.call_end.split(part, maxsplit=1)[0], maxsplit=1)
        head, args = pieces[0].strip(), pieces[1] if len(pieces) == 2 else ""
        if head.startswith("<") and not args:
            return self._invoke(head)  # Step-3 without "function<sep>": the invoke alone
        if head.lower() == "function":
            # V3/R1: "function<sep>NAME\n```json\n{...}\n```"; Step-3: an invoke element.
            if args.lstrip().startswith("<"):
                return self._invoke(args)
            named = _V3_HEAD.match(args)
            if named is None:
                return None
            head, args = named.group(1), args[named.end():]
        name = _HEAD_NAME.fullmatch(head)
        if name is None:
            return None
        arguments, err = fmt.decode_arguments(_unfence(args))
        return name.group(1), arguments, err

    @staticmethod
    def _invoke(xml: str) -> tuple[str, dict[str, object], str | None] | None:
        """Step-3's one ``<steptml:invoke name=...>`` with its parameters (read here, not by a
        nested scan: a section that runs to the end of the text must cost one pass)."""
        head = _INVOKE.match(xml)
        if head is None:
            return None
        close = xml.find("</" + head.group(1), head.end())
        body = xml[head.end():close if close >= 0 else len(xml)]
        args = fmt.xml_children(body) if body.strip() else {}
        return None if args is None else (head.group(2), args, None)

    def _harmony(self, m: re.Match[str]) -> int | None:
        msg = self.find("<|message|>", m.end())
        if msg < 0 or msg - m.start() > _MAX_HEADER or "<|start|>" in self.text[
                m.end():msg]:
            return None
        header = self.text[m.start():msg]
        body_start = msg + len("<|message|>")
        at, end = self.find_re(_HARMONY_END, body_start)
        if at < 0:
            at = end = self.n
        elif self.text[at:end].lower() == "<|start|>":
            end = at  # the next message's start is not part of this one
        body = self.text[body_start:at]
        channel = _CHANNEL.search(header)
        recipient = _RECIPIENT.search(header)
        if recipient is not None:
            args, err = fmt.decode_arguments(body)
            return self._take(fmt.Found(calls=[(recipient.group(1), args, err)]), end)
        if channel is not None and channel.group(1).lower() == "analysis":
            return self._take(fmt.Found(thoughts=[body.strip()] if body.strip() else []), end)
        return self._take(fmt.Found(text=body), end)

    def _pytag(self, m: re.Match[str]) -> int | None:
        closers = _PY_END[m.group().lower()]
        spans = [self.finder.find(t, m.end()) for t in closers]
        ends = [(s, s + len(t)) for s, t in zip(spans, closers, strict=True) if s >= 0]
        if not ends and not self.final:
            raise Unsettled
        if not ends and self.open_attempts <= 0:
            return None
        if not ends:
            self.open_attempts -= 1
        body_end, end = min(ends) if ends else (self.n, self.n)
        found = fmt.found_in_blob(self.text[m.end():body_end], pythonic=True)
        if found is None or not found.calls:
            self._problem(f"could not read the call after {m.group()}", m.start())
            return self._skip(end) if end < self.n else None
        return self._take(found, end)

    def _json_after(self, m: re.Match[str], start: int, what: str) -> int | None:
        """Calls in the JSON value (a list or one object) that starts at ``start``."""
        json_end = self._span_end(start)
        if json_end is not None:
            found = fmt.found_in_blob(self.text[start:json_end], pythonic=False)
            if found is not None and found.calls:
                return self._take(found, json_end)
        self._problem(f"could not read the calls after {what}", m.start())
        return None

    def _granite(self, m: re.Match[str]) -> int | None:
        return self._json_after(m, m.end(), "<|tool_call|>")

    def _phi4(self, m: re.Match[str]) -> int | None:
        return self._json_after(m, m.end() - 1, "functools")

    def _internlm(self, m: re.Match[str]) -> int | None:
        after = self._after_re(r"<\|action_end\|>|<\|im_end\|>", m.end())
        if after is None:
            return None
        body_end, end = after
        body = self.text[m.end():body_end].strip()
        if not body.startswith("<|plugin|>"):
            return self._skip(end)  # the code interpreter: code to show, not a tool call
        found = fmt.found_in_blob(body[len("<|plugin|>"):], pythonic=False)
        if found is None or not found.calls:
            self._problem("could not read the call after <|action_start|><|plugin|>", m.start())
            # A closed region is kept as prose; one that ran to the end of the text is not,
            # so the markers inside it are read. Closed means a closer was found, not that
            # text follows it: a stream may have just received the closer.
            return self._skip(end) if body_end < end else None
        return self._take(found, end)

    def _mistral(self, m: re.Match[str]) -> int | None:
        start = self.space(m.end())
        named = self.match(_MISTRAL_NAMED, start)
        if named is None:
            return self._json_after(m, start, "[TOOL_CALLS]")
        calls: list[tuple[str, dict[str, object], str | None]] = []
        end = start
        # v11+: "name[ARGS]{...}" per call; models often drop the [TOOL_CALLS] between calls.
        while named is not None:
            # [ARGS] holds a JSON object: a "[" there is the next marker, not arguments.
            json_end = self._span_end(named.end()) if self.at(
                "{", self.space(named.end())) else None
            if json_end is None:
                break
            args, err = fmt.decode_arguments(self.text[named.end():json_end])
            calls.append((named.group(1), args, err))
            end = json_end
            named = self.match(_MISTRAL_NAMED, end)
        if not calls:
            self._problem("could not read the calls after [TOOL_CALLS]", m.start())
            return None
        return self._take(fmt.Found(calls=calls), end)

    def _lfm2(self, m: re.Match[str]) -> int | None:
        """LFM2: ``<|tool_call_start|>[f(a=1), g(b="x")]<|tool_call_end|>`` (or JSON)."""
        start = self.space(m.end())
        if self.text[start:start + 1] in ("[", "{"):
            # Read by its brackets, so the end marker may be written inside a string value.
            close = self.close_of(start)
            found = _lfm2_calls(self.text[start:close + 1]) if close is not None else None
            if close is not None and found is not None:
                at = self.space(close + 1)
                end = at + len(_LFM2_END) if self.at(_LFM2_END, at) else close + 1
                return self._take(found, end)
        after = self._after_re(r"<\|tool_call_end\|>|<\|im_end\|>", m.end())
        if after is None:
            return None
        body_end, end = after
        body = self.text[m.end():body_end].strip()
        found = _lfm2_calls(body)
        if found is None and body.startswith("[") and not body.endswith("]"):
            found = _lfm2_calls(body + "]")  # the list's "]" lost before the end marker
        if found is None:
            self._problem("could not read the calls after <|tool_call_start|>", m.start())
            return self._skip(end) if body_end < end else None
        return self._take(found, end)

    def _olmo(self, m: re.Match[str]) -> int | None:
        """OLMo 3: ``<function_calls>f(a=1)\ng(b="x")</function_calls>``, one call a line."""
        if self.at("<", self.space(m.end())):
            return m.end()  # a wrapper of other markup (Claude-style <invoke>): drop the tag
        closed = self._after("</function_calls>", m.end())
        if closed is None:
            return m.end()
        body_end, end = closed
        body = self.text[m.end():body_end]
        calls = fmt.pythonic_calls(body, lines=True)
        if calls:
            return self._take(fmt.Found(calls=[(n, a, None) for n, a in calls]), end)
        found = fmt.found_in_blob(body, pythonic=False)
        if found is not None and found.calls:
            return self._take(found, end)
        self._problem("could not read the calls in <function_calls>", m.start())
        return self._skip(end) if body_end < end else None

    def _mthink(self, m: re.Match[str]) -> int | None:
        body_end, end = self._after("[/THINK]", m.end()) or (self.n, self.n)
        thought = self.text[m.end():body_end].strip()
        return self._take(fmt.Found(thoughts=[thought] if thought else []), end)


def _lfm2_calls(body: str) -> fmt.Found | None:
    found = fmt.found_in_blob(body, pythonic=True)
    return found if found is not None and found.calls else None


def _calls_in(body: str) -> list[str]:
    """The calls of a section, each from its begin token to its end token."""
    parts = SECTION.call_begin.split(body)
    if parts[0].strip():
        return [""]  # text before the first call: not a section this format defines
    return [p for p in parts[1:] if p.strip()] or [""]


def _unfence(args: str) -> str:
    """JSON arguments without the Markdown fence DeepSeek V3 puts around them."""
    args = args.strip()
    if args.startswith("```"):
        args = args.split("\n", 1)[1] if "\n" in args else args.lstrip("`")
        args = args.rstrip()
        args = args[:-3] if args.endswith("```") else args
    return args
