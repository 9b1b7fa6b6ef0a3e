"""Human-in-the-loop approval (CortexPrism's approval gate).

Tools marked ``needs_approval`` and calls a policy rule flags wait in ``pre_tool`` for an
:class:`Approver`. No answer within ``timeout_s`` (60 s) means deny; decisions are cached per
session for ``cache_ttl_s`` (1 hour) so the same question is not asked twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

import orjson

from thinkloop.core.errors import ConfigError
from thinkloop.core.events import ApprovalDecided, ApprovalDeferred, ApprovalRequested
from thinkloop.core.settings import APPROVAL_TIMEOUT_S
from thinkloop.core.types import ToolCall
from thinkloop.hooks import ToolHookContext


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    run_id: str
    session_id: str | None
    user_id: str | None
    tool: str
    arguments: dict[str, Any]
    call_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Decision:
    approved: bool
    reason: str = ""
    remember: bool = True  # cache it for the session
    # No decision now: the run pauses and ``agent.resume(session, decision)`` decides later.
    deferred: bool = False

    @staticmethod
    def defer(reason: str = "deferred") -> Decision:
        return Decision(False, reason, remember=False, deferred=True)


class Approver(Protocol):
    async def decide(self, request: ApprovalRequest) -> Decision: ...


class AutoApprove:
    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision(True, "auto-approved")


class AutoDeny:
    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision(False, "auto-denied")


DecideFn = Callable[[ApprovalRequest], "Decision | bool | Awaitable[Decision | bool]"]


class CallbackApprover:
    """Wrap a plain or async function returning a :class:`Decision` or a bool."""

    def __init__(self, fn: DecideFn) -> None:
        self.fn = fn

    async def decide(self, request: ApprovalRequest) -> Decision:
        value = self.fn(request)
        if inspect.isawaitable(value):
            value = await value
        return value if isinstance(value, Decision) else Decision(bool(value))


class ConsoleApprover:
    """Ask on the terminal (``thinkloop run --approve ask``); ``ask`` is ``input`` by default."""

    def __init__(self, ask: Callable[[str], str] = input) -> None:
        self.ask = ask

    async def decide(self, request: ApprovalRequest) -> Decision:
        args = orjson.dumps(request.arguments).decode()
        prompt = (f"\nApprove tool call {request.tool}({args})?"
                  f"{' Reason: ' + request.reason if request.reason else ''} [y/N] ")
        answer = (await _in_daemon_thread(self.ask, prompt)).strip().lower()
        return Decision(answer in {"y", "yes"}, f"console answered {answer or 'nothing'!r}")


async def _in_daemon_thread(fn: Callable[[str], str], arg: str) -> str:
    """Run a blocking prompt in a daemon thread.

    Not ``asyncio.to_thread``: after a timeout the prompt may never return, and a pool thread
    stuck in ``input()`` would keep ``asyncio.run`` (and so the CLI) from exiting.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def settle(value: str | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value or "")

    def work() -> None:
        value: str | None = None
        error: BaseException | None = None
        try:
            value = fn(arg)
        except BaseException as exc:  # EOFError, KeyboardInterrupt: report, do not vanish
            error = exc
        # RuntimeError: the loop is gone (the run ended), so nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="thinkloop-approval", daemon=True).start()
    return await future


class DeferAll:
    """Decide later: the run pauses (``thinkloop approvals decide`` or ``agent.resume``)."""

    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision.defer("deferred: decide with 'thinkloop approvals decide'")


def approver_for(mode: str) -> Approver:
    """The approver behind the CLI's ``--approve ask|auto|deny|pause``."""
    choices: dict[str, Callable[[], Approver]] = {
        "ask": ConsoleApprover, "auto": AutoApprove, "deny": AutoDeny, "pause": DeferAll}
    if mode not in choices:
        from thinkloop.core.errors import ConfigError

        raise ConfigError(f"--approve must be one of ask, auto, deny, pause (got {mode!r})")
    return choices[mode]()


