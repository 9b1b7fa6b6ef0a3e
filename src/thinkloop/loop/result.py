"""RunResult: what a finished run returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from pydantic import BaseModel

from thinkloop.types import Message, PendingApproval, RunStatus, Step, Usage


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
        """A JSON-ready view (``thinkloop run --json``)."""
        output = self.output
        if isinstance(output, BaseModel):
            output = output.model_dump(mode="json")
        elif is_dataclass(output) and not isinstance(output, type):
            output = asdict(output)
        return {
            "run_id": self.run_id,
            "status": self.status,
            "output": output,
            "text": self.text,
            "model": self.model,
            "session_id": self.session_id,
            "error": self.error,
            "silent": self.silent,
            "pending": [{"run_id": p.run_id, "call_id": p.call_id, "tool": p.tool,
                         "arguments": p.arguments, "reason": p.reason,
                         "requested_at": p.requested_at} for p in self.pending],
            "usage": {
                "requests": self.usage.requests,
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "cost_usd": self.usage.cost_usd,
            },
            "steps": [
                {
                    "index": s.index,
                    "thought": s.thought,
                    "text": s.text,
                    "tool_calls": [
                        {"id": c.id, "name": c.name, "arguments": c.arguments}
                        for c in s.tool_calls
                    ],
                    "observations": [
                        {"id": r.call.id, "name": r.call.name, "content": r.content,
                         "is_error": r.is_error}
                        for r in s.results
                    ],
                }
                for s in self.steps
            ],
        }
