"""Telegram end to end: the Bot API stand-in, python-telegram-bot, the hub, a real agent on the
loopback model server. Every assertion is on the wire (Bot API calls) or on model requests."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.channels.conftest import env_for
from tests.channels.telegram_api import BotAPI

from thinkloop.channels.service import ChannelService
from thinkloop.errors import ChannelError
from thinkloop.settings import load_settings
from thinkloop.testing.openai_server import OpenAIServer, Reply, completion

CHAT, ANN = 42, 7


def said(text: str | None = None, calls: list[tuple[str, dict[str, Any]]] | None = None) -> Reply:
    return Reply(body=completion(text, calls))


@asynccontextmanager
async def serving(model: OpenAIServer, home: Path, store: Any, token: str | None = None,
                  **channel: Any) -> AsyncIterator[tuple[BotAPI, ChannelService]]:
    api = BotAPI()
    url = await api.start()
    env = env_for(model, home, api_url=f"{url}/bot", poll_timeout_s="1",
                  typing_every_s="0.2", **channel)
    env["TELEGRAM_BOT_TOKEN"] = token or api.token
    settings = load_settings(env=env, cwd=home)
    service = ChannelService(settings, store, ["telegram"], agents_file=home / "agents.yaml")
    try:
        await service.start()
        yield api, service
    finally:
        await service.stop()
        await api.stop()
        model.clear()


def request_text(model: OpenAIServer, index: int = -1) -> str:
    return json.dumps(model.requests[index])


async def test_a_message_is_answered_and_the_next_one_continues_the_session(
        model: OpenAIServer, home: Path, store: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with serving(model, home, store) as (api, _):
        model.enqueue(said("Hello Ann, 6*7 is 42."))
        api.message(CHAT, ANN, "hi, what is 6*7?")
        await api.wait_for(lambda: "Hello Ann, 6*7 is 42." in api.texts(CHAT))
        assert api.sent("sendChatAction", CHAT)[0].params["action"] == "typing"
        model.enqueue(said("You asked about 6*7."))
        api.message(CHAT, ANN, "what did I ask?")
        await api.wait_for(lambda: "You asked about 6*7." in api.texts(CHAT))
        second = request_text(model)
        assert "hi, what is 6*7?" in second and "Hello Ann, 6*7 is 42." in second
    ours = [r.getMessage() for r in caplog.records if r.name != "aiohttp.access"]  # not the API's
    assert any("getUpdates" in m for m in ours)  # requests are logged, with the token masked
    assert [m for m in ours if api.token in m] == []
    history = await store.load("telegram:42")
    assert [m.role for m in history][-4:] == ["user", "assistant", "user", "assistant"]


async def test_with_no_allow_list_nobody_is_served_and_the_sender_learns_their_id(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store, allow_users="") as (api, _):  # unset
        api.message(CHAT, ANN, "hello?")
        await api.wait_for(lambda: bool(api.texts(CHAT)))
        assert api.texts(CHAT) == [
            "This agent does not talk to anyone yet. Your id is 7: its operator can allow you "
            "with THINKLOOP_CHANNELS_TELEGRAM_ALLOW_USERS='[\"7\"]'."]
        assert model.requests == []


async def test_an_approval_is_asked_with_buttons_and_answered_in_the_chat(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store, agent="shell") as (api, _):
        model.enqueue(said(calls=[("shell", {"command": "echo approved-run"})]),
                      said("Done: it printed approved-run."))
        api.message(CHAT, ANN, "run echo")
        await api.wait_for(lambda: any("reply_markup" in c.params for c in api.sent()))
        prompt = next(c for c in api.sent() if "reply_markup" in c.params)
        assert "shell" in prompt.params["text"]
        buttons = prompt.params["reply_markup"]["inline_keyboard"][0]
        assert [b["text"] for b in buttons] == ["Approve", "Deny"]
        api.press(CHAT, ANN, buttons[0]["callback_data"])
        await api.wait_for(lambda: "Done: it printed approved-run." in api.texts(CHAT))
        assert api.sent("answerCallbackQuery")
        assert "approved-run" in request_text(model)


async def test_a_denial_can_be_typed_and_another_user_cannot_press_the_button(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store, agent="shell") as (api, _):
        # The review guard asks again after an unresolved failed call: the model insists.
        model.enqueue(said(calls=[("shell", {"command": "rm -rf /tmp/x"})]),
                      *[said("I did not run it.")] * 3)
        api.message(CHAT, ANN, "clean up")
        await api.wait_for(lambda: any("reply_markup" in c.params for c in api.sent()))
        prompt = next(c for c in api.sent() if "reply_markup" in c.params)
        yes = prompt.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        api.press(CHAT, 8, yes)  # not the person who asked
        await api.wait_for(lambda: any("Only the person" in t for t in api.texts(CHAT)))
        api.message(CHAT, ANN, "no")
        await api.wait_for(lambda: "I did not run it." in api.texts(CHAT))
        assert "denied" in request_text(model)


async def test_ask_human_is_answered_in_the_chat(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, _):
        model.enqueue(said(calls=[("ask_human", {"question": "Which city?"})]),
                      said("Booked for Paris."))
        api.message(CHAT, ANN, "book me a trip")
        await api.wait_for(lambda: "Which city?" in api.texts(CHAT))
        api.message(CHAT, ANN, "Paris")
        await api.wait_for(lambda: "Booked for Paris." in api.texts(CHAT))
        assert "The user answered: Paris" in request_text(model)


async def test_a_file_sent_to_the_bot_is_read_by_the_tools(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, _):
        model.enqueue(said(calls=[("read_file", {"path": "inbox/notes.txt"})]),
                      said("Your notes say: buy milk."))
        api.document(CHAT, ANN, "notes.txt", b"buy milk\n", caption="what do my notes say?")
        await api.wait_for(lambda: "Your notes say: buy milk." in api.texts(CHAT))
        first, second = request_text(model, -2), request_text(model)
        assert "inbox/notes.txt" in first and "what do my notes say?" in first
        assert "milk" in second  # (spotlighted: outside content is datamarked)


async def test_a_429_is_retried_after_retry_after(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, _):
        api.fail["sendMessage"] = [1]
        model.enqueue(said("Eventually delivered."))
        api.message(CHAT, ANN, "hello")
        await api.wait_for(lambda: api.texts(CHAT).count("Eventually delivered.") == 2)


async def test_a_long_answer_is_split_at_the_limit_and_no_reply_sends_nothing(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, service):
        long = " ".join(f"word{i}" for i in range(1200))  # ~8,500 characters
        model.enqueue(said(long))
        api.message(CHAT, ANN, "write a lot")
        await api.wait_for(lambda: len(api.texts(CHAT)) >= 3)
        assert all(len(t) <= 4096 for t in api.texts(CHAT))
        assert " ".join(api.texts(CHAT)) == long
        model.enqueue(said("NO_REPLY"))
        api.message(CHAT, ANN, "ok thanks")
        await api.wait_for(lambda: len(model.requests) == 2)
        await service.hub.idle()  # the run has ended, and said nothing
        assert len(api.texts(CHAT)) == 3


async def test_a_burst_of_long_answers_to_one_chat_is_spaced_and_none_is_lost(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, _):
        first = " ".join(f"first{i}" for i in range(700))  # two pieces each
        last = " ".join(f"last{i}" for i in range(700))
        model.enqueue(said(calls=[("send_message", {"text": first})]), said(last))
        api.message(CHAT, ANN, "write two long things")
        await api.wait_for(lambda: len(api.texts(CHAT)) >= 4, 30)
        sent = api.sent("sendMessage", CHAT)
        assert " ".join(api.texts(CHAT)) == f"{first} {last}"  # all of it, in order
        gaps = [b.at - a.at for a, b in itertools.pairwise(sent)]
        assert min(gaps) >= 0.9, gaps  # 1 message a second in one chat
        assert len(sent) == 4


async def test_a_wrong_token_is_one_clear_error_at_start(
        model: OpenAIServer, home: Path, store: Any) -> None:
    with pytest.raises(ChannelError, match="telegram refused the bot token"):
        async with serving(model, home, store, token="1:wrong"):
            pass


async def test_a_chat_has_its_own_mission_instructions_and_tools(
        model: OpenAIServer, home: Path, store: Any) -> None:
    missions = {"42": {"instructions": "You are the chess club's bot.", "tools": ["calculator"]}}
    async with serving(model, home, store, missions=missions) as (api, _):
        model.enqueue(said("Chess it is."), said("Plain."))
        api.message(CHAT, ANN, "hello")
        await api.wait_for(lambda: "Chess it is." in api.texts(CHAT))
        api.message(99, ANN, "hello")
        await api.wait_for(lambda: "Plain." in api.texts(99))
        chess, plain = model.requests[-2], model.requests[-1]
        assert "chess club" in chess["messages"][0]["content"]
        assert "chess club" not in plain["messages"][0]["content"]
        assert {t["function"]["name"] for t in chess["tools"]} == {"calculator", "send_voice"}
        assert "read_file" in {t["function"]["name"] for t in plain["tools"]}


async def test_a_run_silent_for_five_steps_is_nudged_to_tell_the_person(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, _):
        steps = [said(calls=[("calculator", {"expression": f"{i}+1"})]) for i in range(5)]
        model.enqueue(*steps, said("All sums done."))
        api.message(CHAT, ANN, "add things")
        await api.wait_for(lambda: "All sums done." in api.texts(CHAT))
        assert "TRANSPARENCY" not in request_text(model, -2)
        assert "TRANSPARENCY ALERT" in request_text(model)


async def test_send_voice_speaks_with_espeak_and_says_clearly_when_no_engine_is_there(
        model: OpenAIServer, home: Path, store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async with serving(model, home, store) as (api, _):
        model.enqueue(said(calls=[("send_voice", {"text": "good morning"})]), said("Spoken."))
        api.message(CHAT, ANN, "say good morning")
        await api.wait_for(lambda: "Spoken." in api.texts(CHAT))
        voice = api.sent("sendVoice", CHAT)[0].files["voice"]
        assert voice[:4] in (b"RIFF", b"OggS") and len(voice) > 1000
        monkeypatch.setenv("PATH", str(home))  # no engine on the PATH any more
        model.enqueue(said(calls=[("send_voice", {"text": "again"})]), *[said("Text then.")] * 3)
        api.message(CHAT, ANN, "say it again")
        await api.wait_for(lambda: "Text then." in api.texts(CHAT))
        assert "no text-to-speech engine is installed" in request_text(model, -1)
        assert len(api.sent("sendVoice", CHAT)) == 1


async def test_an_operator_aborts_a_chat_run_through_the_store(
        model: OpenAIServer, home: Path, store: Any) -> None:
    async with serving(model, home, store) as (api, service):
        model.enqueue(said(calls=[("ask_human", {"question": "Are you there?"})]))
        api.message(CHAT, ANN, "wait for me")
        await api.wait_for(lambda: "Are you there?" in api.texts(CHAT))
        [run_id] = list(service.hub.runs)
        assert await store.request_abort(run_id)  # what `thinkloop runs abort` does
        await api.wait_for(lambda: any("cancelled" in t for t in api.texts(CHAT)), 20)
        assert service.hub.runs == {}
