"""Chat channels: people talk to agents from Telegram, Slack, Discord,
e-mail and signed webhooks.

The :class:`~thinkloop.core.channel.Channel` vocabulary (``Outgoing``, ``ConsoleChannel``,
``WebhookChannel``, ``CallbackChannel``) lives in :mod:`thinkloop.core.channel`; it is
re-exported here so ``from thinkloop.channels import Channel`` keeps working.
"""

from thinkloop.core.channel import (
    CallbackChannel,
    Channel,
    ConsoleChannel,
    Outgoing,
    WebhookChannel,
)
from thinkloop.errors import ChannelError

__all__ = ["CallbackChannel", "Channel", "ChannelError", "ConsoleChannel", "Outgoing",
           "WebhookChannel"]
