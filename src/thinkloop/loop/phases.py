"""The phases of one step: think (call the model), decide (read the reply), act (run tools).

Each phase runs its hook stages; a hook that stops the run raises :class:`StopRun`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from thinkloop.core.children import ChildRuns
from thinkloop.core.errors import InternalError, OutputValidationError
from thinkloop.core.events import (
    Chunk,
    LlmRequest,
    LlmResponse,
    ModelFallback,
    ModelInputCut,
    StepCompleted,
    ToolCalled,
    ToolReturned,
)
from thinkloop.core.protocol import Act, Answer, Malformed
from thinkloop.core.tool import Tool, ToolContext
from thinkloop.core.types import (
    Message,
    ModelResponse,
    RunStatus,
    Step,
    TextDelta,
    ToolCall,
    ToolResult,
    Usage,
)
from thinkloop.hooks import (
    HookContext,
    ReasonContext,
    ReflectContext,
    RunConfig,
    RunState,
    ToolHookContext,
)
from thinkloop.loop.engine_text import NOT_AN_ANSWER_NOTICE, why_not_an_answer
from thinkloop.loop.outcomes import Finish, NextStep, RunTools, TryAgain
from thinkloop.loop.output import parse_output
from thinkloop.protocols.stream import ChunkFilter, chunk_filter
from thinkloop.tools.execute import run_call

MALFORMED_NOTICE = (
    "Your last reply looked like a tool call but it could not be read: {problem}. "
    "Send the tool call again in the expected format, or give your final answer."
)
OUTPUT_NOTICE = (
    "Your final answer did not match the required output schema: {problem}. "
    "Reply again with only a JSON value that matches the schema."
)


class StopRun(Exception):
    """A hook ended the run; carries the status, the reason and the answer, if any."""

    def __init__(self, status: RunStatus, reason: str, answer: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.answer = answer


async def run_stage(cfg: RunConfig, ctx: HookContext) -> None:
    if ctx.stage in cfg.hooks:
        await cfg.hooks.run(ctx)
        if ctx.stop_reason is not None:
            raise StopRun(ctx.stop_status, ctx.stop_reason, ctx.stop_answer)


async def streamed(cfg: RunConfig, state: RunState,
                   stream: AsyncIterator[TextDelta | ModelResponse]) -> ModelResponse:
    """The streamed reply's response, its text emitted as ``chunk`` events on the way."""
    response = None
    # Text protocols parse the stream: only prose goes out as text, calls as tool_call. The
    # filter is made with the first text, so a run waiting on its model holds none.
    chunks: ChunkFilter | None = None
    async for item in stream:
        if isinstance(item, TextDelta):
            if chunks is None:
                chunks = chunk_filter(cfg.protocol)
            for delta in chunks.feed(item):
                state.emit(Chunk, content=delta.text, kind=delta.kind)
        else:
            response = item
    for delta in chunks.close() if chunks is not None else ():
        state.emit(Chunk, content=delta.text, kind=delta.kind)
    assert response is not None
    return response


async def think(
    cfg: RunConfig, state: RunState, *, with_tools: bool, extra: Sequence[Message] = ()
) -> ModelResponse:
    """One model call between its pre_reason and post_reason stages. ``extra`` messages (and
    a rejected reply's scratch) join this request only, never the history."""
    visible = list(cfg.specs) if with_tools else []
    request = [*state.messages, *state.scratch, *extra] if state.scratch or extra else None
    state.scratch = ()
    ctx = ReasonContext("pre_reason", cfg, state, messages=request or state.messages,
                        tools=visible, settings=cfg.settings)
    if "pre_reason" in cfg.hooks:
        # Hooks replace ctx.messages to change this request; the history stays as it is.
        ctx.messages = request or list(state.messages)
        await run_stage(cfg, ctx)
    # The tools visible this step are decided now; the tool list and the decode constraint
    # both follow from them (a tool a hook hid is neither offered nor allowed).
    visible = ctx.tools
    choice = (ctx.settings or cfg.settings).tool_choice
    # Text protocols describe the exact shape of a reply, for providers that constrain decoding.
    shape = (cfg.protocol.reply_constraint(visible, required=choice == "required")
             if visible and choice != "none" else None)
    base = ctx.settings or cfg.settings
    settings = base if shape is None else replace(base, constraint=shape)
    ctx.tools = list(cfg.protocol.model_tools(visible))
    model = ctx.model or cfg.model
    state.emit(LlmRequest.of, ctx.messages, ctx.tools)
    if cfg.stream_model:
        response = await streamed(cfg, state, model.stream(ctx.messages, ctx.tools, settings))
    else:
        response = await model.complete(ctx.messages, ctx.tools, settings)
    state.usage = state.usage + response.usage
    state.emit(LlmResponse.of, response)
    if response.fallbacks:
        state.emit(ModelFallback.of, response)
    if response.cut_chars:
        state.emit(ModelInputCut.of, response)
    ctx.stage, ctx.response = "post_reason", response
    await run_stage(cfg, ctx)
    return ctx.response or response


