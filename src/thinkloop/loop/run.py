"""The one loop: assess, then think -> act -> observe until an answer or a limit, then deliver.

``execute`` never raises for anything a model or a tool did: it records a status instead.
Streaming and non-streaming runs share this code; they differ only in whether the model is
asked to stream (``RunConfig.stream_model``).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from thinkloop.core.events import (
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    usage_payload,
)
from thinkloop.core.protocol import Act, Answer
from thinkloop.core.types import Message, RunStatus
from thinkloop.hooks import AssessContext, OutputContext, RunConfig, RunState
from thinkloop.loop.engine_text import why_not_an_answer
from thinkloop.loop.notices import CAP_NOTICE
from thinkloop.loop.outcomes import Finish, RunTools, TryAgain
from thinkloop.loop.output import parse_output
from thinkloop.loop.phases import StopRun, act, decide, record_step, run_stage, think
from thinkloop.loop.resume import continue_paused, continue_recovered
from thinkloop.offload import off_loop
from thinkloop.protocols.sanitize import CLEANERS, is_silent, sanitize_output
from thinkloop.spotlight import strip_echo

# The protocol's cleaners, first undoing spotlight markup the model copied from a tool result.
ANSWER_CLEANERS = (strip_echo, *CLEANERS)


async def execute(cfg: RunConfig, state: RunState) -> None:
    """Run to the end and record how it ended; only outside cancellation is re-raised."""
    state.emit(RunStarted, task=state.task, model=cfg.model.name)
    try:
        async with asyncio.timeout(cfg.limits.timeout_s):
            # A resumed run was assessed before it paused: it answers the held calls instead.
            await (continue_paused if state.resume is not None
                   else continue_recovered if state.recovered is not None else assess)(cfg, state)
            await drive(cfg, state)
    except StopRun as stop:
        if stop.status == "completed":  # a hook answered for the model (ask_first's question)
            close_unanswered(state, "[no result: the run was answered]")
            state.append(Message.assistant(stop.reason))
            finish_now(state, "completed", stop.reason, stop.reason)
        else:
            if stop.status != "paused":  # a paused run's held calls are answered on resume
                close_unanswered(state, f"[no result: {stop.reason}]")
            if stop.answer is not None:  # a guard's answer goes out sanitized, like a model's
                output = stop.answer if cfg.output_type is None else None
                finish_now(state, stop.status, stop.answer, output)
            end(state, stop.status, stop.reason)
    except TimeoutError:
        close_unanswered(state, "[no result: the run timed out]")
        end(state, "timeout", f"run timed out after {cfg.limits.timeout_s:g}s")
    except asyncio.CancelledError:
        close_unanswered(state, "[no result: the run was cancelled]")
        end(state, "cancelled")
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            task.uncancel()
    except Exception as exc:
        close_unanswered(state, "[no result: the run failed]")
        state.error = exc
        end(state, "failed", f"{type(exc).__name__}: {exc}")
    await deliver(cfg, state)


async def assess(cfg: RunConfig, state: RunState) -> None:
    """pre_assess / post_assess: hooks may rewrite the task and the system prompt."""
    if "pre_assess" not in cfg.hooks and "post_assess" not in cfg.hooks:
        return
    ctx = AssessContext("pre_assess", cfg, state, task=state.task,
                        system_prompt=state.messages[0].content)
    await run_stage(cfg, ctx)
    ctx.stage = "post_assess"
    await run_stage(cfg, ctx)
    if ctx.system_prompt != state.messages[0].content:
        state.messages[0] = Message.system(ctx.system_prompt)
    if ctx.task != state.task:
        # Keep the context blocks (files, page) that precede the task in the first message.
        first = state.messages[state.new_from]
        head = first.content[: len(first.content) - len(state.task)]
        state.task = ctx.task
        state.messages[state.new_from] = Message.user(head + ctx.task, first.parts)


async def drive(cfg: RunConfig, state: RunState) -> None:
    while state.step < (state.max_steps or cfg.limits.max_steps):
        # A guard may withhold the tools for this reply (a repeated call): the model answers.
        # The notice joins this request only, like every engine note (loop/notices.py).
        notice, state.answer_now = state.answer_now, None
        extra = (Message.notice(notice),) if notice else ()
        response = await think(cfg, state, with_tools=notice is None, extra=extra)
        match await decide(cfg, state, response, with_tools=notice is None):
            case RunTools(assistant, calls):
                await act(cfg, state, assistant, calls, response)
            case TryAgain(assistant, feedback):
                state.scratch = (assistant, Message.notice(feedback))
                record_step(state, assistant, response.usage, (), ())
            case Finish(assistant, text, output):
                clean = await finish(state, "completed", text, output)
                answered = answer_message(assistant, clean)
                state.append(answered)
                record_step(state, answered, response.usage, (), ())
                return
        if state.cancel_after_step:
            raise asyncio.CancelledError
    await answer_at_cap(cfg, state)


async def answer_at_cap(cfg: RunConfig, state: RunState) -> None:
    """Out of steps: one last call with tools withheld, so the run ends with an answer."""
    # The notice is for this request only: it is not the user's turn, so not in the history.
    notice = Message.notice(CAP_NOTICE.format(n=state.max_steps or cfg.limits.max_steps))
    response = await think(cfg, state, with_tools=False, extra=(notice,))
    reading = cfg.protocol.read(response)
    text = reading.text if isinstance(reading, Act | Answer) else response.message.content
    if why_not_an_answer(text, (), state):
        text = ""  # the model repeated the engine's (or a tool's) words: that is no answer
    thought = response.message.thought or getattr(reading, "thought", None)
    output: Any = text
    if cfg.output_type is not None:
        try:
            output = parse_output(cfg.output_type, text)
        except ValueError:
            output = None
    clean = await finish(state, "max_steps", text, output)
    assistant = Message.assistant(clean, thought=thought)
    state.append(assistant)
    record_step(state, assistant, response.usage, (), ())


async def finish(state: RunState, status: RunStatus, text: str, output: Any) -> str:
    """Record the final answer; returns it sanitized (what the session keeps)."""
    # Every final answer is sanitized: a model's long one in a worker thread, as every scan
    # of text is.
    clean = await off_loop(len(text), sanitize_output, text, ANSWER_CLEANERS)
    return record(state, status, text, clean, output)


def finish_now(state: RunState, status: RunStatus, text: str, output: Any) -> str:
    """``finish`` with no wait: for a hook's or a guard's answer (a few lines), from the
    handler of a stopped run, where a cancellation arriving in a wait would skip the run's
    delivery."""
    return record(state, status, text, sanitize_output(text, ANSWER_CLEANERS), output)


def record(state: RunState, status: RunStatus, text: str, clean: str, output: Any) -> str:
    # NO_REPLY as the whole answer makes the run silent.
    state.silent = is_silent(clean)
    state.text = "" if state.silent else clean
    state.output = state.text if isinstance(output, str) and output == text else output
    end(state, status)
    return clean


def answer_message(assistant: Message, clean: str) -> Message:
    """The final assistant message as the session keeps it: the sanitized answer, no calls."""
    if assistant.content == clean and not assistant.tool_calls:
        return assistant
    return replace(assistant, content=clean, tool_calls=())


def end(state: RunState, status: RunStatus, error: str | None = None) -> None:
    state.status = status
    state.error_text = error


async def deliver(cfg: RunConfig, state: RunState) -> None:
    """pre_output hooks may rewrite the answer; then the run's terminal event goes out."""
    if "pre_output" in cfg.hooks:
        ctx = OutputContext("pre_output", cfg, state, text=state.text, output=state.output,
                            silent=state.silent, status=state.status)
        try:
            await cfg.hooks.run(ctx)
        except Exception as exc:  # a critical pre_output hook failed
            state.error, state.status = exc, "failed"
            state.error_text = f"{type(exc).__name__}: {exc}"
        else:
            rewritten = ctx.text != state.text
            if cfg.output_type is None and rewritten:
                ctx.output = ctx.text  # a plain-text answer is its own output
            state.text, state.output, state.silent = ctx.text, ctx.output, ctx.silent
            if ctx.stop_reason is not None:
                # A stop here withholds the answer, unless the hook wrote a replacement.
                if not rewritten:
                    state.text, state.output = "", None
                state.status, state.error_text = ctx.stop_status, ctx.stop_reason
    usage = usage_payload(state.usage)
    if state.status == "failed":
        state.emit(RunFailed, error=state.error_text, usage=usage)
    elif state.status == "cancelled":
        state.emit(RunCancelled, usage=usage)
    else:
        state.emit(RunCompleted, status=state.status, output=state.text,
                   error=state.error_text, silent=state.silent, usage=usage)


def close_unanswered(state: RunState, note: str) -> None:
    """Keep the history consistent: every tool call gets a result, even an interrupted one."""
    new = state.new_messages
    answered = {m.tool_call_id for m in new if m.role == "tool"}
    last = next((m for m in reversed(new) if m.role == "assistant"), None)
    if last is None:
        return
    for c in last.tool_calls:
        if c.id not in answered:
            state.append(Message.tool(c.id, c.name, note))
