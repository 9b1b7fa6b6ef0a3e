"""``thinkloop channel telegram`` (slack, discord, email, webhook): serve agents on chat channels,
without the HTTP gateway.

(``thinkloop serve --channel telegram`` serves them inside the gateway instead, sharing its
store and run registry with the REST API.)"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from thinkloop.cli.render import console
from thinkloop.errors import ConfigError

if TYPE_CHECKING:
    from thinkloop.settings import Settings


def channel(
    platforms: Annotated[list[str], typer.Argument(
        help="Channels to serve: telegram, slack, discord, email, webhook. Each is configured "
             "by [channels.NAME] in thinkloop.toml and THINKLOOP_CHANNELS_NAME_* (tokens: "
             "TELEGRAM_BOT_TOKEN, SLACK_BOT_TOKEN, SLACK_APP_TOKEN, DISCORD_BOT_TOKEN). See "
             "docs/channels.md.")],
    agents: Annotated[Path | None, typer.Option(
        help="YAML file of agents (default: agents in the store, else 'default').")] = None,
) -> None:
    """Serve agents on chat channels: each chat is a session; people approve and answer in it."""
    import asyncio  # here, not at import: `thinkloop --help` loads no engine

    from thinkloop.settings import load_settings, quiet_model_loaders

    if agents is not None and not agents.is_file():
        raise ConfigError(f"agents file not found: {agents}")
    quiet_model_loaders()
    settings = load_settings()
    asyncio.run(_serve(settings, platforms, agents))


async def _serve(settings: Settings, platforms: list[str], agents: Path | None) -> None:
    from thinkloop.api import open_store
    from thinkloop.channels.service import ChannelService

    store = open_store(settings.store_location, settings=settings)
    try:
        service = ChannelService(settings, store, platforms, agents_file=agents)
        await service.start()
        try:
            console(stderr=True).print(
                f"thinkloop: serving {', '.join(platforms)}; Ctrl-C to stop", highlight=False)
            await _until_stopped()
        finally:
            await service.stop()
    finally:
        await store.aclose()


async def _until_stopped() -> None:
    import asyncio

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
