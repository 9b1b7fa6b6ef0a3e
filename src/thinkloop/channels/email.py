"""E-mail: aioimaplib reads the inbox (IMAP IDLE, polling where the server has no IDLE),
aiosmtplib sends. A thread (its first Message-ID, found through References / In-Reply-To) is a
chat, so each thread is a session; a reply is threaded under the last message it answers and
quotes nothing. The sender's address is the user (allow lists name addresses)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import make_msgid, parseaddr
from typing import Any

from thinkloop.channels.base import Address, Attachment, Choice, Deliver, Inbound
from thinkloop.channels.config import EmailSettings
from thinkloop.errors import ChannelError, ConfigError

log = logging.getLogger("thinkloop.channels.email")
MAX_LEN = 200_000
_QUOTE = re.compile(r"^(>|On .+ wrote:\s*$|-----Original Message-----)", re.M)


@dataclass
class _Thread:
    """Where to answer a thread: its person, subject and the ids that keep it threaded."""

    to: str
    subject: str
    last_id: str
    references: str


def _root(msg: EmailMessage) -> str:
    refs = str(msg.get("References") or "").split()
    parent = str(msg.get("In-Reply-To") or "").strip()
    own = str(msg.get("Message-ID") or "").strip() or make_msgid()
    return (refs[0] if refs else parent or own).strip("<>")


def fresh_text(body: str) -> str:
    """What the person wrote, without the quoted message below it."""
    m = _QUOTE.search(body)
    return (body[:m.start()] if m else body).strip()


class EmailAdapter:
    platform = "email"
    max_len = MAX_LEN

    def __init__(self, settings: EmailSettings) -> None:
        if not settings.imap_host or not settings.smtp_host or not settings.username:
            raise ConfigError("the email channel needs channels.email.imap_host, smtp_host and "
                              "username (and THINKLOOP_CHANNELS_EMAIL_PASSWORD)")
        self.settings = settings
        self.address = settings.address or settings.username
        self.threads: dict[str, _Thread] = {}
        self.imap: Any = None
        self._watch: asyncio.Task[None] | None = None
        self._last_uid = 0

    async def start(self, deliver: Deliver) -> None:
        from aioimaplib import aioimaplib

        s = self.settings
        cls = aioimaplib.IMAP4_SSL if s.imap_ssl else aioimaplib.IMAP4
        try:
            self.imap = cls(host=s.imap_host, port=s.imap_port, timeout=30)
            await self.imap.wait_hello_from_server()
            login = await self.imap.login(s.username, _secret(s.password))
        except (OSError, TimeoutError) as exc:
            raise ChannelError(f"cannot reach the IMAP server {s.imap_host}:{s.imap_port}: "
                               f"{exc}") from None
        if login.result != "OK":
            await self._close()
            raise ChannelError(f"the IMAP server refused the login of {s.username!r}: check "
                               "channels.email.username and THINKLOOP_CHANNELS_EMAIL_PASSWORD")
        await self.imap.select(s.mailbox)
        self._last_uid = max(await self._uids("ALL"), default=0)
        backlog = [u for u in await self._uids("UNSEEN")]  # unread mail from before the start
        self._watch = asyncio.get_running_loop().create_task(self._run(deliver, backlog))
        log.info("email: watching %s of %s", s.mailbox, s.username)

    async def _uids(self, criterion: str) -> list[int]:
        r = await self.imap.uid_search(criterion)
        if r.result != "OK" or not r.lines:
            return []
        return [int(u) for u in bytes(r.lines[0]).split() if u.isdigit()]

    async def _run(self, deliver: Deliver, backlog: list[int]) -> None:
        for uid in backlog:
            await self._fetch(uid, deliver)
        idle = self.imap.has_capability("IDLE") and self.settings.idle
        while True:
            try:
                new = [u for u in await self._uids("ALL") if u > self._last_uid]
                for uid in new:
                    self._last_uid = max(self._last_uid, uid)
                    await self._fetch(uid, deliver)
                await (self._idle() if idle else asyncio.sleep(self.settings.poll_s))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one bad mail or a dropped connection: keep watching
                log.warning("email: %s", exc)
                await asyncio.sleep(self.settings.poll_s)

    async def _idle(self) -> None:
        """Wait for the server to announce new mail (or poll_s, whichever comes first)."""
        task = await self.imap.idle_start(timeout=self.settings.poll_s)
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await self.imap.wait_server_push(timeout=self.settings.poll_s)
        self.imap.idle_done()
        await asyncio.wait_for(task, 30)

    async def _fetch(self, uid: int, deliver: Deliver) -> None:
        r = await self.imap.uid("fetch", str(uid), "(RFC822)")
        raw = next((bytes(x) for x in r.lines if isinstance(x, bytearray)), None)
        if r.result != "OK" or raw is None:
            return
        msg = message_from_bytes(raw, policy=policy.default)
        assert isinstance(msg, EmailMessage)
        inbound = self._inbound(msg)
        if inbound is not None:
            asyncio.get_running_loop().create_task(deliver(inbound))

    def _inbound(self, msg: EmailMessage) -> Inbound | None:
        sender = parseaddr(str(msg.get("From") or ""))[1].lower()
        if not sender or sender == self.address.lower():
            return None  # our own mail, or nobody to answer
        if str(msg.get("Auto-Submitted") or "no").lower() != "no":
            return None  # an auto-reply: answering it could loop
        root = _root(msg)
        own = str(msg.get("Message-ID") or "").strip()
        refs = " ".join(filter(None, [str(msg.get("References") or "").strip(), own]))
        subject = str(msg.get("Subject") or "")
        self.threads[root] = _Thread(sender, subject, own, refs)
        body = msg.get_body(preferencelist=("plain", "html"))
        text = fresh_text(body.get_content() if body is not None else "")
        files = tuple(Attachment(p.get_filename() or "attachment", p.get_content_type(),
                                 _bytes(p.get_payload(decode=True)))
                      for p in msg.iter_attachments() if isinstance(p, EmailMessage))
        return Inbound(Address("email", root), sender, text, sender, files)

    def _reply(self, to: Address) -> EmailMessage:
        thread = self.threads.get(to.chat)
        out = EmailMessage()
        out["From"] = self.address
        if thread is None:  # a new thread: the "chat" is an address
            out["To"], out["Subject"] = to.chat, "Message from your agent"
            return out
        out["To"] = thread.to
        subject = thread.subject
        out["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
        if thread.last_id:
            out["In-Reply-To"] = thread.last_id
            out["References"] = thread.references
        return out

    async def _send(self, msg: EmailMessage) -> None:
        import aiosmtplib

        s = self.settings
        msg["Message-ID"] = make_msgid(domain=self.address.rpartition("@")[2] or None)
        msg["Auto-Submitted"] = "auto-replied"
        for attempt in range(s.max_retries + 1):
            try:
                await aiosmtplib.send(
                    msg, hostname=s.smtp_host, port=s.smtp_port, use_tls=s.smtp_ssl,
                    start_tls=s.smtp_starttls, username=s.username if s.smtp_login else None,
                    password=_secret(s.password) if s.smtp_login else None, timeout=30)
                return
            except aiosmtplib.SMTPResponseException as exc:
                # 4xx is the server's "try again later" (its rate limit); 5xx is final.
                if exc.code >= 500 or attempt == s.max_retries:
                    raise ChannelError(f"SMTP refused the message: {exc.code} {exc.message}") \
                        from None
                await asyncio.sleep(s.retry_after_s * (attempt + 1))

    async def send_text(self, to: Address, text: str) -> None:
        msg = self._reply(to)
        msg.set_content(text)
        await self._send(msg)

    async def send_choice(self, to: Address, text: str, choices: Sequence[Choice]) -> bool:
        return False  # no buttons in mail: the hub asks for a "yes" or "no" reply

    async def send_voice(self, to: Address, audio: bytes) -> None:
        msg = self._reply(to)
        msg.set_content("A voice message is attached.")
        kind = ("audio", "ogg") if audio[:4] == b"OggS" else ("audio", "wav")
        msg.add_attachment(audio, maintype=kind[0], subtype=kind[1], filename=f"voice.{kind[1]}")
        await self._send(msg)

    async def typing(self, to: Address) -> None:
        return None  # mail has no typing indicator

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await self._close()

    async def _close(self) -> None:
        if self.imap is None:
            return
        with contextlib.suppress(Exception):  # a connection already gone closes as well
            if self.imap.has_pending_idle():
                self.imap.idle_done()
            await asyncio.wait_for(self.imap.logout(), 5)
        self.imap = None


def _bytes(payload: Any) -> bytes:
    return payload if isinstance(payload, bytes) else b""


def _secret(value: Any) -> str:
    return value.get_secret_value() if value is not None else ""
