"""The per-observation cap: a tool result above N tokens goes into history truncated, with a
note and the ``read_more`` tool to page through the rest.

A 100k-character web page would otherwise fill a small model's window in one step and stay in
every later request. The full text stays in this process (:class:`Pager`, bounded, oldest out),
readable only from the session (or, without one, the run) that produced it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace

from thinkloop.context.tokens import TokenCounter, heuristic_count
from thinkloop.core.errors import ToolArgumentsError
from thinkloop.core.settings import OBSERVATION_MAX_TOKENS
from thinkloop.core.tool import READ_MORE, Tool, ToolContext, make_tool
from thinkloop.core.types import ToolResult
from thinkloop.spotlight import spotlight

KEPT_OUTPUTS = 64


@dataclass(frozen=True)
class _Held:
    scope: str
    text: str
    tool: str
    outside: bool  # from a tool whose output is outside content (web_fetch): pages are too


def _scope(session_id: str | None, run_id: str) -> str:
    return f"session:{session_id}" if session_id else f"run:{run_id}"


class Pager:
    """Caps tool results at ``max_tokens`` and keeps the full texts of the last ``keep``."""

    def __init__(self, max_tokens: int = OBSERVATION_MAX_TOKENS, *, keep: int = KEPT_OUTPUTS,
                 counter: TokenCounter = heuristic_count) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        self.max_tokens, self.keep, self.counter = max_tokens, keep, counter
        self.held: OrderedDict[str, _Held] = OrderedDict()
        self.count = 0  # refs are short (out1, out2...): small models copy long ids badly

    def page_chars(self, text: str) -> int:
        """How many characters of ``text`` make about ``max_tokens`` tokens."""
        tokens = max(self.counter(text), 1)
        return max(1, self.max_tokens * len(text) // tokens)

    def shorten(self, result: ToolResult, session_id: str | None, run_id: str,
                outside: bool = True) -> ToolResult:
        """``result`` as history should hold it: itself when under the cap, else its first
        page with a note saying how to read on."""
        text = result.content
        if result.call.name == READ_MORE or self.counter(text) <= self.max_tokens:
            return result
        self.count += 1
        ref = f"out{self.count}"
        self.held[ref] = _Held(_scope(session_id, run_id), text, result.call.name, outside)
        while len(self.held) > self.keep:
            self.held.popitem(last=False)
        size = self.page_chars(text)
        note = (f"\n\n[Output truncated: showing characters 0-{size} of {len(text)} (the result "
                f"was over {self.max_tokens} tokens). To read on, call {READ_MORE} with "
                f'ref="{ref}" and offset={size}.]')
        return replace(result, content=text[:size] + note)

    def holds(self, session_id: str | None, run_id: str) -> bool:
        """Is there truncated output this session (or run) may read on? Only then is
        ``read_more`` offered: it would be one more tool for the model to weigh."""
        if not self.held:  # asked before every model call; most runs never page
            return False
        scope = _scope(session_id, run_id)
        return any(h.scope == scope for h in self.held.values())

    def page(self, ref: str, offset: int, session_id: str | None, run_id: str) -> str:
        held = self.held.get(ref)
        if held is None or held.scope != _scope(session_id, run_id):
            raise ToolArgumentsError(f"no truncated output {ref!r} to read (only the last "
                                     f"{self.keep} are kept, in this process)")
        text = held.text
        if not 0 <= offset < len(text):
            raise ToolArgumentsError(f"offset must be between 0 and {len(text) - 1}")
        end = offset + self.page_chars(text)
        page = text[offset:end]
        more = (f"call {READ_MORE} with ref=\"{ref}\" and offset={end} for the rest"
                if end < len(text) else "end of the output")
        if held.outside:  # marked as the guards mark the tool's own output
            page = spotlight(page, held.tool)
        return f"{page}\n\n[Characters {offset}-{min(end, len(text))} of {len(text)}; {more}.]"

    def tool(self) -> Tool:
        async def read_more(ctx: ToolContext, ref: str, offset: int) -> str:
            """Read the next part of a tool result that was truncated in the history.

            Args:
                ref: the ref the truncation note gave
                offset: the character offset the note gave
            """
            return self.page(ref, offset, ctx.session_id, ctx.run_id)

        # Its pages are the original tool's output, marked as outside content when that was
        # (so read_more itself does not make every prompt explain outside content).
        return make_tool(read_more)
