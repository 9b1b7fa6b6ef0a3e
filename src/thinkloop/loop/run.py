"""The one loop: think -> act -> observe, until an answer or a limit.

``execute`` never raises for anything a model or a tool did: it records a status instead.
Streaming and non-streaming runs share this code; they differ only in whether the model is
asked to stream (``RunConfig.stream_model``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from thinkloop.errors import OutputValidationError, ThinkloopError
from thinkloop.loop.outcomes import Finish, NextStep, RunTools, TryAgain
from thinkloop.loop.output import parse_output
from thinkloop.loop.state import RunConfig, RunState
from thinkloop.protocols.base import Act, Answer, Malformed
from thinkloop.tools.base import ToolContext
from thinkloop.tools.execute import run_calls
from thinkloop.types import Message, ModelResponse, RunStatus, Step, TextDelta, ToolCall

CAP_NOTICE = (
    "You have used all {n} steps available for this task. Do not call any more tools. "
    "Give your best final answer now from what you have found so far."
)
MALFORMED_NOTICE = (
    "Your last reply looked like a tool call but it could not be read: {problem}. "
    "Send the tool call again in the expected format, or give your final answer."
)
OUTPUT_NOTICE = (
    "Your final answer did not match the required output schema: {problem}. "
    "Reply again with only a JSON value that matches the schema."
)


async def execute(cfg: RunConfig, state: RunState) -> None:
    """Run to the end and record how it ended; only outside cancellation is re-raised."""
    state.emit("run.started", task=state.task, model=cfg.model.name)
    try:
        async with asyncio.timeout(cfg.limits.timeout_s):
            await drive(cfg, state)
    except TimeoutError:
        close_unanswered(state, "[no result: the run timed out]")
        end(state, "timeout", f"run timed out after {cfg.limits.timeout_s:g}s")
    except asyncio.CancelledError:
        close_unanswered(state, "[no result: the run was cancelled]")
        end(state, "cancelled")
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            task.uncancel()
    except (ThinkloopError, Exception) as exc:
        close_unanswered(state, "[no result: the run failed]")
        state.error = exc
        end(state, "failed", f"{type(exc).__name__}: {exc}")


async def drive(cfg: RunConfig, state: RunState) -> None:
    while state.step < cfg.limits.max_steps:
        response = await think(cfg, state, with_tools=True)
        match decide(cfg, state, response):
            case RunTools(assistant, calls):
                await act(cfg, state, assistant, calls, response)
            case TryAgain(assistant, feedback):
                state.append(assistant, Message.user(feedback))
                record_step(state, response, (), ())
            case Finish(assistant, text, output):
                state.append(assistant)
                record_step(state, response, (), ())
                finish(state, "completed", text, output)
                return
        if state.cancel_after_step:
            raise asyncio.CancelledError
    await answer_at_cap(cfg, state)


async def think(cfg: RunConfig, state: RunState, *, with_tools: bool) -> ModelResponse:
    """One model call, with its events."""
    specs = cfg.protocol.model_tools(cfg.specs) if with_tools else ()
    state.emit("llm.request", messages=len(state.messages), tools=[s.name for s in specs])
    if cfg.stream_model:
        response = None
        async for item in cfg.model.stream(state.messages, specs, cfg.settings):
            if isinstance(item, TextDelta):
                state.emit("chunk", content=item.text, kind=item.kind)
            else:
                response = item
        assert response is not None
    else:
        response = await cfg.model.complete(state.messages, specs, cfg.settings)
    state.usage = state.usage + response.usage
    msg = response.message
    state.emit(
        "llm.response",
        text=msg.content,
        thought=msg.thought,
        tool_calls=[_call_payload(c) for c in msg.tool_calls],
        usage=_usage_payload(response),
        finish_reason=response.finish_reason,
    )
    return response


def decide(cfg: RunConfig, state: RunState, response: ModelResponse) -> NextStep:
    reading = cfg.protocol.read(response)
    assistant = response.message
    match reading:
        case Act(calls):
            return RunTools(assistant, calls)
        case Malformed(problem):
            return TryAgain(assistant, MALFORMED_NOTICE.format(problem=problem))
        case Answer(text):
            if cfg.output_type is None:
                return Finish(assistant, text, text)
            try:
                return Finish(assistant, text, parse_output(cfg.output_type, text))
            except ValueError as exc:
                if state.output_retries_used >= cfg.limits.output_retries:
                    raise OutputValidationError(
                        f"final answer still invalid after {state.output_retries_used} "
                        f"retries: {exc}"
                    ) from None
                state.output_retries_used += 1
                return TryAgain(assistant, OUTPUT_NOTICE.format(problem=exc))
    raise AssertionError(f"unhandled reading {reading!r}")


async def act(
    cfg: RunConfig,
    state: RunState,
    assistant: Message,
    calls: tuple[ToolCall, ...],
    response: ModelResponse,
) -> None:
    """Run the step's tool calls and append what they returned."""
    state.append(assistant)
    contexts = []
    for c in calls:
        state.emit("tool.call", **_call_payload(c))
        contexts.append(
            ToolContext(state.run_id, state.step, c.id, cfg.session_id, cfg.user_id, cfg.deps)
        )
    results = await run_calls(cfg.tools, calls, contexts, cfg.limits.tool_timeout_s)
    for r in results:
        state.emit(
            "tool.result",
            id=r.call.id,
            name=r.call.name,
            is_error=r.is_error,
            content=r.content,
            duration_s=round(r.duration_s, 6),
        )
    state.append(*cfg.protocol.observations(assistant, results))
    record_step(state, response, calls, tuple(results))


