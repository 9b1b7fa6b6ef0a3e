"""What every chat platform adapter speaks: messages in (:class:`Inbound`), a place to answer
(:class:`Address`) and the few things an adapter does (:class:`ChatAdapter`)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Address:
    """A chat on a platform, and the thread in it (None: the chat itself)."""

    platform: str
    chat: str
    thread: str | None = None

    @property
    def key(self) -> str:
        """``telegram:42`` or ``slack:C1/1700.01``: the session and the policies' name."""
        return f"{self.platform}:{self.chat}" + (f"/{self.thread}" if self.thread else "")

    @staticmethod
    def parse(text: str, platform: str) -> Address:
        """``telegram:42``, ``42`` (on ``platform``) or ``slack:C1/1700.01``."""
        plat, sep, rest = text.partition(":")
        if not sep or not plat.isalpha():
            plat, rest = platform, text
        chat, _, thread = rest.partition("/")
        return Address(plat, chat, thread or None)


@dataclass(frozen=True, slots=True)
class Attachment:
    name: str
    mime: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message from a person (or a button they pressed: ``choice``)."""

    where: Address
    sender: str
    text: str
    sender_name: str = ""
    attachments: tuple[Attachment, ...] = ()
    choice: str | None = None
    # In a group the agent answers only when addressed (a mention or a reply to it).
    addressed: bool = True

    @property
    def user(self) -> str:
        """The thinkloop user id of the sender: ``telegram:1234``."""
        return f"{self.where.platform}:{self.sender}"


Deliver = Callable[[Inbound], Coroutine[Any, Any, None]]
Choice = tuple[str, str]  # (label, data sent back when pressed)


class ChatAdapter(Protocol):
    """One platform. ``start`` checks the credentials (one clear ChannelError when they are
    wrong) and begins handing messages to ``deliver``; sends retry on the platform's 429."""

    platform: str
    max_len: int  # the platform's longest message, in characters

    async def start(self, deliver: Deliver) -> None: ...

    async def stop(self) -> None: ...

    async def send_text(self, to: Address, text: str) -> None: ...

    async def send_choice(self, to: Address, text: str, choices: Sequence[Choice]) -> bool:
        """Buttons under ``text``; False when the platform has none (ask for a reply)."""
        ...

    async def send_voice(self, to: Address, audio: bytes) -> None: ...

    async def typing(self, to: Address) -> None: ...


def split_text(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at a paragraph, a line or a
    word where one is near the end, so each piece reads on its own."""
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        window = rest[:limit]
        cut = max(window.rfind("\n\n"), window.rfind("\n"), window.rfind(" "))
        if cut < limit // 2:  # no break near the end: cut the word
            cut = limit
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces
