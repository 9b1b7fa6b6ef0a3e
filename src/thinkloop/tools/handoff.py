"""Conversation handoff between agents on one session (GoClaw's ``handoff`` event).

An agent whose definition names a team gets the ``handoff`` tool: it records in the store
that the session now belongs to a teammate, and publishes a ``handoff`` event (``transfer``,
from, to, reason). The gateway reads the record when the next turn arrives on that session
and runs it on the teammate, who loads the same session history.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from thinkloop.core.errors import ToolArgumentsError, ToolExecutionError
from thinkloop.core.events import Handoff
from thinkloop.core.tool import Tool, ToolContext, make_tool

# (session, to agent, from agent, reason): the store's ``set_handoff``.
Record = Callable[[str, str, str, str], Awaitable[None]]
REASON_MAX = 500


def handoff_tool(agent: str, team: Sequence[str], record: Record) -> Tool:
    """The ``handoff`` tool of ``agent``, which may hand its session to one of ``team``."""
    members = [m for m in team if m != agent]

    async def handoff(ctx: ToolContext, to: str, reason: str) -> str:
        """Hand this conversation to a teammate: the person's next message goes to them.

        Args:
            to: the teammate's name
            reason: why they should take over, in one sentence
        """
        if to not in members:
            raise ToolArgumentsError(f"{to!r} is not on your team; teammates: "
                                     f"{', '.join(members)}")
        if not ctx.session_id:
            raise ToolExecutionError("this conversation has no session to hand over: "
                                     "answer the person yourself")
        why = " ".join(reason.split())[:REASON_MAX]
        await record(ctx.session_id, to, agent, why)
        if ctx.emit is not None:
            ctx.emit(Handoff, direction="transfer", agent=to, child_run_id="",
                     from_agent=agent, reason=why)
        return (f"The conversation is now {to}'s: the person's next message goes to {to}, "
                f"who sees this conversation. Tell the person briefly that {to} takes over, "
                "and do not call more tools.")

    return make_tool(handoff, idempotent=False)
