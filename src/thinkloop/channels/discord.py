"""Discord through discord.py: the gateway WebSocket in, the REST API out. A channel (a
thread is a channel too) is a session; in servers the agent answers when mentioned, in direct
messages always. Approvals are buttons (message components). discord.py keeps to Discord's
rate-limit buckets and retries a 429 after its ``retry_after`` itself.

The REST base URL is a setting (``api_url``): each request of this client is rebased onto it,
and the gateway's URL comes from ``GET /gateway/bot`` there (an auto-sharded client asks for
it), so nothing process-wide is changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from thinkloop.channels.base import Address, Attachment, Choice, Deliver, Inbound
from thinkloop.channels.config import DiscordSettings
from thinkloop.errors import ChannelError, ConfigError

log = logging.getLogger("thinkloop.channels.discord")
MAX_LEN = 2000  # Discord's limit for a message's content


class DiscordAdapter:
    platform = "discord"
    max_len = MAX_LEN

    def __init__(self, settings: DiscordSettings) -> None:
        if settings.token is None or not settings.token.get_secret_value():
            raise ConfigError("the discord channel needs a bot token: set DISCORD_BOT_TOKEN")
        self.settings = settings
        self.client: Any = None
        self._runner: asyncio.Task[None] | None = None
        self._deliver: Deliver | None = None

    def _make_client(self) -> Any:
        import discord

        intents = discord.Intents.default()
        intents.message_content = True  # "Message Content Intent" in the developer portal
        client = discord.AutoShardedClient(intents=intents, shard_count=None)
        default = discord.http.Route.BASE
        base = self.settings.api_url.rstrip("/")
        if base != default:
            original = client.http.request

            async def rebased(route: Any, **kwargs: Any) -> Any:
                if route.url.startswith(default):
                    route.url = base + route.url[len(default):]
                return await original(route, **kwargs)

            client.http.request = rebased  # type: ignore[method-assign]  # this client only
        # discord.py dispatches "message" to the client's on_message attribute.
        setattr(client, "on_message", self._on_message)  # noqa: B010
        setattr(client, "on_interaction", self._on_interaction)  # noqa: B010
        return client

    async def start(self, deliver: Deliver) -> None:
        import discord

        self._deliver = deliver
        self.client = self._make_client()
        try:
            await self.client.login(self.settings.token.get_secret_value()
                                    if self.settings.token else "")
        except discord.LoginFailure:
            await self.client.close()
            raise ChannelError("discord refused the bot token (DISCORD_BOT_TOKEN)") from None
        except (discord.HTTPException, OSError) as exc:
            await self.client.close()
            raise ChannelError(f"cannot reach the Discord API at {self.settings.api_url}: "
                               f"{exc}") from None
        self._runner = asyncio.get_running_loop().create_task(self.client.connect())
        try:
            async with asyncio.timeout(self.settings.connect_timeout_s):
                await self.client.wait_until_ready()
        except TimeoutError:
            await self.stop()
            raise ChannelError("the Discord gateway did not get ready in "
                               f"{self.settings.connect_timeout_s:g}s") from None
        log.info("discord: connected as %s", self.client.user)

    async def _on_message(self, message: Any) -> None:
        client = self.client
        if message.author.bot or client.user is None or self._deliver is None:
            return
        # A server's channel names its guild even before the guild is cached.
        direct = message.guild is None and getattr(message.channel, "guild_id", None) is None
        addressed = direct or client.user in message.mentions
        text = message.content.replace(f"<@{client.user.id}>", "").strip()
        files = []
        for a in message.attachments:
            try:
                files.append(Attachment(a.filename, a.content_type or "", await a.read()))
            except Exception as exc:  # a file that cannot be fetched is left out, said so
                log.warning("discord: attachment %s: %s", a.filename, exc)
        where = Address("discord", str(message.channel.id))
        msg = Inbound(where, str(message.author.id), text, message.author.display_name,
                      tuple(files), addressed=addressed)
        asyncio.get_running_loop().create_task(self._deliver(msg))

    async def _on_interaction(self, interaction: Any) -> None:
        data = interaction.data or {}
        custom = str(data.get("custom_id") or "")
        if not custom.startswith("ap:") or self._deliver is None or \
                interaction.channel_id is None:
            return
        await self._ack(interaction)
        where = Address("discord", str(interaction.channel_id))
        await self._deliver(Inbound(where, str(interaction.user.id), "", choice=custom))

    async def _ack(self, interaction: Any) -> None:
        """Acknowledge a pressed button (DEFERRED_UPDATE_MESSAGE), through this client's HTTP
        (interaction.response would use discord.py's webhook client and its fixed base URL)."""
        import discord

        route = discord.http.Route(
            "POST", "/interactions/{interaction_id}/{interaction_token}/callback",
            interaction_id=interaction.id, interaction_token=interaction.token)
        await self.client.http.request(route, json={"type": 6})

    def _channel(self, to: Address) -> Any:
        return self.client.get_partial_messageable(int(to.chat))

    async def send_text(self, to: Address, text: str) -> None:
        await self._channel(to).send(text)

    async def send_choice(self, to: Address, text: str, choices: Sequence[Choice]) -> bool:
        import discord

        view = discord.ui.View(timeout=None)
        for label, data in choices:
            style = discord.ButtonStyle.success if data.endswith(":y") else \
                discord.ButtonStyle.danger
            view.add_item(discord.ui.Button(label=label, custom_id=data, style=style))
        await self._channel(to).send(text, view=view)
        return True

    async def send_voice(self, to: Address, audio: bytes) -> None:
        import io

        import discord

        name = "voice.ogg" if audio[:4] == b"OggS" else "voice.wav"
        await self._channel(to).send(file=discord.File(io.BytesIO(audio), filename=name))

    async def typing(self, to: Address) -> None:
        await self.client.http.send_typing(int(to.chat))

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.close()
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._runner
