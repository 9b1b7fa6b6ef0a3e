"""The one place the terminal UI gets an agent built: the gateway's recipe (an ``agents.yaml``
definition, or the default agent ``thinkloop run`` builds) with people answering in the UI.

When the house recipe (``thinkloop.build``) lands this module is the one line to switch.
"""

from __future__ import annotations

from thinkloop.agent import Agent
from thinkloop.channels import Channel
from thinkloop.guard.approval import Approver
from thinkloop.runs import RunRegistry
from thinkloop.server.agents import AgentSpec, Wiring, build_agent
from thinkloop.settings import Settings
from thinkloop.store.base import Store


def build(name: str, spec: AgentSpec, settings: Settings, store: Store, *,
          approver: Approver, channel: Channel, registry: RunRegistry) -> Agent:
    """``spec`` built as the gateway builds it: approvals and questions go to ``approver``
    and ``channel`` (the UI), every run registers in ``registry``."""
    wiring = Wiring(settings, store, approver, channel, runs=registry)
    return build_agent(name, spec, wiring)
