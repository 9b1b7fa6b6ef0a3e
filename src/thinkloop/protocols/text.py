"""Text protocols: the model writes its tool calls in its reply and the loop parses them.

``json`` is OrcBot's decision object, ``tags`` UrchinLoop's ``<<TOOL:NAME:param>>``, ``xml``
Hermes-style ``<tool_call>{json}</tool_call>``. All three read replies with the same parser,
which accepts every format, so a model that drifts into another format still gets its call
run; the protocol decides only what the model is told and how a reply without calls ends.
Results go back as one user message, ``[Tool NAME]: result`` per call, in call order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from thinkloop.core.model import ReplyConstraint
from thinkloop.core.protocol import Act, Answer, Malformed, Reading
from thinkloop.core.types import Message, ModelResponse, ToolCall, ToolResult, ToolSpec
from thinkloop.protocols import constraint, prompts
from thinkloop.protocols.coerce import find_spec
from thinkloop.protocols.formats import PLAIN_PARAM
from thinkloop.protocols.parse import Parsed, fit, parse_tool_calls
from thinkloop.protocols.stream import StreamParser


def format_observations(results: Sequence[ToolResult]) -> str:
    """Every result in call order, UrchinLoop style; failed calls are marked ``ERROR``."""
    lines = []
    for r in results:
        mark = " ERROR" if r.is_error else ""
        lines.append(f"[Tool {r.call.name}]{mark}: {r.content}")
    return "\n".join(lines)


def conform(call: ToolCall, specs: Mapping[str, ToolSpec]) -> ToolCall:
    """Fit a parsed call to the tool it names.

    The name is matched case-insensitively (UrchinLoop writes ``WEB_SEARCH``), a plain
    ``<<TOOL:NAME:text>>`` parameter fills the tool's single argument, and values are typed
    by the tool's schema (XML carries text: ``"true"`` becomes a boolean where the schema
    wants one). A call naming an unknown tool is kept: the loop answers it with an error.
    """
    spec = find_spec(specs, call.name)
    if spec is None:
        return call
    if PLAIN_PARAM in call.arguments and prompts.single_argument(spec) is None:
        return ToolCall(call.id, spec.name, {}, (
            f"{spec.name} takes several arguments; pass them as a JSON object, e.g. "
            f"<<TOOL:{spec.name}:{prompts.dumps(prompts.example_arguments(spec))}>>"))
    fitted = fit((call.name, dict(call.arguments), call.parse_error), {spec.name: spec})
    assert fitted is not None
    return ToolCall(call.id, *fitted)


class TextProtocol:
    """Shared reading and reporting of the text protocols; subclasses set the format."""

    name = "text"
    format_hint = ""
    _section: Callable[[Sequence[ToolSpec], Callable[[str, dict[str, Any]], str]], str]
    # Builds the reply constraint for a tool list; None: replies are free text.
    _constrain: Callable[[Sequence[ToolSpec], bool], ReplyConstraint] | None = None

    def __init__(self) -> None:
        # Ids are unique for the protocol's lifetime, so calls never collide across runs.
        self._ids: Iterator[str] = (f"call_{n}" for n in itertools.count(1))
        # The tools last described to the model; replies are read against them.
        self._specs: dict[str, ToolSpec] = {}
        # The last constraint built and its tools: agents offer the same tools every step.
        self._constraint: tuple[tuple[Any, ...], ReplyConstraint] | None = None

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        """One call written in this protocol's format."""
        raise NotImplementedError

    def prompt_section(self, tools: Sequence[ToolSpec]) -> str:
        self._specs = {t.name: t for t in tools}
        return type(self)._section(tools, self.render) if tools else ""

    def model_tools(self, tools: Sequence[ToolSpec]) -> Sequence[ToolSpec]:
        return ()

    def reply_constraint(self, tools: Sequence[ToolSpec], *,
                         required: bool = False) -> ReplyConstraint | None:
        make = type(self)._constrain
        if make is None or not tools:
            return None
        key = (required, *tools)
        if self._constraint is None or self._constraint[0] != key:
            self._constraint = (key, make(tools, required))
        return self._constraint[1]

    def parse(self, text: str, model: str | None = None,
              formats: frozenset[str] | None = None) -> Parsed:
        """Every call in ``text``; ``model`` names the model that wrote it.

        With tools described, a call naming none of them stays text (a problem the model is
        told about), and a ``final_answer``-like call where no such tool is offered is the
        answer.
        """
        return parse_tool_calls(text, tools=list(self._specs.values()) or None,
                                ids=self._ids, formats=formats)

    def stream_parser(self) -> StreamParser:
        """A parser for one streamed reply, reading it as ``parse`` reads the whole reply."""
        # The protocol's own mapping, not a copy: a parser waits with each of 100k waiting
        # runs (issue 19).
        return StreamParser(specs=self._specs or None)

    def fit_call(self, call: ToolCall) -> ToolCall:
        """A parsed call fitted to the tools last described (see :func:`conform`)."""
        return conform(call, self._specs)

    def read(self, response: ModelResponse) -> Reading:
        msg = response.message
        parsed = self.parse(msg.content, response.model)
        thought = "\n\n".join(parsed.thoughts) or msg.thought
        if parsed.calls:
            calls = tuple(conform(c, self._specs) for c in parsed.calls)
            return Act(calls, parsed.content, thought)
        if parsed.problems:
            what = "; ".join(parsed.problems)
            if self._specs and any(p.startswith("unknown tool") for p in parsed.problems):
                what += f"; available tools: {', '.join(sorted(self._specs))}"
            return Malformed(self._problem(what), msg.content)
        return self.finish(parsed, thought, msg.content)

    def finish(self, parsed: Parsed, thought: str | None, raw: str) -> Reading:
        """A reply without calls: the final answer."""
        if parsed.completed and parsed.answer is not None:
            return Answer(parsed.answer, thought)
        return Answer(parsed.content, thought)

    def _problem(self, what: str) -> str:
        return f"{what}. Expected format: {self.format_hint}"

    def observations(self, assistant: Message, results: Sequence[ToolResult]) -> list[Message]:
        return [Message.observation(format_observations(results))] if results else []


