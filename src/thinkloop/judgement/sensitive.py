"""Sensitive calls (CortexPrism): classify, keep secrets out of sight, supervise, escalate.

- Every tool call is classified SECRET / SENSITIVE / NORMAL / PUBLIC by rules (tool-name
  globs, argument names, and value patterns such as API keys or private keys).
- Secrets never reach the model or the logs: secret values in the task and in tool results
  are replaced by placeholders (``[SECRET_1]``) before the model sees them, and put back into
  a call's arguments only at the last moment before the tool runs. Events and the stored
  session carry the placeholders.
- SENSITIVE and SECRET calls go to the approval gate. :class:`Supervisor` is an approver
  placed in front of the human one: a side model call returns a strict JSON verdict;
  confident approvals of non-secret calls pass, everything else is escalated to the human
  approver (or denied without one).
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from thinkloop.core.events import SecretsRedacted, SensitivityClassified, SupervisorEscalated
from thinkloop.core.model import Model
from thinkloop.core.types import Message, ToolCall, ToolResult
from thinkloop.guard.approval import ApprovalGate, ApprovalRequest, ApprovalSettings, Approver
from thinkloop.guard.approval import Decision as Approval
from thinkloop.hooks import AssessContext, Hook, HookContext, ToolHookContext
from thinkloop.judgement.secrets import (
    SECRET_VALUES,
    Vault,
    personal_data,
    secret_matches,
)
from thinkloop.offload import off_loop
from thinkloop.side_calls import UsageMeter, json_object, side_call
from thinkloop.spotlight import is_spotlit

Level = Literal["SECRET", "SENSITIVE", "NORMAL", "PUBLIC"]
RANK: dict[Level, int] = {"PUBLIC": 0, "NORMAL": 1, "SENSITIVE": 2, "SECRET": 3}

@dataclass(frozen=True)
class Rule:
    """Calls of tools matching ``tool`` (and ``argument``/``pattern`` if set) get ``level``."""

    tool: str
    level: Level
    argument: str | None = None
    pattern: re.Pattern[str] | None = None
    label: str = ""

    def applies(self, call: ToolCall) -> bool:
        if not fnmatchcase(call.name, self.tool):
            return False
        if self.argument is None and self.pattern is None:
            return True
        values = ([call.arguments.get(self.argument)] if self.argument is not None
                  else list(call.arguments.values()))
        return any(v is not None and (self.pattern is None or self.pattern.search(str(v)))
                   for v in values)


_SECRET_PATH = re.compile(r"(?:^|/)(?:\.env(?:\.\w+)?|id_rsa|id_ed25519|\.netrc|\.pgpass|"
                          r"credentials(?:\.json)?|shadow)$|/\.ssh/|/\.aws/", re.I)
DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("*", "SECRET", "path", _SECRET_PATH, "credentials file"),
    Rule("*", "SECRET", "file", _SECRET_PATH, "credentials file"),
    # CortexPrism's sensitive data tools.
    Rule("memory_search", "SENSITIVE", label="personal memory"),
    Rule("db_*", "SENSITIVE", label="database"),
    Rule("browser*", "SENSITIVE", label="browser session"),
    Rule("computer*", "SENSITIVE", label="computer use"),
    Rule("*email*", "SENSITIVE", label="e-mail"),
    Rule("web_search", "PUBLIC"),
    Rule("search_tools", "PUBLIC"),
    Rule("calculator", "PUBLIC"),
)


@dataclass(frozen=True)
class Classified:
    level: Level
    why: tuple[str, ...] = ()


def classify_call(call: ToolCall, rules: Sequence[Rule] = DEFAULT_RULES) -> Classified:
    """The highest level any rule or value pattern gives this call."""
    level: Level = "NORMAL"
    why: list[str] = []

    def raise_to(new: Level, reason: str) -> None:
        nonlocal level
        if RANK[new] > RANK[level] or (level == "NORMAL" and new == "PUBLIC" and not why):
            level = new
        why.append(reason)

    for rule in rules:
        if rule.applies(call):
            raise_to(rule.level, rule.label or f"rule {rule.tool}")
    text = " ".join(str(v) for v in call.arguments.values())
    for label, pattern in SECRET_VALUES:
        found = next(secret_matches(pattern, text), None) is not None
        if found or "[SECRET_" in text:
            raise_to("SECRET", label if found else "vaulted secret")
            break
    if personal_data(text):
        raise_to("SENSITIVE", "personal data")
    return Classified(level, tuple(dict.fromkeys(why)))


# The hook context of the tool call being approved, for the supervisor's events and usage
# (the Approver protocol passes only the request). Each tool call runs in its own task copy.
CURRENT: contextvars.ContextVar[HookContext | None] = contextvars.ContextVar(
    "thinkloop_supervised_call", default=None)
# The vault of the run whose tool call is running: a sub-agent started by it knows the same
# secrets under the same placeholders (its task holds placeholders, never the values).
_CALLER_VAULT: contextvars.ContextVar[Vault | None] = contextvars.ContextVar(
    "thinkloop_caller_vault", default=None)

SUPERVISOR_PROMPT = (
    "You supervise an AI agent's tool calls. Judge whether this call is safe and in line with "
    "the user's task, given the sensitivity of the data it touches. Secret values appear as "
    "[SECRET_n] placeholders. Reply with only a JSON object: {\"verdict\": \"approve\" or "
    "\"escalate\", \"confidence\": a number from 0 to 1, \"reason\": one sentence}. Escalate "
    "to a human when unsure."
)


class Verdict(BaseModel):
    """The supervisor's strict verdict: anything else escalates."""

    model_config = ConfigDict(extra="forbid")
    verdict: Literal["approve", "escalate"]
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = Field(min_length=1, max_length=500)