async def answer_at_cap(cfg: RunConfig, state: RunState) -> None:
    """Out of steps: one last call with tools withheld, so the run ends with an answer."""
    state.append(Message.user(CAP_NOTICE.format(n=cfg.limits.max_steps)))
    response = await think(cfg, state, with_tools=False)
    reading = cfg.protocol.read(response)
    text = reading.text if isinstance(reading, Act | Answer) else response.message.content
    state.append(Message.assistant(text, thought=response.message.thought))
    output: Any = text
    if cfg.output_type is not None:
        try:
            output = parse_output(cfg.output_type, text)
        except ValueError:
            output = None
    record_step(state, response, (), ())
    finish(state, "max_steps", text, output)


def record_step(state: RunState, response: ModelResponse, calls: Any, results: Any) -> None:
    msg = response.message
    state.steps.append(
        Step(len(state.steps) + 1, msg.thought, msg.content, calls, results, response.usage)
    )
    state.emit("step.completed", tool_calls=len(calls))


def finish(state: RunState, status: RunStatus, text: str, output: Any) -> None:
    state.text = text
    state.output = output
    end(state, status)


def end(state: RunState, status: RunStatus, error: str | None = None) -> None:
    state.status = status
    state.error_text = error
    usage = {"requests": state.usage.requests, "input_tokens": state.usage.input_tokens,
             "output_tokens": state.usage.output_tokens}
    if status == "failed":
        state.emit("run.failed", error=error, usage=usage)
    elif status == "cancelled":
        state.emit("run.cancelled", usage=usage)
    else:
        state.emit("run.completed", status=status, output=state.text, error=error, usage=usage)


def close_unanswered(state: RunState, note: str) -> None:
    """Keep the history consistent: every tool call gets a result, even an interrupted one."""
    if not state.messages:
        return
    answered = {m.tool_call_id for m in state.messages if m.role == "tool"}
    last = next((m for m in reversed(state.messages) if m.role == "assistant"), None)
    if last is None or not last.tool_calls:
        return
    with contextlib.suppress(ValueError):
        if state.messages.index(last) < state.new_from:
            return
    for c in last.tool_calls:
        if c.id not in answered:
            state.append(Message.tool(c.id, c.name, note))


def _call_payload(c: ToolCall) -> dict[str, Any]:
    return {"id": c.id, "name": c.name, "arguments": c.arguments}


def _usage_payload(response: ModelResponse) -> dict[str, int]:
    u = response.usage
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens}
