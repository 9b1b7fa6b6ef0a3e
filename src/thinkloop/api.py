"""The library's face for its shells (the CLI, the gateway, workers, channels, the terminal
UI): what they use of the engine beyond the vocabulary (``thinkloop.core``) and the one recipe
(``thinkloop.build``), named in one place. A shell imports these from here, never from the
module that defines them, so the engine's insides can move without touching a shell
(``tests/test_architecture.py`` holds every shell to it).

Each name loads on first use (PEP 562), as ``thinkloop``'s own do: the CLI's start-up does not
pay for the stores, guards and models a command does not reach.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thinkloop._lazy import lazy_exports

if TYPE_CHECKING:
    from thinkloop.agent import Agent
    from thinkloop.context.focus import is_small
    from thinkloop.context.prompt import prompt_context
    from thinkloop.context.tokens import heuristic_count
    from thinkloop.guard import scan_input
    from thinkloop.guard.approval import (
        ApprovalRequest,
        Approver,
        CallbackApprover,
        ConsoleApprover,
        Decision,
        approver_for,
    )
    from thinkloop.guard.classifier import Classifier
    from thinkloop.hooks import load_plugin_hooks
    from thinkloop.loop.handle import RunHandle
    from thinkloop.loop.result import RunResult
    from thinkloop.memory.layers import owner_of
    from thinkloop.models.decision import tools_prompt
    from thinkloop.models.local import local_of
    from thinkloop.protocols.sanitize import is_silent
    from thinkloop.runlog import run_memories
    from thinkloop.runs import RunRegistry
    from thinkloop.sandbox import SYSTEM_PATH
    from thinkloop.sandbox.bwrap import probe, system_mounts
    from thinkloop.spotlight import unwrap
    from thinkloop.store.base import (
        AbortRequests,
        CheckpointStore,
        DurableStore,
        ProfileBackend,
        RunRecord,
        RunRecords,
        SessionAdmin,
        SessionInfo,
        SpanRecord,
        Store,
    )
    from thinkloop.store.gateway import GatewayStore
    from thinkloop.store.open import open_store
    from thinkloop.store.postgres import PostgresStore
    from thinkloop.store.serialize import event_to_dict, message_to_dict, wire_json
    from thinkloop.store.sqlite import SQLiteStore
    from thinkloop.store.sqlmanaged import UserFiles
    from thinkloop.text import validation_summary
    from thinkloop.tools.builtin.web import context_from_cli
    from thinkloop.tools.mcp import load_mcp_file, mcp_tools, parse_mcp_spec
    from thinkloop.tools.plugins import load_plugin_tools
    from thinkloop.tools.workspace import Workspace
    from thinkloop.tuning import freeze_for_exit, tune_gc
    from thinkloop.wakeups import Wakeups

_EXPORTS: dict[str, str] = {
    "AbortRequests": "thinkloop.store.base",
    "Agent": "thinkloop.agent",
    "ApprovalRequest": "thinkloop.guard.approval",
    "Approver": "thinkloop.guard.approval",
    "CallbackApprover": "thinkloop.guard.approval",
    "CheckpointStore": "thinkloop.store.base",
    "Classifier": "thinkloop.guard.classifier",
    "ConsoleApprover": "thinkloop.guard.approval",
    "Decision": "thinkloop.guard.approval",
    "DurableStore": "thinkloop.store.base",
    "GatewayStore": "thinkloop.store.gateway",
    "UserFiles": "thinkloop.store.sqlmanaged",
    "Wakeups": "thinkloop.wakeups",
    "PostgresStore": "thinkloop.store.postgres",
    "ProfileBackend": "thinkloop.store.base",
    "RunHandle": "thinkloop.loop.handle",
    "RunRecord": "thinkloop.store.base",
    "RunRecords": "thinkloop.store.base",
    "RunRegistry": "thinkloop.runs",
    "RunResult": "thinkloop.loop.result",
    "SQLiteStore": "thinkloop.store.sqlite",
    "SYSTEM_PATH": "thinkloop.sandbox",
    "SessionAdmin": "thinkloop.store.base",
    "SessionInfo": "thinkloop.store.base",
    "SpanRecord": "thinkloop.store.base",
    "Store": "thinkloop.store.base",
    "Workspace": "thinkloop.tools.workspace",
    "approver_for": "thinkloop.guard.approval",
    "context_from_cli": "thinkloop.tools.builtin.web",
    "event_to_dict": "thinkloop.store.serialize",
    "heuristic_count": "thinkloop.context.tokens",
    "is_silent": "thinkloop.protocols.sanitize",
    "is_small": "thinkloop.context.focus",
    "load_mcp_file": "thinkloop.tools.mcp",
    "load_plugin_hooks": "thinkloop.hooks",
    "load_plugin_tools": "thinkloop.tools.plugins",
    "local_of": "thinkloop.models.local",
    "mcp_tools": "thinkloop.tools.mcp",
    "message_to_dict": "thinkloop.store.serialize",
    "open_store": "thinkloop.store.open",
    "owner_of": "thinkloop.memory.layers",
    "parse_mcp_spec": "thinkloop.tools.mcp",
    "probe": "thinkloop.sandbox.bwrap",
    "prompt_context": "thinkloop.context.prompt",
    "run_memories": "thinkloop.runlog",
    "scan_input": "thinkloop.guard",
    "system_mounts": "thinkloop.sandbox.bwrap",
    "tools_prompt": "thinkloop.models.decision",
    "freeze_for_exit": "thinkloop.tuning",
    "tune_gc": "thinkloop.tuning",
    "unwrap": "thinkloop.spotlight",
    "validation_summary": "thinkloop.text",
    "wire_json": "thinkloop.store.serialize",
}

__all__ = [
    "SYSTEM_PATH",
    "AbortRequests",
    "Agent",
    "ApprovalRequest",
    "Approver",
    "CallbackApprover",
    "CheckpointStore",
    "Classifier",
    "ConsoleApprover",
    "Decision",
    "DurableStore",
    "GatewayStore",
    "PostgresStore",
    "ProfileBackend",
    "RunHandle",
    "RunRecord",
    "RunRecords",
    "RunRegistry",
    "RunResult",
    "SQLiteStore",
    "SessionAdmin",
    "SessionInfo",
    "SpanRecord",
    "Store",
    "UserFiles",
    "Wakeups",
    "Workspace",
    "approver_for",
    "context_from_cli",
    "event_to_dict",
    "freeze_for_exit",
    "heuristic_count",
    "is_silent",
    "is_small",
    "load_mcp_file",
    "load_plugin_hooks",
    "load_plugin_tools",
    "local_of",
    "mcp_tools",
    "message_to_dict",
    "open_store",
    "owner_of",
    "parse_mcp_spec",
    "probe",
    "prompt_context",
    "run_memories",
    "scan_input",
    "system_mounts",
    "tools_prompt",
    "tune_gc",
    "unwrap",
    "validation_summary",
    "wire_json",
]

# `__all__` stays a literal list: it is what marks these names as re-exported for type checkers.
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
