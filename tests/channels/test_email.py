"""The e-mail channel end to end: aioimaplib (IDLE) against a real IMAP server, aiosmtplib
against aiosmtpd, the hub and a real agent on the loopback model server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.channels.conftest import env_for, until
from tests.channels.mail_servers import BOT, MailServers

from thinkloop.channels.service import ChannelService
from thinkloop.errors import ChannelError
from thinkloop.settings import load_settings
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

ANN = "ann@example.com"


def said(text: str | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None) -> Reply:
    return Reply(body=completion(text, calls))


@asynccontextmanager
async def serving(model: OpenAIServer, home: Path, store: Any, **channel: Any
                  ) -> AsyncIterator[tuple[MailServers, ChannelService]]:
    mail = await MailServers().start()
    env = env_for(model, home)
    for key, value in {**mail.env(), "POLL_S": "2", "RETRY_AFTER_S": "0.1", **channel}.items():
        raw = value if isinstance(value, str) else json.dumps(value)
        env[f"THINKLOOP_CHANNELS_EMAIL_{key.upper()}"] = raw
    settings = load_settings(env=env, cwd=home)
    service = ChannelService(settings, store, ["email"], agents_file=home / "agents.yaml")
    try:
        await service.start()
        yield mail, service
    finally:
        await service.stop()
        await mail.stop()
        model.clear()


async def test_a_mail_is_answered_in_its_thread_and_a_reply_continues_the_session(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (mail, _):
        model.enqueue(said("The meeting is at 10."))
        first = mail.mail(ANN, "When is the meeting?", "Meeting")
        await until(lambda: mail.smtp.texts() == ["The meeting is at 10."])
        answer = mail.smtp.messages[0]
        assert (answer["To"], answer["Subject"]) == (ANN, "Re: Meeting")
        assert answer["In-Reply-To"] == first["Message-ID"]
        model.enqueue(said("It is in room 4."))
        mail.mail(ANN, "Where?\n\nOn Monday you wrote:\n> The meeting is at 10.",
                  "Re: Meeting", reply_to=answer)
        await until(lambda: len(mail.smtp.messages) == 2)
        request = json.dumps(model.requests[-1])
        assert "When is the meeting?" in request and "The meeting is at 10." in request
        assert "> The meeting" not in request  # the quote is not the person's words
    root = str(first["Message-ID"]).strip("<>")
    assert len(await store.load(f"email:{root}")) >= 4


async def test_an_approval_and_a_question_are_answered_by_reply(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store, agent="shell") as (mail, _):
        model.enqueue(said(calls=[("shell", {"command": "echo mailed"})]),
                      said("It printed mailed."))
        mail.mail(ANN, "please run echo", "Job")
        await until(lambda: any("Reply yes or no" in t for t in mail.smtp.texts()))
        prompt = mail.smtp.messages[-1]
        mail.mail(ANN, "yes\n\n> May I run shell?", "Re: Job", reply_to=prompt)
        await until(lambda: "It printed mailed." in mail.smtp.texts())


async def test_ask_human_and_a_file_by_mail(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (mail, _):
        model.enqueue(said(calls=[("ask_human", {"question": "Which file?"})]),
                      said(calls=[("read_file", {"path": "inbox/list.txt"})]),
                      said("The list has eggs."))
        mail.mail(ANN, "read my file", "Files", attachment=("list.txt", b"eggs\n"))
        await until(lambda: "Which file?" in mail.smtp.texts())
        mail.mail(ANN, "list.txt", "Re: Files", reply_to=mail.smtp.messages[-1])
        await until(lambda: "The list has eggs." in mail.smtp.texts())
        assert "The user answered: list.txt" in json.dumps(model.requests[-2])
        assert "eggs" in json.dumps(model.requests[-1])


async def test_a_stranger_is_refused_and_a_deferred_send_is_retried(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store, allow_users=[ANN]) as (mail, _):
        mail.smtp.defer = 1  # the server's "try again later" (its rate limit)
        mail.mail("eve@example.net", "let me in")
        await until(lambda: len(mail.smtp.messages) == 1)
        assert "allow list" in mail.smtp.texts()[0] and mail.smtp.deferred == 1
        assert mail.smtp.messages[0]["To"] == "eve@example.net"
        assert model.requests == []


async def test_a_wrong_password_is_one_clear_error_at_start(
        model: OpenAIServer, home: Path, store: Any) -> None:
    with pytest.raises(ChannelError, match=f"refused the login of '{BOT}'"):
        async with serving(model, home, store, password="wrong"):
            pass
