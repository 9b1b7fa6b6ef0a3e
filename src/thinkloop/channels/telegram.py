"""Telegram through python-telegram-bot, by long polling (``getUpdates``) or, inside the
gateway, by webhook (``mode = "webhook"``: Telegram POSTs updates to
``/v1/channels/telegram/webhook``, checked by their secret token); the Bot API base URL is a
setting, so a self-hosted Bot API server (or a test's stand-in) serves as well as
Telegram's own.

Sends go through the library's :class:`~telegram.ext.AIORateLimiter` (30 messages a second
overall, 20 a minute per group) which waits the ``retry_after`` of a 429 and tries again, and
first through a :class:`~thinkloop.channels.limits.ChatLimiter` (``chat_rate_per_s``, 1 a
second in each chat; ``rate_per_s``, 30 in all), which the library does not do for a
private chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from thinkloop.channels.base import Address, Attachment, Choice, Deliver, Inbound
from thinkloop.channels.config import TelegramSettings
from thinkloop.channels.limits import ChatLimiter
from thinkloop.errors import ChannelError, ConfigError
from thinkloop.settings import export_environment

if TYPE_CHECKING:
    from telegram import Message, Update
    from telegram.ext import ExtBot, Updater

log = logging.getLogger("thinkloop.channels.telegram")
MAX_LEN = 4096  # the Bot API's limit for one message's text
ALLOWED = ["message", "callback_query"]


class _Redact(logging.Filter):
    """The Bot API puts the token in every URL, and httpx logs URLs (INFO): mask it."""

    def __init__(self, secret: str) -> None:
        super().__init__()
        self.secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if self.secret in text:
            record.msg, record.args = text.replace(self.secret, "****"), ()
        return True


# Loggers whose records can hold a URL (filters do not pass down to child loggers).
LOGGERS = ("httpx", "telegram.Bot", "telegram.ext.ExtBot", "telegram.ext.Updater")


class TelegramAdapter:
    platform = "telegram"
    max_len = MAX_LEN

    def __init__(self, settings: TelegramSettings) -> None:
        if settings.token is None or not settings.token.get_secret_value():
            raise ConfigError("the telegram channel needs a bot token: set TELEGRAM_BOT_TOKEN "
                              "(from @BotFather)")
        self.settings = settings
        self.bot: ExtBot[Any] | None = None
        self.updater: Updater | None = None
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self._consumer: asyncio.Task[None] | None = None
        self.username = ""
        self._redact = _Redact(settings.token.get_secret_value())
        self.limiter = ChatLimiter(settings.chat_rate_per_s, settings.rate_per_s)

    def _make_bot(self) -> ExtBot[Any]:
        from telegram.ext import AIORateLimiter, ExtBot
        from telegram.request import HTTPXRequest

        s = self.settings
        token = s.token.get_secret_value() if s.token else ""
        return ExtBot(token, base_url=s.api_url, base_file_url=s.files(),
                      rate_limiter=AIORateLimiter(max_retries=s.max_retries),
                      request=HTTPXRequest(connection_pool_size=16),
                      get_updates_request=HTTPXRequest(read_timeout=s.poll_timeout_s + 10))

    async def start(self, deliver: Deliver) -> None:
        from telegram.error import InvalidToken, TelegramError
        from telegram.ext import Updater

        # python-telegram-bot's coming retry_after type, opted into now: the old one warns
        # on every 429 (and the rate limiter reads the new one anyway).
        export_environment({"PTB_TIMEDELTA": "1"})
        for name in LOGGERS:
            logging.getLogger(name).addFilter(self._redact)
        bot = self._make_bot()
        try:
            await bot.initialize()  # getMe: a wrong token fails here, once
        except (InvalidToken, TelegramError) as exc:
            await _close(bot)
            if isinstance(exc, InvalidToken):
                raise ChannelError("telegram refused the bot token (TELEGRAM_BOT_TOKEN): "
                                   "check it with @BotFather") from None
            raise ChannelError(f"cannot reach the Telegram Bot API at "
                               f"{self.settings.api_url}: {exc}") from None
        self.bot = bot
        self.username = bot.username or ""
        self._consumer = asyncio.get_running_loop().create_task(self._consume(deliver))
        if self.settings.mode == "webhook":
            await self._set_webhook(bot)
            return
        self.updater = Updater(bot, self.queue)
        await self.updater.initialize()
        await self.updater.start_polling(timeout=int(self.settings.poll_timeout_s),
                                         allowed_updates=ALLOWED)
        log.info("telegram: polling as @%s", self.username)

    async def _set_webhook(self, bot: ExtBot[Any]) -> None:
        s = self.settings
        if not s.webhook_url or s.webhook_secret is None:
            raise ConfigError("channels.telegram.mode = webhook needs webhook_url (the public "
                              "URL of /v1/channels/telegram/webhook) and webhook_secret")
        await bot.set_webhook(s.webhook_url, secret_token=s.webhook_secret.get_secret_value(),
                              allowed_updates=ALLOWED)
        log.info("telegram: updates by webhook at %s as @%s", s.webhook_url, self.username)

    @property
    def webhook_route(self) -> Any:
        """The gateway's handler of Telegram's POSTs (webhook mode), else None."""
        if self.settings.mode != "webhook":
            return None
        from starlette.responses import Response

        async def telegram_webhook(request: Any) -> Response:
            from telegram import Update

            secret = self.settings.webhook_secret
            given = request.headers.get("X-Telegram-Bot-Api-Secret-Token", "")
            if secret is None or not hmac.compare_digest(given, secret.get_secret_value()):
                return Response(status_code=401)
            try:
                update = Update.de_json(await request.json(), self.bot)
            except (ValueError, TypeError, KeyError):
                return Response(status_code=400)
            self.queue.put_nowait(update)
            return Response(status_code=200)

        return telegram_webhook

    async def stop(self) -> None:
        if self.updater is not None and self.updater.running:
            await self.updater.stop()
            await self.updater.shutdown()
        if self._consumer is not None:
            self._consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._consumer
        if self.bot is not None:
            await self.bot.shutdown()
        for name in LOGGERS:
            logging.getLogger(name).removeFilter(self._redact)

    async def _consume(self, deliver: Deliver) -> None:
        from telegram import Update

        while True:
            update = await self.queue.get()
            if not isinstance(update, Update):
                continue
            try:
                msg = await self._inbound(update)
            except Exception as exc:  # one bad update must not stop the others
                log.warning("telegram: update %s not understood: %s", update.update_id, exc)
                continue
            if msg is not None:
                # Each message in a task of its own: a run waiting on a person must not hold
                # up the message that answers it.
                asyncio.get_running_loop().create_task(deliver(msg))

    async def _inbound(self, update: Update) -> Inbound | None:
        query = update.callback_query
        if query is not None and query.message is not None:
            await query.answer()  # the button stops spinning
            where = self._where(query.message)  # type: ignore[arg-type]
            return Inbound(where, str(query.from_user.id), "", query.from_user.full_name,
                           choice=query.data or "")
        m = update.message
        if m is None or m.from_user is None:
            return None
        text = m.text or m.caption or ""
        direct = m.chat.type == "private"
        mention = f"@{self.username}" if self.username else None
        addressed = direct or bool(mention and mention in text) or bool(
            m.reply_to_message and m.reply_to_message.from_user
            and m.reply_to_message.from_user.username == self.username)
        if mention:
            text = text.replace(mention, "").strip()
        files = tuple([a async for a in self._files(m)])
        return Inbound(self._where(m), str(m.from_user.id), text, m.from_user.full_name,
                       files, addressed=addressed)

    @staticmethod
    def _where(m: Message) -> Address:
        thread = str(m.message_thread_id) if m.is_topic_message and m.message_thread_id else None
        return Address("telegram", str(m.chat.id), thread)

    async def _files(self, m: Message) -> Any:
        found: list[tuple[str, str, str]] = []  # (file id, name, mime)
        if m.document is not None:
            found.append((m.document.file_id, m.document.file_name or "document",
                          m.document.mime_type or "application/octet-stream"))
        if m.photo:
            found.append((m.photo[-1].file_id, "photo.jpg", "image/jpeg"))  # the largest size
        if m.voice is not None:
            found.append((m.voice.file_id, "voice.ogg", m.voice.mime_type or "audio/ogg"))
        for file_id, name, mime in found:
            f = await self._bot().get_file(file_id)
            yield Attachment(name, mime, bytes(await f.download_as_bytearray()))

    def _bot(self) -> ExtBot[Any]:
        if self.bot is None:
            raise ChannelError("the telegram channel is not started")
        return self.bot

    async def send_text(self, to: Address, text: str) -> None:
        async with self.limiter.slot(to.chat):
            await self._bot().send_message(to.chat, text, message_thread_id=_thread(to))

    async def send_choice(self, to: Address, text: str, choices: Sequence[Choice]) -> bool:
        from telegram import InlineKeyboardButton, InlineKeyboardMarkup

        keys = InlineKeyboardMarkup([[InlineKeyboardButton(label, callback_data=data)
                                      for label, data in choices]])
        async with self.limiter.slot(to.chat):
            await self._bot().send_message(to.chat, text, reply_markup=keys,
                                           message_thread_id=_thread(to))
        return True

    async def send_voice(self, to: Address, audio: bytes) -> None:
        async with self.limiter.slot(to.chat):
            await self._bot().send_voice(to.chat, audio, message_thread_id=_thread(to))

    async def typing(self, to: Address) -> None:
        await self._bot().send_chat_action(to.chat, "typing", message_thread_id=_thread(to))


async def _close(bot: ExtBot[Any]) -> None:
    """The HTTP clients of a bot whose start failed: initialize() opened them, and shutdown()
    closes nothing of a bot that never finished initializing."""
    for request in bot._request:  # (getUpdates' client, the other methods')
        await request.shutdown()


def _thread(to: Address) -> int | None:
    return int(to.thread) if to.thread and to.thread.isdigit() else None
