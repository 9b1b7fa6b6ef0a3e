"""Termination review (OrcBot): check a final answer before accepting it (``pre_reflect``).

Codes, generalised from OrcBot's channel-oriented ones:

- ERROR_UNRESOLVED: a tool failed, no later call of that tool succeeded, and the answer does
  not mention the failure;
- UNSENT_RESULTS: a tool returned substantive output (``substantive_chars``) and the short
  answer shares none of its content words;
- ACK_ONLY: after tool use, the answer is only an acknowledgement ("Done.", "On it!");
- NO_SEND: a channel task (``channel_task=True``: the person reads only what the run sends,
  not its final answer) ends without one successful message through a channel tool
  (guard/messages.py). Off by default: the CLI and the API deliver the answer itself.

A blocked completion tells the model why and the loop goes on; at most ``max_blocks`` times
per run, then the answer is accepted as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from thinkloop.core.events import ReviewBlocked
from thinkloop.core.types import ToolResult
from thinkloop.guard.messages import run_channel_tools
from thinkloop.guard.run_memory import RunMemory
from thinkloop.hooks import Hook, ReflectContext
from thinkloop.spotlight import unwrap

FIXES = {
    "ERROR_UNRESOLVED": "A tool call failed ({detail}) and was not resolved. Retry it in a "
                        "different way, or explain the failure in your answer.",
    "UNSENT_RESULTS": "Your tools returned results ({detail}) that your answer does not "
                      "use. Include the concrete findings in your answer.",
    "ACK_ONLY": "Your answer only acknowledges the task. Deliver the concrete result itself.",
    "NO_SEND": "The user cannot see your final answer: nothing was sent to them. Send the "
               "result with {detail} before you finish.",
}
_MENTIONS_FAILURE = re.compile(
    r"\b(?:error|errors|fail\w*|couldn't|could\s+not|cannot|can't|unable|not\s+(?:able|"
    r"possible|available|found|allowed|permitted|approved)|denied|refused|blocked|problem|"
    r"issue|sorry|unfortunately|timed?\s*out|gave\s+up|retry|broken|crash\w*|exception)\b",
    re.IGNORECASE)
_ACK = re.compile(
    r"^\W*(?:ok(?:ay)?|done|sure|got\s+it|will\s+do|on\s+it|noted|understood|roger|"
    r"all\s+done|finished|complete[d]?|task\s+(?:is\s+)?(?:complete[d]?|done|finished)|"
    r"(?:i'll|i\s+will)\s+(?:do|get|look|check|start|work)\b[^.!]*|"
    r"(?:i'm|i\s+am)\s+(?:working|on\s+it|looking|checking)\b[^.!]*|working\s+on\s+it)"
    r"[\s.!]*$", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]{4,}")


@dataclass(frozen=True)
class ReviewSettings:
    enabled: bool = True
    max_blocks: int = 2
    substantive_chars: int = 200
    short_answer_chars: int = 200
    channel_task: bool = False  # the answer reaches the person only through channel tools
    channel_tools: tuple[str, ...] | None = None  # None: send_message and send_* tools


def _unresolved(results: list[ToolResult]) -> list[ToolResult]:
    out = []
    for i, r in enumerate(results):
        if r.is_error and not any(
                later.call.name == r.call.name and not later.is_error
                for later in results[i + 1:]):
            out.append(r)
    return out


def review(text: str, results: list[ToolResult], s: ReviewSettings) -> dict[str, str]:
    """The codes that block ``text`` given this run's tool results, with details."""
    codes: dict[str, str] = {}
    if not results:
        return codes
    failed = _unresolved(results)
    if failed and not _MENTIONS_FAILURE.search(text):
        codes["ERROR_UNRESOLVED"] = ", ".join(dict.fromkeys(r.call.name for r in failed))
    if _ACK.match(text):
        codes["ACK_ONLY"] = ""
    # What the tools said, without the untrusted-content wrapper around it.
    said = [(r, unwrap(r.content)) for r in results if not r.is_error]
    rich = [(r, c) for r, c in said if len(c) >= s.substantive_chars]
    if rich and len(text) < s.short_answer_chars:
        answer = {w.lower() for w in _WORD.findall(text)}
        source = {w.lower() for _, c in rich for w in _WORD.findall(c)}
        if not answer & source:
            codes["UNSENT_RESULTS"] = ", ".join(dict.fromkeys(r.call.name for r, _ in rich))
    return codes


class TerminationReview:
    def __init__(self, settings: ReviewSettings | None = None) -> None:
        self.settings = settings or ReviewSettings()
        self.blocks: RunMemory[list[int]] = RunMemory(lambda: [0])

    def hooks(self) -> list[Hook]:
        return [Hook("pre_reflect", self.check, name="guard.review"),
                self.blocks.drop_hook("guard.review")]

    def check(self, ctx: ReflectContext) -> None:
        used = self.blocks.get(ctx)
        if used[0] >= self.settings.max_blocks or ctx.feedback is not None:
            return
        results = [r for step in ctx.state.steps for r in step.results]
        codes = review(ctx.text, results, self.settings)
        channel = run_channel_tools(self.settings.channel_tools, ctx)
        if self.settings.channel_task and channel and not any(
                r.call.name in channel and not r.is_error for r in results):
            codes["NO_SEND"] = " or ".join(channel)
        if not codes:
            return
        used[0] += 1
        reasons = " ".join(FIXES[c].format(detail=d) for c, d in codes.items())
        feedback = f"[Completion blocked: {', '.join(codes)}] {reasons}"
        ctx.emit(ReviewBlocked, codes=list(codes), reason=feedback, attempt=used[0])
        ctx.reject(feedback)
