"""A platform's send rates, per chat and overall (Telegram: 1 message a second in a chat, 30
a second in all), for what the client library does not pace itself: python-telegram-bot's
rate limiter paces groups and the whole bot, not a private chat's burst of split answers."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiolimiter import AsyncLimiter

KEEP_CHATS = 4096  # the chats whose pace is remembered (an idle chat's bucket is empty anyway)


class ChatLimiter:
    """``async with limiter.slot(chat)`` before each message: it waits its turn, in the chat
    and overall. No message is dropped, only delayed."""

    def __init__(self, per_chat_per_s: float, overall_per_s: float) -> None:
        self.per_chat_per_s = per_chat_per_s
        self.overall = AsyncLimiter(overall_per_s, 1.0)
        self._chats: OrderedDict[str, AsyncLimiter] = OrderedDict()

    def _chat(self, chat: str) -> AsyncLimiter:
        limiter = self._chats.get(chat)
        if limiter is None:
            # One token a 1/rate seconds: a burst to one chat goes out spaced, not at once.
            limiter = AsyncLimiter(1, 1.0 / self.per_chat_per_s)
            self._chats[chat] = limiter
            while len(self._chats) > KEEP_CHATS:
                self._chats.popitem(last=False)
        else:
            self._chats.move_to_end(chat)
        return limiter

    @asynccontextmanager
    async def slot(self, chat: str) -> AsyncIterator[None]:
        async with self._chat(chat), self.overall:
            yield
