"""RunResult: what a finished run returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from pydantic import BaseModel

from thinkloop.core.types import Message, PendingApproval, RunStatus, Step, ToolCall, Usage


@dataclass(frozen=True)
class RunResult:
    run_id: str
    status: RunStatus
    output: Any
    text: str
    steps: tuple[Step, ...]
    usage: Usage
    messages: tuple[Message, ...]
    model: str
    session_id: str | None = None
    error: str | None = None
    silent: bool = False
    # status "paused": the calls waiting for a decision (``agent.resume``).
    pending: tuple[PendingApproval, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (``thinkloop run --json``) whose names are the attributes':
        ``result.steps[0].results[0].content`` is ``d["steps"][0]["results"][0]["content"]``."""
        from thinkloop.store.serialize import message_to_dict

        output = self.output
        if isinstance(output, BaseModel):
            output = output.model_dump(mode="json")
        elif is_dataclass(output) and not isinstance(output, type):
            output = asdict(output)
        return {
            "run_id": self.run_id,
            "status": self.status,
            "ok": self.ok,
            "output": output,
            "text": self.text,
            "model": self.model,
            "session_id": self.session_id,
            "error": self.error,
            "silent": self.silent,
            "pending": [asdict(p) for p in self.pending],
            "usage": _usage(self.usage),
            "steps": [
                {
                    "index": s.index,
                    "thought": s.thought,
                    "text": s.text,
                    "tool_calls": [_call(c) for c in s.tool_calls],
                    "results": [
                        {"call": _call(r.call), "content": r.content, "is_error": r.is_error,
                         "duration_s": r.duration_s}
                        for r in s.results
                    ],
                    "usage": _usage(s.usage),
                }
                for s in self.steps
            ],
            "messages": [message_to_dict(m) for m in self.messages],
        }


def _usage(u: Usage) -> dict[str, Any]:
    return {"requests": u.requests, "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens, "total_tokens": u.total_tokens,
            "cost_usd": u.cost_usd, "unpriced": u.unpriced}


def _call(c: ToolCall) -> dict[str, Any]:
    return {"id": c.id, "name": c.name, "arguments": c.arguments}