async def decide(
    cfg: RunConfig, state: RunState, response: ModelResponse, *, with_tools: bool = True
) -> NextStep:
    reading = cfg.protocol.read(response)
    assistant = response.message
    if not with_tools and isinstance(reading, Act):
        # Tools were withheld: a call now is not run; its text (or else the result the
        # model already has for it) is the answer.
        reading = Answer(reading.text or known_result(state, reading.calls), reading.thought)
    if isinstance(reading, Act | Answer) and reading.thought and not assistant.thought:
        # Text protocols find thoughts inside the reply; keep them with the step.
        assistant = replace(assistant, thought=reading.thought)
    match reading:
        case Act(calls):
            return RunTools(assistant, calls)
        case Malformed(problem):
            return TryAgain(assistant, MALFORMED_NOTICE.format(problem=problem))
        case Answer(text) if (why := why_not_an_answer(text, cfg.specs, state)):
            return not_an_answer(state, assistant, why)
        case Answer(text):
            output = validated_output(cfg, state, text)
            if isinstance(output, _Invalid):
                return TryAgain(assistant, OUTPUT_NOTICE.format(problem=output.problem))
            ctx = ReflectContext("pre_reflect", cfg, state, text=text, output=output)
            await run_stage(cfg, ctx)
            if ctx.feedback is not None:
                return TryAgain(assistant, ctx.feedback)
            ctx.stage = "post_reflect"
            await run_stage(cfg, ctx)
            return Finish(assistant, ctx.text, ctx.output)
    raise InternalError(f"unhandled reading {reading!r}")


def not_an_answer(state: RunState, assistant: Message, why: str) -> TryAgain:
    """Engine text instead of an answer: ask once more with the tools withheld; if that
    reply is engine text too, the run ends ``no_answer`` (never ``completed``)."""
    if state.rejected_answers:
        raise StopRun("no_answer", f"the model gave no answer of its own: its reply {why}")
    state.rejected_answers += 1
    state.answer_now = ""  # withhold the tools; the notice below is the only note
    return TryAgain(assistant, NOT_AN_ANSWER_NOTICE.format(why=why))


class _Invalid:
    def __init__(self, problem: str) -> None:
        self.problem = problem


def validated_output(cfg: RunConfig, state: RunState, text: str) -> Any:
    """The structured output, an ``_Invalid`` to retry, or raise once retries are used up."""
    if cfg.output_type is None:
        return text
    try:
        return parse_output(cfg.output_type, text)
    except ValueError as exc:
        if state.output_retries_used >= cfg.limits.output_retries:
            raise OutputValidationError(
                f"final answer still invalid after {state.output_retries_used} retries: {exc}"
            ) from None
        state.output_retries_used += 1
        return _Invalid(str(exc))