class JsonProtocol(TextProtocol):
    """OrcBot: every reply is ``{"reasoning", "tools": [...], "completed", "answer"}``."""

    name = "json"
    format_hint = ('one JSON object {"reasoning": "...", "tools": [{"name": "...", '
                   '"arguments": {...}}], "completed": false}, or with "completed": true and '
                   'your final "answer"')
    _section = staticmethod(prompts.json_section)
    _constrain = staticmethod(constraint.json_constraint)

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        return prompts.dumps({"reasoning": f"I will call {name}.",
                              "tools": [{"name": name, "arguments": arguments}],
                              "completed": False})

    def finish(self, parsed: Parsed, thought: str | None, raw: str) -> Reading:
        if parsed.completed is False:
            return Malformed(self._problem(
                '"completed" is false but "tools" is empty: call a tool, or set "completed" '
                'to true with your "answer"'), raw)
        if parsed.completed and parsed.answer is None and not parsed.content:
            return Malformed(self._problem('"completed" is true but there is no "answer"'), raw)
        return super().finish(parsed, thought, raw)


class TagsProtocol(TextProtocol):
    """UrchinLoop: ``<<TOOL:NAME:param>>`` tags and ``<<THINK>>`` blocks."""

    name = "tags"
    format_hint = '<<TOOL:NAME:{"argument": "value"}>> on its own line'
    _section = staticmethod(prompts.tags_section)
    _constrain = staticmethod(constraint.tags_constraint)

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        return f"<<TOOL:{name}:{prompts.dumps(arguments)}>>" if arguments else f"<<TOOL:{name}>>"


class XmlProtocol(TextProtocol):
    """Hermes / Qwen: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""

    name = "xml"
    format_hint = '<tool_call>{"name": "tool_name", "arguments": {...}}</tool_call>'
    _section = staticmethod(prompts.xml_section)
    _constrain = staticmethod(constraint.xml_constraint)

    def render(self, name: str, arguments: dict[str, Any]) -> str:
        body = prompts.dumps({"name": name, "arguments": arguments})
        return f"<tool_call>\n{body}\n</tool_call>"
