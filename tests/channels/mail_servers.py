"""Real mail servers on 127.0.0.1 for the e-mail channel: aiosmtpd's SMTP server, and
aioimaplib's IMAP test server (IDLE, UID SEARCH/FETCH) with a login that checks the password."""

from __future__ import annotations

import asyncio
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

BOT, PASSWORD = "bot@example.org", "s3cret-pass"


class SMTPHandler:
    """Keeps each message; answers ``451`` (try later) to the next ``defer`` ones."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.defer = 0
        self.deferred = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.defer:
            self.defer -= 1
            self.deferred += 1
            return "451 4.7.1 Rate limit exceeded, try again later"
        msg = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(msg, EmailMessage)
        self.messages.append(msg)
        return "250 OK"

    def texts(self) -> list[str]:
        out = []
        for m in self.messages:
            body = m.get_body(preferencelist=("plain",))
            out.append(body.get_content().strip() if body is not None else "")
        return out


class MailServers:
    def __init__(self) -> None:
        self.smtp = SMTPHandler()
        self.imap: Any = None
        self._servers: list[asyncio.Server] = []
        self.smtp_port = self.imap_port = 0

    async def start(self) -> MailServers:
        from aioimaplib.imap_testing_server import CAPABILITIES, ImapProtocol, MockImapServer
        from aiosmtpd.smtp import SMTP

        loop = asyncio.get_running_loop()

        class StrictImap(ImapProtocol):  # type: ignore[misc]
            def login(self, tag: str, *args: str) -> None:
                if args[1].strip('"') != PASSWORD:
                    self.send_tagged_line(tag, "NO [AUTHENTICATIONFAILED] Invalid credentials")
                    return
                super().login(tag, *args)

        self.imap = MockImapServer(loop=loop)

        def imap_protocol() -> Any:
            p = StrictImap(self.imap._server_state, 0, CAPABILITIES, loop)
            self.imap._connections.append(p)
            return p

        imap = await loop.create_server(imap_protocol, "127.0.0.1", 0)
        smtp = await loop.create_server(lambda: SMTP(self.smtp, hostname="127.0.0.1"),
                                        "127.0.0.1", 0)
        self._servers = [imap, smtp]
        self.imap_port = imap.sockets[0].getsockname()[1]
        self.smtp_port = smtp.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        for conn in self.imap._connections:
            if conn.transport is not None:
                conn.transport.close()
        for server in self._servers:
            server.close()
            await server.wait_closed()

    def env(self) -> dict[str, str]:
        return {"IMAP_HOST": "127.0.0.1", "IMAP_PORT": str(self.imap_port), "IMAP_SSL": "false",
                "SMTP_HOST": "127.0.0.1", "SMTP_PORT": str(self.smtp_port),
                "SMTP_LOGIN": "false", "USERNAME": BOT, "PASSWORD": PASSWORD}

    def mail(self, sender: str, text: str, subject: str = "Hello", *,
             reply_to: EmailMessage | None = None,
             attachment: tuple[str, bytes] | None = None) -> EmailMessage:
        """A person's mail arrives in the bot's inbox (IDLE connections are told)."""
        from aioimaplib.imap_testing_server import Mail

        msg = EmailMessage()
        msg["From"], msg["To"], msg["Subject"] = sender, BOT, subject
        msg["Message-ID"] = make_msgid(domain="example.com")
        if reply_to is not None:
            parent = str(reply_to["Message-ID"])
            msg["In-Reply-To"] = parent
            msg["References"] = f"{reply_to.get('References', '')} {parent}".strip()
        msg.set_content(text)
        if attachment is not None:
            msg.add_attachment(attachment[1], maintype="text", subtype="plain",
                               filename=attachment[0])
        self.imap.receive(Mail(msg), imap_user=BOT)
        return msg
