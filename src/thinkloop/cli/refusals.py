"""What a run was refused, for the person at the terminal: one line each on stderr, the list
in ``--json``, and an exit code of its own when nothing the run asked for was allowed."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from thinkloop.api import RunResult

# The exit code of a run that ended, but whose every tool call with an effect was refused.
REFUSED_EXIT = 10
# How each refusal starts (guard/gate.py, tools/workspace.py) and what would allow the call.
_KINDS = (
    ("Denied by policy:", "the agent's policy denies it (a tool allow/deny list or a rule)"),
    ("Not approved:", "--approve auto runs such calls without asking"),
)
_PATHS = ("absolute paths are not allowed", "'..' is not allowed in paths", "Access refused")
_PATH_HINT = "--workspace DIR lets the file tools work in DIR"


def refused(result: RunResult) -> list[dict[str, Any]]:
    """The run's refused calls: tool, arguments, why, and how to allow it."""
    out = []
    for step in result.steps:
        for r in step.results:
            if not r.is_error:
                continue
            how = next((h for prefix, h in _KINDS if r.content.startswith(prefix)), None)
            if how is None and any(p in r.content for p in _PATHS):
                how = _PATH_HINT
            if how is not None:
                out.append({"tool": r.call.name, "arguments": r.call.arguments,
                            "reason": r.content, "allow": how})
    return out


def only_refused(result: RunResult) -> bool:
    """Whether the run's calls were refused and none of its calls ran."""
    ran = [r for s in result.steps for r in s.results if not r.is_error]
    return bool(refused(result)) and not ran


# The most of a refusal's reason its stderr line shows.
REASON_CHARS = 160


def line(item: dict[str, Any]) -> str:
    """One line: the reason's first clause (the rest, for the model, says not to retry and
    how to allow it in other words), then how to allow the call."""
    reason = " ".join(str(item["reason"]).split())
    reason = re.split(r"(?<=[^.])[.;] ", reason, maxsplit=1)[0].rstrip(".")
    if len(reason) > REASON_CHARS:
        reason = reason[:REASON_CHARS].rsplit(" ", 1)[0] + "…"
    return f"thinkloop: refused {item['tool']}: {reason} (to allow it: {item['allow']})"
