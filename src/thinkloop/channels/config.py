"""Each channel's settings, validated from ``Settings.channels`` (``[channels.telegram]`` in
thinkloop.toml, ``THINKLOOP_CHANNELS_TELEGRAM_*`` and ``TELEGRAM_BOT_TOKEN`` in the
environment). The seeds' policies are on by default; each is a setting here."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from thinkloop.api import validation_summary
from thinkloop.core.errors import ConfigError
from thinkloop.core.settings import Settings


class Mission(BaseModel):
    """A chat's own instructions and tool set (Stingyclaw's MISSION.md per group)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instructions: str | None = None  # None: the agent's
    tools: str | list[str] | None = None  # None: the agent's


class ChannelSettings(BaseModel):
    """What every channel has: who may talk, which agent answers, and the policies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field("default", description="the agent (gateway definitions) that answers")
    allow_users: list[str] | None = Field(
        None, description="sender ids allowed to talk to the agent; [\"*\"]: everyone; unset: "
        "nobody yet (a sender is told the id to allow)")
    allow_chats: list[str] | None = Field(None, description="chat ids served; None: every chat")
    admins: list[str] = Field(default_factory=list,
                              description="senders whose runs may send to other chats")
    cross_chat: Literal["admin", "allow", "deny"] = Field(
        "admin", description="send_message to another chat or channel: only runs an admin "
        "started (admin), always (allow) or never (deny)")
    max_messages: int = Field(10, ge=1, description="messages one run may send (the "
                              "message guard's cap on the agents of this channel)")
    transparency_after: int = Field(5, ge=1, description="steps a run may work without a "
                                    "message to the person before it is nudged to send one")
    typing_every_s: float = Field(4.0, gt=0, description="typing indicator refresh")
    approval_timeout_s: float = Field(300.0, gt=0)
    piper_voice: Path | None = Field(None, description="piper's .onnx voice for send_voice "
                                     "(else espeak-ng speaks)")
    missions: dict[str, Mission] = Field(default_factory=dict,
                                         description="chat id -> its instructions and tools")


class TelegramSettings(ChannelSettings):
    token: SecretStr | None = Field(None, description="TELEGRAM_BOT_TOKEN")
    api_url: str = Field("https://api.telegram.org/bot",
                         description="Bot API base URL (a self-hosted Bot API server's)")
    file_url: str | None = Field(None, description="file base URL; None: api_url's /file/bot")
    mode: Literal["polling", "webhook"] = Field(
        "polling", description="webhook: Telegram POSTs updates to the gateway's "
        "/v1/channels/telegram/webhook (thinkloop serve --channel telegram)")
    webhook_url: str | None = Field(None, description="the public https URL of that route")
    webhook_secret: SecretStr | None = Field(
        None, description="THINKLOOP_CHANNELS_TELEGRAM_WEBHOOK_SECRET: Telegram sends it in "
        "X-Telegram-Bot-Api-Secret-Token, and updates without it are refused")
    poll_timeout_s: float = Field(10.0, ge=0, description="getUpdates long-poll timeout")
    max_retries: int = Field(3, ge=0, description="retries of a send refused with 429")
    chat_rate_per_s: float = Field(1.0, gt=0, description="messages a second to one chat "
                                   "(Telegram's limit; a burst is spaced, none dropped)")
    rate_per_s: float = Field(30.0, gt=0, description="messages a second in all")

    def files(self) -> str:
        if self.file_url:
            return self.file_url
        base = self.api_url.rstrip("/")
        root, _, _ = base.rpartition("/")
        return f"{root}/file/bot"


class EmailSettings(ChannelSettings):
    """An inbox: IMAP to read (IDLE, else polling), SMTP to answer."""

    username: str | None = Field(None, description="the mailbox's login")
    password: SecretStr | None = Field(None, description="THINKLOOP_CHANNELS_EMAIL_PASSWORD")
    address: str | None = Field(None, description="the From address; None: username")
    imap_host: str | None = None
    imap_port: int = 993
    imap_ssl: bool = True
    mailbox: str = "INBOX"
    idle: bool = Field(True, description="IMAP IDLE when the server has it, else polling")
    poll_s: float = Field(60.0, gt=0, description="polling interval; also the IDLE renewal")
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_ssl: bool = Field(False, description="implicit TLS (port 465)")
    smtp_starttls: bool | None = Field(None, description="None: STARTTLS when offered")
    smtp_login: bool = Field(True, description="log in to SMTP with username and password")
    max_retries: int = Field(3, ge=0, description="retries of a send the server defers (4xx)")
    retry_after_s: float = Field(5.0, ge=0, description="wait before the first retry")


class WebhookSettings(ChannelSettings):
    """Another system, both ways, over HMAC-signed HTTP (thinkloop.channels.webhook)."""

    # The shared secret already authenticates the other system: it vouches for its senders.
    allow_users: list[str] | None = Field(["*"], description="sender ids allowed")
    url: str | None = Field(None, description="where the agent's messages are POSTed")
    secret: SecretStr | None = Field(None, description="THINKLOOP_CHANNELS_WEBHOOK_SECRET, "
                                     "the HMAC-SHA256 key of both directions")
    host: str = Field("127.0.0.1", description="address of the inbound endpoint")
    port: int = Field(8090, ge=0, le=65535, description="port of POST /messages")
    max_len: int = Field(20_000, ge=100, description="longest message sent in one piece")
    max_skew_s: float = Field(300.0, gt=0, description="oldest signature timestamp accepted")
    max_body_bytes: int = Field(20 * 1024 * 1024, ge=1024)
    max_retries: int = Field(3, ge=0, description="retries of a POST answered 429")


class SlackSettings(ChannelSettings):
    """A Slack app: Socket Mode in, the Web API out."""

    bot_token: SecretStr | None = Field(None, description="SLACK_BOT_TOKEN (xoxb-...)")
    app_token: SecretStr | None = Field(None, description="SLACK_APP_TOKEN (xapp-..., with "
                                        "connections:write, for Socket Mode)")
    mode: Literal["socket", "events"] = Field(
        "socket", description="events: the Events API POSTs to the gateway's "
        "/v1/channels/slack/webhook (thinkloop serve --channel slack)")
    signing_secret: SecretStr | None = Field(None, description="SLACK_SIGNING_SECRET: "
                                             "verifies the Events API's requests")
    api_url: str = Field("https://slack.com/api/", description="Web API base URL")
    max_retries: int = Field(3, ge=0, description="retries of a call answered 429")


class DiscordSettings(ChannelSettings):
    """A Discord bot: the gateway in, REST out."""

    token: SecretStr | None = Field(None, description="DISCORD_BOT_TOKEN")
    api_url: str = Field("https://discord.com/api/v10", description="REST API base URL")
    connect_timeout_s: float = Field(60.0, gt=0, description="wait for the gateway's READY")


PLATFORMS: dict[str, type[ChannelSettings]] = {
    "telegram": TelegramSettings, "email": EmailSettings, "webhook": WebhookSettings,
    "slack": SlackSettings, "discord": DiscordSettings}


def channel_settings(settings: Settings, platform: str) -> ChannelSettings:
    """The validated settings of ``platform``; one ConfigError naming what is wrong."""
    model = PLATFORMS.get(platform)
    if model is None:
        raise ConfigError(f"unknown channel {platform!r}; available: {', '.join(PLATFORMS)}")
    raw: Any = settings.channels.get(platform, {})
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"channels.{platform}: "
                          f"{validation_summary(exc, root=platform)}") from None