async def act(
    cfg: RunConfig, state: RunState, assistant: Message, calls: tuple[ToolCall, ...],
    response: ModelResponse, answered: Mapping[str, ToolResult] | None = None,
) -> None:
    """Run the step's tool calls concurrently; observations keep the model's order.

    ``answered``: calls that already have a result (a recovered run's), which never run again.
    """
    state.append(assistant)
    for c in calls:
        state.emit(ToolCalled.of, c)
    todo = tuple(c for c in calls if c.id not in answered) if answered else calls
    cap = cfg.limits.parallel_calls
    if len(todo) == 1:
        ran = [await run_tool(cfg, state, todo[0])]
    else:
        # 500 calls in one reply ran at once, and the next request carried 504 messages.
        ran = [*await _run_parallel(cfg, state, todo[:cap]), *_refused(todo[cap:], cap)]
    results = ran if todo is calls else _in_order(calls, ran, answered or {})
    # Calls the approval gate deferred get no observation yet: the run pauses after this
    # step and ``agent.resume`` answers them (loop/resume.py).
    waiting = [p for p in state.pending if any(c.id == p.call_id for c in calls)]
    if waiting:
        results = [r for r in results if all(r.call.id != p.call_id for p in waiting)]
    for r in results:
        state.emit(ToolReturned.of, r)
    if results:
        state.append(*cfg.protocol.observations(assistant, results))
    record_step(state, assistant, response.usage, calls, tuple(results))
    if waiting:
        raise StopRun("paused", "waiting for approval of " + ", ".join(
            f"{p.tool} (call {p.call_id})" for p in waiting))


TOO_MANY_CALLS = ("Not run: at most {cap} tool calls run per reply, and this reply made "
                  "{n}. If it is still needed, make this call again in your next reply.")


def _refused(calls: tuple[ToolCall, ...], cap: int) -> list[ToolResult]:
    note = TOO_MANY_CALLS.format(cap=cap, n=cap + len(calls))
    return [ToolResult(c, note, is_error=True) for c in calls]


def _in_order(
    calls: tuple[ToolCall, ...], ran: list[ToolResult], answered: Mapping[str, ToolResult]
) -> list[ToolResult]:
    fresh = {r.call.id: r for r in ran}
    return [answered.get(c.id) or fresh[c.id] for c in calls]


async def _run_parallel(
    cfg: RunConfig, state: RunState, calls: tuple[ToolCall, ...]
) -> list[ToolResult]:
    # A TaskGroup, not gather: when a hook stops the run (or a critical one fails) in one
    # call, the sibling calls are cancelled instead of running on after the run has ended.
    try:
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(run_tool(cfg, state, c)) for c in calls]
    except BaseExceptionGroup as group:
        raise group.exceptions[0] from None
    return [t.result() for t in tasks]


async def run_tool(cfg: RunConfig, state: RunState, call: ToolCall) -> ToolResult:
    """One call between its pre_tool and post_tool stages."""
    hooked = "pre_tool" in cfg.hooks or "post_tool" in cfg.hooks
    ctx = ToolHookContext("pre_tool", cfg, state, call=call, tool=cfg.tools.get(call.name))
    if hooked:
        await run_stage(cfg, ctx)
    current = ctx.call or call
    tctx = ToolContext(state.run_id, state.step, current.id, cfg.session_id, cfg.user_id,
                       cfg.deps, emit=state.emit, charge_usage=state.charge, run=cfg,
                       agent_id=cfg.agent_id, parent_run_id=cfg.parent_run_id,
                       children=_children(state, ctx.tool))
    result = ctx.result or await run_call(cfg.tools, current, tctx, cfg.limits.tool_timeout_s,
                                          cfg.limits.tool_output_chars)
    if hooked:
        ctx.stage, ctx.result = "post_tool", result
        await run_stage(cfg, ctx)
        result = ctx.result or result
    if ctx.answer_now is not None:
        state.answer_now = ctx.answer_now
    return result


def _children(state: RunState, tool: Tool | None) -> ChildRuns | None:
    # Only a tool that starts runs (spawn_agent) gets the tracker: most runs never make one.
    return state.child_runs() if tool is not None and tool.meta.get("starts_runs") else None


def known_result(state: RunState, calls: tuple[ToolCall, ...]) -> str:
    """The first successful result of one of ``calls`` made earlier in the run, or ""."""
    for call in calls:
        for step in state.steps:
            for r in step.results:
                same = r.call.name == call.name and r.call.arguments == call.arguments
                if same and not r.is_error:
                    return r.content
    return ""


def record_step(
    state: RunState, assistant: Message, usage: Usage, calls: Any, results: Any
) -> None:
    state.emit(StepCompleted, tool_calls=len(calls))
    state.steps.append(
        Step(len(state.steps) + 1, assistant.thought, assistant.content, calls, results, usage)
    )


