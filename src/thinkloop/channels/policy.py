"""The seeds' delivery rules (OrcBot): who a run may send to, and who may answer it.

- A run started from a chat sends to that chat; to another chat or channel only when an
  admin started it (``cross_chat = "admin"``; ``"allow"``/``"deny"`` change that).
- A scheduled or autonomous run delivers only where its schedule says (``deliver_to``).
- A run from outside any chat (the REST API, a worker) has nowhere to deliver.
- In a group, only the person who started the run (or an admin) answers its questions and
  approvals.
"""

from __future__ import annotations

from dataclasses import dataclass

from thinkloop.channels.base import Address, ChatAdapter, Inbound
from thinkloop.channels.config import ChannelSettings

NO_ORIGIN = "this run was not started from a chat and has no delivery target"
YES = frozenset({"y", "yes", "ok", "approve", "approved", "allow", "sure", "go", "👍"})
NO = frozenset({"n", "no", "deny", "denied", "refuse", "stop", "cancel", "👎"})


@dataclass(frozen=True)
class ChatRun:
    """What the hub knows of a run it serves."""

    adapter: ChatAdapter
    settings: ChannelSettings
    origin: Inbound | None  # None: scheduled or autonomous
    deliver_to: tuple[Address, ...]

    @property
    def home(self) -> Address:
        """Where the run answers and asks: its chat, else its first delivery target."""
        return self.origin.where if self.origin else self.deliver_to[0]

    @property
    def admin(self) -> bool:
        return self.origin is not None and self.origin.sender in self.settings.admins

    def may_answer(self, sender: str) -> bool:
        if self.origin is None:
            return True
        return sender == self.origin.sender or sender in self.settings.admins


def refusal_for_sender(msg: Inbound, s: ChannelSettings) -> str | None:
    """Why ``msg``'s sender may not talk to the agent here, or None. Nobody may until the
    operator allows them (``allow_users``; ``["*"]``: everyone): the refusal tells the sender
    the id to allow."""
    if s.allow_chats is not None and msg.where.chat not in s.allow_chats:
        return "This chat is not served by this agent."
    users = s.allow_users
    if msg.sender in s.admins or (users is not None and ("*" in users or msg.sender in users)):
        return None
    var = f"THINKLOOP_CHANNELS_{msg.where.platform.upper()}_ALLOW_USERS"
    if users is None:
        return (f"This agent does not talk to anyone yet. Your id is {msg.sender}: its operator "
                f"can allow you with {var}='[\"{msg.sender}\"]'.")
    return (f"Sorry, you (id {msg.sender}) are not on this agent's allow list; "
            "ask its operator to add you.")


def refusal_for_target(run: ChatRun, target: Address) -> str | None:
    """Why ``run`` may not send to ``target``, or None."""
    if run.origin is None:
        if target in run.deliver_to:
            return None
        where = ", ".join(a.key for a in run.deliver_to)
        return f"a scheduled run delivers only where its schedule says ({where})"
    if target == run.origin.where:
        return None
    mode = run.settings.cross_chat
    if mode == "allow" or (mode == "admin" and run.admin):
        return None
    who = "only runs an admin started" if mode == "admin" else "no run"
    return f"sending to another chat or channel ({target.key}): {who} may"


def yes_no(text: str) -> bool | None:
    word = text.strip().strip(".!").lower()
    return True if word in YES else False if word in NO else None
