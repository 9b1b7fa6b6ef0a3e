"""Channels served by one process: the adapters, the hub, and the agents that answer, built
through the one recipe (``thinkloop.build``) in this one place, with the same store and run
registry as the REST API when the gateway serves them (``thinkloop serve --channel``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from thinkloop.api import Agent, RunRegistry, Workspace
from thinkloop.build import AgentSpec, build_agent
from thinkloop.channels.base import Address, ChatAdapter
from thinkloop.channels.config import (
    ChannelSettings,
    DiscordSettings,
    EmailSettings,
    SlackSettings,
    TelegramSettings,
    WebhookSettings,
    channel_settings,
)
from thinkloop.channels.hub import Board, ChatHub
from thinkloop.channels.missions import Missions
from thinkloop.channels.voice import send_voice_tool
from thinkloop.errors import ChannelError, ConfigError
from thinkloop.server.agents import Definitions
from thinkloop.settings import Settings

log = logging.getLogger("thinkloop.channels")


def make_adapter(platform: str, settings: ChannelSettings) -> ChatAdapter:
    try:
        if isinstance(settings, TelegramSettings):
            from thinkloop.channels.telegram import TelegramAdapter

            return TelegramAdapter(settings)
        if isinstance(settings, EmailSettings):
            from thinkloop.channels.email import EmailAdapter

            return EmailAdapter(settings)
        if isinstance(settings, DiscordSettings):
            from thinkloop.channels.discord import DiscordAdapter

            return DiscordAdapter(settings)
        if isinstance(settings, SlackSettings):
            from thinkloop.channels.slack import SlackAdapter

            return SlackAdapter(settings)
        if isinstance(settings, WebhookSettings):
            from thinkloop.channels.webhook import WebhookAdapter

            return WebhookAdapter(settings)
    except ImportError:
        raise ConfigError(f"the {platform} channel needs its extra: "
                          "pip install 'thinkloop[channels]'") from None
    raise ConfigError(f"no adapter for channel {platform!r}")


class ChannelService:
    """``platforms`` served over ``store``; ``runs``: the gateway's registry, when it has one."""

    def __init__(self, settings: Settings, store: Any, platforms: Sequence[str], *,
                 runs: RunRegistry | None = None, agents_file: Path | None = None,
                 adapters: dict[str, ChatAdapter] | None = None, gateway: bool = False,
                 board: Board | None = None) -> None:
        if not platforms:
            raise ConfigError("name at least one channel (telegram)")
        self.settings = settings
        self.store = store
        self.runs = runs if runs is not None else RunRegistry()  # (an empty one is falsy)
        self.definitions = Definitions(store, agents_file)
        self.missions = Missions(store)
        configs = {p: channel_settings(settings, p) for p in platforms}
        for p, c in configs.items():
            mode = getattr(c, "mode", None)
            if mode in ("webhook", "events") and not gateway:
                raise ConfigError(f"channels.{p}.mode = {mode}: the updates arrive at the "
                                  f"gateway, so serve it there: thinkloop serve --channel {p}")
        given = adapters or {}
        self.channels = {p: (given.get(p) or make_adapter(p, c), c) for p, c in configs.items()}
        self.hub = ChatHub(self.channels, self.agent_for, Workspace.of(settings.tools), board)
        self._agents: dict[tuple[Any, ...], Agent] = {}
        self._started: list[ChatAdapter] = []

    async def agent_for(self, settings: ChannelSettings, where: Address | None) -> Agent:
        """The agent that answers a chat: the named definition with the chat's mission, or
        the teammate the chat's session was handed to (the ``handoff`` tool)."""
        name = settings.agent
        handoff = getattr(self.store, "handoff", None)
        if where is not None and handoff is not None:
            moved = await handoff(where.key)
            name = moved.agent if moved is not None else name
        spec = await self.definitions.get(name)
        if spec is None:
            raise ConfigError(f"no agent named {name!r} (channels.*.agent)")
        mission = await self.missions.of(where, settings) if where is not None else None
        if mission is not None:
            spec = spec.model_copy(update=mission.model_dump(exclude_none=True))
        key = (name, spec.fingerprint(), settings.piper_voice,
               settings.approval_timeout_s, settings.max_messages, settings.transparency_after)
        agent = self._agents.get(key)
        if agent is None:
            agent = self._build(settings, spec, name)
            self._agents[key] = agent
        return agent

    def _build(self, s: ChannelSettings, spec: AgentSpec, name: str) -> Agent:
        """The one recipe (thinkloop.build): people answer through the hub, in their chat."""
        def home(run_id: str) -> Any:
            run = self.hub.runs.get(run_id)
            return (run.adapter, run.home) if run else None

        voice = send_voice_tool(home, s.piper_voice, self.hub.count)
        return build_agent(spec.model_copy(update={"name": name}), self.settings,
                           approver=self.hub, approval_timeout_s=s.approval_timeout_s,
                           channels=[self.hub], extra_tools=[voice], store=self.store,
                           registry=self.runs, max_messages=s.max_messages,
                           transparency_after=s.transparency_after)

    async def start(self) -> None:
        """Connect every adapter; a refused token is one ChannelError, nothing left running."""
        for platform, (adapter, _) in self.channels.items():
            try:
                await adapter.start(self.hub.deliver)
            except BaseException:
                await self.stop()
                raise
            self._started.append(adapter)
            log.info("channel %s started", platform)

    async def stop(self) -> None:
        for adapter in reversed(self._started):
            try:
                await adapter.stop()
            except (ChannelError, OSError) as exc:
                log.warning("stopping %s: %s", adapter.platform, exc)
        self._started.clear()
        for run in list(self.hub.runs):
            self.runs.abort(run)
        await self.hub.aclose()
        for agent in self._agents.values():
            await agent.aclose()
        self._agents.clear()


def gateway_service(platforms: Sequence[str], agents_file: Path | None = None,
                    failures: list[ChannelError] | None = None
                    ) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """Channels inside the gateway (``create_app(services=[...])``): its settings, its store
    and its run registry, so ``thinkloop runs``, the page and REST list channel runs and
    abort them; a channel in webhook mode gets its route (``POST /v1/channels/NAME/webhook``)
    on the app. A platform refusing to start lands in ``failures`` before the app's startup
    fails (``thinkloop serve`` prints it as one line)."""
    @asynccontextmanager
    async def serve(app: Any) -> AsyncIterator[None]:
        gateway = app.state.gateway
        service = ChannelService(gateway.settings, gateway.store, platforms,
                                 runs=gateway.runs, agents_file=agents_file, gateway=True,
                                 board=gateway.adopt)
        from thinkloop.channels.routes import mission_routes

        app.include_router(mission_routes(
            service.missions, {p: c for p, (_, c) in service.channels.items()}))
        for platform, (adapter, _) in service.channels.items():
            route = getattr(adapter, "webhook_route", None)
            if route is not None:
                # A plain Starlette route: the handler takes the request as it is.
                app.add_route(f"/v1/channels/{platform}/webhook", route, methods=["POST"],
                              include_in_schema=False)
        try:
            await service.start()
        except ChannelError as exc:
            if failures is not None:
                failures.append(exc)
            raise
        # With workers: what their scheduled runs deliver to people on these channels.
        fleet = gateway.fleet
        outbox = (asyncio.get_running_loop().create_task(
            fleet.deliveries(list(service.channels), service.hub.send_to))
            if fleet is not None else None)
        try:
            yield
        finally:
            if outbox is not None:
                outbox.cancel()
                await asyncio.gather(outbox, return_exceptions=True)
            await service.stop()

    return serve


