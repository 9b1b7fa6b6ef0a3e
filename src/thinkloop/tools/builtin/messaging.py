"""``send_message`` and ``ask_human`` over :class:`~thinkloop.core.channel.Channel` objects.

Which channel a run may send to is decided by a :data:`SendPolicy` (OrcBot's cross-channel and
autonomy delivery rules live in the guardrails; they plug in here as a function returning the
reason to refuse, or None to allow).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from thinkloop.core.channel import Channel, Outgoing
from thinkloop.core.errors import (
    ConfigError,
    NoOneToAskError,
    ToolArgumentsError,
    ToolExecutionError,
)
from thinkloop.core.settings import ASK_TIMEOUT_S
from thinkloop.core.tool import Tool, ToolContext, make_tool

ASK_HUMAN_GUIDANCE = (
    "When you are blocked on a decision or on information only the user has, or before an "
    "irreversible action you were not asked to take, call ask_human instead of guessing."
)

# (context of the calling run, channel name) -> reason to block, or None to allow.
SendPolicy = Callable[[ToolContext, str], str | None]


def _outgoing(ctx: ToolContext, text: str, recipient: str | None = None) -> Outgoing:
    return Outgoing(text, recipient, ctx.run_id, ctx.user_id, ctx.session_id)


def messaging_tools(
    channels: Sequence[Channel],
    *,
    policy: SendPolicy | None = None,
    ask_timeout_s: float = ASK_TIMEOUT_S,
) -> list[Tool]:
    """``send_message`` to any of ``channels`` and ``ask_human`` through the first one."""
    if not channels:
        raise ConfigError("messaging tools need at least one channel")
    by_name = {c.name: c for c in channels}
    default = channels[0]

    async def send_message(
        ctx: ToolContext, text: str, channel: str | None = None, recipient: str | None = None
    ) -> str:
        """Send a message to the user or another recipient through a channel.

        Args:
            text: the message
            channel: channel name (default: the run's own channel)
            recipient: who receives it, when the channel serves several people
        """
        target = by_name.get(channel or default.name)
        if target is None:
            raise ToolArgumentsError(
                f"unknown channel {channel!r}; available: {', '.join(by_name)}")
        reason = policy(ctx, target.name) if policy else None
        if reason:
            raise ToolExecutionError(f"send to {target.name!r} blocked: {reason}")
        await target.send(_outgoing(ctx, text, recipient))
        return f"message sent via {target.name}" + (f" to {recipient}" if recipient else "")

    async def ask_human(ctx: ToolContext, question: str) -> str:
        """Ask the user a question and wait for the answer. Use when you are blocked on a
        decision or information only the user has.

        Args:
            question: the question, self-contained
        """
        try:
            answer = await default.ask(_outgoing(ctx, question), ask_timeout_s)
        except NoOneToAskError as exc:
            return str(exc)  # an observation, not a failure: the model answers without it
        return f"The user answered: {answer}"

    # A channel that reaches only the person who asked (a container's host) says nothing
    # the answer could not; any other may reach people the run should not write to.
    private = all(getattr(c, "reaches_requester_only", False) for c in channels)
    send = make_tool(send_message, idempotent=False, needs_approval=not private)
    send = replace(send, description=f"{send.description}\n\nChannels: {', '.join(by_name)}.")
    return [
        send,
        # Waiting on a person is bounded by ask_timeout_s, not the generic tool timeout.
        make_tool(ask_human, idempotent=False, timeout_s=ask_timeout_s + 5.0,
                  guidance=ASK_HUMAN_GUIDANCE),
    ]