@dataclass
class Supervisor:
    """An approver in front of the human one (``fallback``; None: escalation denies).

    It is advisory: provenance gating never asks it (it asks ``fallback``), and once the run
    has read outside content it approves nothing (a model that read the injection, or that
    judges arguments the injection chose, is not a second opinion); it escalates."""

    advisory: ClassVar[bool] = True
    model: Model | None = None  # None: the run's model
    fallback: Approver | None = None
    threshold: float = 0.8
    meter: UsageMeter = field(default_factory=UsageMeter)

    async def decide(self, request: ApprovalRequest) -> Approval:
        ctx = CURRENT.get()
        model = self.model or (ctx.cfg.model if ctx is not None else None)
        tainted = ctx is not None and _read_outside(ctx)
        verdict = await self._verdict(model, request, ctx) \
            if model is not None and not tainted else None
        secret = "SECRET" in request.reason
        if verdict is not None and verdict.verdict == "approve" and not secret \
                and verdict.confidence >= self.threshold:
            return Approval(True, f"supervisor approved ({verdict.confidence:.2f}): "
                                  f"{verdict.reason}")
        why = ("the run read outside content" if tainted
               else "secret data always goes to a human" if secret and verdict is not None
               else verdict.reason if verdict is not None else "no readable verdict")
        if ctx is not None:
            ctx.emit(SupervisorEscalated, tool=request.tool, id=request.call_id, reason=why)
        if self.fallback is None:
            return Approval(False, f"supervisor escalated ({why}) and no human approver is "
                                   "configured", remember=False)
        decision = await self.fallback.decide(request)
        return replace(decision, reason=f"escalated by supervisor ({why}); human: "
                                        f"{decision.reason}")

    async def _verdict(self, model: Model, request: ApprovalRequest,
                       ctx: HookContext | None) -> Verdict | None:
        task = ctx.state.task if ctx is not None else ""
        body = (f"User task: {task}\nTool: {request.tool}\nArguments: {request.arguments}\n"
                f"Why it needs approval: {request.reason}")
        response = await side_call(model, [Message.system(SUPERVISOR_PROMPT), Message.user(body)],
                                   purpose="supervisor", ctx=ctx, meter=self.meter)
        data = json_object(response.message.content)
        try:
            return Verdict.model_validate(data) if data is not None else None
        except ValidationError:
            return None


@dataclass(frozen=True)
class SensitivitySettings:
    rules: tuple[Rule, ...] = DEFAULT_RULES
    approve_at: Level = "SENSITIVE"  # calls at or above this level need approval
    redact: bool = True  # secrets in the task and tool results become placeholders
    supervisor: Supervisor | None = field(default_factory=Supervisor)


