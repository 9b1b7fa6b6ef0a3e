"""The one place the terminal UI gets an agent: ``thinkloop.build`` (the house recipe), with
people answering approvals and ``ask_human`` questions in the UI."""

from __future__ import annotations

from thinkloop.api import Agent, Approver, RunRegistry, Store
from thinkloop.build import AgentSpec, build_agent
from thinkloop.core.channel import Channel
from thinkloop.settings import GATEWAY_APPROVAL_TIMEOUT_S, Settings


def build(name: str, spec: AgentSpec, settings: Settings, store: Store, *,
          approver: Approver, channel: Channel, registry: RunRegistry) -> Agent:
    """``spec`` as ``name``: approvals and questions go to ``approver`` and ``channel`` (the
    UI, which waits as long as a gateway does), every run registers in ``registry``."""
    return build_agent(spec.model_copy(update={"name": name}), settings, approver=approver,
                       approval_timeout_s=GATEWAY_APPROVAL_TIMEOUT_S, channels=[channel],
                       store=store, registry=registry)