@dataclass(frozen=True)
class ApprovalSettings:
    # None: calls that need approval are denied. A plain function of the request (returning a
    # Decision or a bool, or awaitable) is wrapped in a CallbackApprover.
    approver: Approver | DecideFn | None = None
    timeout_s: float = APPROVAL_TIMEOUT_S
    cache_ttl_s: float = 3600.0
    # "pause": no approver, or none within timeout_s, pauses the run (resumable from the
    # session store) instead of denying the call. Runs without a session still deny.
    on_timeout: Literal["deny", "pause"] = "deny"

    def __post_init__(self) -> None:
        # A plain function is the obvious thing to pass; without this it was accepted here
        # and failed (safely, as a denial) only at the first call that needed approval.
        approver: Any = self.approver
        if approver is None or callable(getattr(approver, "decide", None)):
            return
        if not callable(approver):
            raise ConfigError(f"approver must have an async decide(request) method or be a "
                              f"function of the request; got {approver!r}")
        object.__setattr__(self, "approver", CallbackApprover(approver))

    @property
    def decider(self) -> Approver | None:
        """The approver as the gate calls it (a plain function arrives wrapped)."""
        return cast("Approver | None", self.approver)


def _key(ctx: ToolHookContext, call: ToolCall) -> tuple[str, str, str]:
    scope = ctx.cfg.session_id or f"run:{ctx.run_id}"
    return scope, call.name, orjson.dumps(call.arguments, option=orjson.OPT_SORT_KEYS,
                                          default=str).decode()


class ApprovalGate:
    def __init__(self, settings: ApprovalSettings | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings or ApprovalSettings()
        self.clock = clock
        self._cache: dict[tuple[str, str, str], tuple[Decision, float]] = {}

    def _cached(self, key: tuple[str, str, str]) -> Decision | None:
        now = self.clock()
        for k in [k for k, (_, exp) in self._cache.items() if exp <= now]:
            del self._cache[k]
        hit = self._cache.get(key)
        return hit[0] if hit else None

    async def _ask(self, request: ApprovalRequest) -> tuple[Decision, str]:
        approver = self.settings.decider
        pause = self.settings.on_timeout == "pause"
        if approver is None:
            if pause:
                return Decision.defer("no approver is configured"), "none"
            # The developer reads this in the events, the model in its observation.
            return Decision(False, f"{request.tool} needs approval and no approver is "
                            "configured (GuardSettings(approval=ApprovalSettings(approver=...)))",
                            remember=False), "none"
        try:
            async with asyncio.timeout(self.settings.timeout_s):
                return await approver.decide(request), "approver"
        except TimeoutError:
            waited = f"no decision within {self.settings.timeout_s:g}s"
            if pause:
                return Decision.defer(waited), "timeout"
            return Decision(False, waited, remember=False), "timeout"
        except Exception as exc:  # fail closed: a broken approver never lets a call through
            return Decision(False, f"approver failed: {type(exc).__name__}: {exc}",
                            remember=False), "error"

    async def decide(self, ctx: ToolHookContext, call: ToolCall, reason: str) -> Decision:
        """Ask (or remember) whether ``call`` may run; emits the approval events."""
        resume = ctx.state.resume
        if resume is not None and resume.approves(call.id):
            return Decision(True, resume.reason)  # approved on resume; the event went out
        key = _key(ctx, call)
        cached = self._cached(key)
        if cached is not None:
            ctx.emit(ApprovalDecided, tool=call.name, id=call.id, approved=cached.approved,
                     reason=cached.reason, source="cache")
            return cached
        request = ApprovalRequest(ctx.run_id, ctx.cfg.session_id, ctx.cfg.user_id, call.name,
                                  dict(call.arguments), call.id, reason)
        ctx.emit(ApprovalRequested, tool=call.name, id=call.id, arguments=call.arguments,
                 reason=reason)
        decision, source = await self._ask(request)
        if decision.deferred:
            return self._defer(ctx, call, decision, reason)
        if decision.remember:
            self._cache[key] = (decision, self.clock() + self.settings.cache_ttl_s)
        ctx.emit(ApprovalDecided, tool=call.name, id=call.id, approved=decision.approved,
                 reason=decision.reason, source=source)
        return decision

    def _defer(self, ctx: ToolHookContext, call: ToolCall, decision: Decision,
               reason: str) -> Decision:
        """Record the call as pending (the run pauses after this step), or deny it when there
        is no session to keep the paused run in."""
        session = ctx.cfg.session_id
        if session is None:
            denied = Decision(False, f"{decision.reason}; a run without a session cannot "
                              "pause", remember=False)
            ctx.emit(ApprovalDecided, tool=call.name, id=call.id, approved=False,
                     reason=denied.reason, source="defer")
            return denied
        ctx.defer(call, reason)
        ctx.emit(ApprovalDeferred, tool=call.name, id=call.id, reason=decision.reason)
        return decision