class SensitivityGuard:
    """The hooks; ``approval`` is the agent's approval settings (the supervised approver)."""

    def __init__(self, settings: SensitivitySettings, approval: ApprovalSettings) -> None:
        self.settings = settings
        self.gate = ApprovalGate(approval)
        self.vaults: dict[str, Vault] = {}  # run id -> its secrets, until the run delivers

    def early_hooks(self) -> list[Hook]:
        """Before the guards: the approval gate may consult the supervisor for this call."""
        return [Hook("pre_tool", self.mark, name="judgement.sensitive.mark")]

    def hooks(self) -> list[Hook]:
        return [Hook("pre_assess", self.note_task, name="judgement.secrets"),
                Hook("pre_tool", self.check, critical=True, name="judgement.sensitive"),
                Hook("post_tool", self.hide_result, name="judgement.secrets.result"),
                Hook("pre_output", self.drop, name="judgement.secrets.cleanup")]

    def vault(self, run_id: str) -> Vault:
        if run_id not in self.vaults:
            parent = _CALLER_VAULT.get()
            self.vaults[run_id] = Vault(parent.by_value if parent is not None else None)
        return self.vaults[run_id]

    def hide_task(self, run_id: str, task: str) -> str:
        """The task with its secrets replaced; the agent calls this before the run starts,
        so not even ``run.started`` carries them."""
        return self.vault(run_id).hide(task) if self.settings.redact else task

    async def hide_long_task(self, run_id: str, task: str) -> str:
        """``hide_task`` for a long task, in a worker thread (a megabyte took ~10 ms of the
        event loop that serves every other run); the run's vault is made on the loop."""
        if not self.settings.redact:
            return task
        vault = self.vault(run_id)
        return await off_loop(len(task), vault.hide, task)

    def note_task(self, ctx: AssessContext) -> None:
        vault = self.vaults.get(ctx.run_id)
        if vault is not None and vault.by_value:
            ctx.emit(SecretsRedacted, where="task", count=len(vault.by_value))

    async def drop(self, ctx: HookContext) -> None:
        vault = self.vaults.pop(ctx.run_id, None)
        text = getattr(ctx, "text", None)
        if vault is None or not isinstance(text, str) or not vault.by_value:
            return
        # A long answer is searched in a worker thread, as every long scan (offload.py).
        if await off_loop(len(text), vault.secrets_in, text):
            ctx.emit(SecretsRedacted, where="answer")
            ctx.text = await off_loop(len(text), vault.hide, text)  # type: ignore[attr-defined]

    def mark(self, ctx: ToolHookContext) -> None:
        CURRENT.set(ctx)

    async def check(self, ctx: ToolHookContext) -> None:
        call = ctx.call
        if call is None:
            return
        CURRENT.set(ctx)
        # A long argument (a file the model writes) is searched in a worker thread.
        size = sum(len(str(v)) for v in call.arguments.values())
        found = await off_loop(size, classify_call, call, self.settings.rules)
        ctx.emit(SensitivityClassified, tool=call.name, id=call.id, level=found.level,
                 why=list(found.why))
        gated = ctx.tool is not None and ctx.tool.needs_approval  # the tool gate asked
        # The user's request is searched for host names: a long one in a worker thread.
        leak = await off_loop(len(ctx.state.task), self._leak, ctx, call) \
            if ctx.result is None and self.settings.redact else None
        if leak is not None:
            ctx.result = ToolResult(call, f"Not run: {leak}.", is_error=True)
            return
        if ctx.result is None and not gated \
                and RANK[found.level] >= RANK[self.settings.approve_at]:
            reason = f"sensitivity {found.level}: {', '.join(found.why)}"
            decision = await self.gate.decide(ctx, call, reason)
            if not decision.approved:
                ctx.result = ToolResult(call, f"Not approved: {decision.reason}. The call was "
                                              "not run.", is_error=True)
                return
        _CALLER_VAULT.set(self.vault(ctx.run_id))
        starts_runs = ctx.tool is not None and ctx.tool.meta.get("starts_runs")
        if ctx.result is None and self.settings.redact and not starts_runs:
            # Last moment: the tool gets the real values, nothing upstream saw them.
            ctx.call = replace(call, arguments=self.vault(ctx.run_id).reveal(dict(call.arguments)))

    def _leak(self, ctx: ToolHookContext, call: ToolCall) -> str | None:
        """Why a request ``call`` makes would carry a vaulted secret out, or None: never in a
        host name (it reaches DNS before any connection), and only to a host the user's own
        request names."""
        from thinkloop.guard.targets import hosts_in

        vault = self.vaults.get(ctx.run_id)
        outbound = ctx.tool.meta.get("outbound", ()) if ctx.tool is not None else ()
        if vault is None or not vault.by_value or not outbound:
            return None
        for name in outbound:
            url = vault.reveal(call.arguments.get(name))
            if not isinstance(url, str) or not vault.secrets_in(url):
                continue
            host = (urlsplit(url).hostname or "").lower()
            if vault.secrets_in(host) or vault.secrets_in(urlsplit(url).netloc):
                return f"{call.name}'s {name} puts a secret in a host name"
            named = hosts_in(ctx.state.task.lower())
            if not any(host == h or host.endswith("." + h) for h in named):
                return f"{call.name}'s {name} would send a secret to {host}, a host the " \
                       "user's request did not name"
        return None

    async def hide_result(self, ctx: ToolHookContext) -> None:
        result = ctx.result
        if result is None or not self.settings.redact:
            return
        vault = self.vault(ctx.run_id)
        # A long result is CPU work: off the event loop, so the other runs go on meanwhile.
        hidden = await off_loop(len(result.content), vault.hide, result.content)
        # The run's steps (and so its JSON) keep the placeholder arguments, not the values.
        call = replace(result.call, arguments=_hidden_args(vault, dict(result.call.arguments)))
        if hidden != result.content or call != result.call:
            if hidden != result.content:
                ctx.emit(SecretsRedacted, where="tool_result", tool=result.call.name)
            ctx.result = replace(result, call=call, content=hidden)


def _read_outside(ctx: HookContext) -> bool:
    return any(m.role != "system" and is_spotlit(m.content) for m in ctx.state.messages)


def _hidden_args(vault: Vault, args: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in args.items():
        out[k] = vault.hide(v) if isinstance(v, str) else v
    return out
