"""``thinkloop run --stdio``: the container mode (Stingyclaw's runner protocol).

A host starts the process, writes one JSON payload on stdin and reads stdout. Every message for
the host is a JSON object between two marker lines, so anything else on stdout (a library that
prints) can never be mistaken for one::

    ---THINKLOOP_OUTPUT_START---
    {"status": "success", "result": "...", "session_id": "s1", "run_id": "...", ...}
    ---THINKLOOP_OUTPUT_END---

The seed's own payload (``prompt``, ``sessionId``, ``secrets`` with ``OPENROUTER_API_KEY``...)
is answered between its ``NANOCLAW`` markers, with ``newSessionId`` (:mod:`.stdio_payload`).
The text a model writes alongside its tool calls is streamed as blocks with ``"status":
"running"``, and so are ``send_message``/``send_voice`` (``"type": "message"``/``"voice"``) and
``ask_human``'s question (``"type": "question"``), whose answer is the host's next JSON line on
stdin (or file in the IPC folder, :mod:`.stdio_channel`). The last block is the result. A run
that fails (or times out, or is cancelled), a payload that is not valid, or a model that cannot
be reached writes ``"status": "error"`` and the process exits 1, which a host takes as "retry
later" (unless the block says ``"retry": false``). Secrets in the payload become environment
variables for the model provider and (but for the provider's own) the tools, and their values
are cut out of everything written to stdout and stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any, TextIO

import orjson
from pydantic import ValidationError

from thinkloop.api import RunHandle, RunResult, open_store, validation_summary
from thinkloop.cli.build import AgentOptions, build_agent
from thinkloop.cli.stdio_channel import (
    HostChannel,
    Inbox,
    Ipc,
    Output,
    Redactor,
    send_voice_tool,
)
from thinkloop.cli.stdio_payload import (
    Request,
    StdioPayload,
    markers_for,
    parse,
    read_payload,
)
from thinkloop.core.errors import ThinkloopError
from thinkloop.core.events import StepCompleted
from thinkloop.core.settings import (
    PROVIDER_ENV,
    Settings,
    export_environment,
    load_settings,
)
from thinkloop.workers.blocks import THINKLOOP

OUTPUT_START = THINKLOOP.start
OUTPUT_END = THINKLOOP.end
# Outcomes a host should treat as failures (and may retry); the others carry an answer.
_ERROR_STATUSES = frozenset({"failed", "timeout", "cancelled"})
# The provider's own variables reach the model client, never the model's commands.
_PROVIDER_VARS = frozenset(PROVIDER_ENV.values())

__all__ = ["OUTPUT_END", "OUTPUT_START", "Output", "Redactor", "StdioPayload", "main_stdio",
           "run_stdio"]


def run_stdio(inp: TextIO, out: TextIO, err: TextIO, defaults: AgentOptions) -> int:
    """Read the payload, run it (and the follow-ups), write the blocks; the exit code."""
    raw = read_payload(inp)
    data: Any = None
    try:
        data = orjson.loads(raw or b"null")
        req = parse(data)
    except (orjson.JSONDecodeError, ValidationError) as exc:
        Output(out, Redactor({}), markers_for(data)).block(
            {"status": "error", "result": None, "retry": False,
             "error": f"invalid payload: {_brief(exc)}"})
        return 1
    extra = {"newSessionId": req.session} if req.seed else None
    output = Output(out, Redactor(req.secrets), req.markers, extra, seed=req.seed)
    # The secrets are environment variables for the providers and the tools' commands; this
    # process is the container's, so they live exactly as long as the run.
    export_environment({**req.secrets, **req.env})
    settings = _settings(req)
    opts = defaults.model_copy(update={
        "model": req.model or defaults.model, "tools": req.tools or defaults.tools,
        "max_steps": req.max_steps or defaults.max_steps, "approve": req.approve,
        **({"instructions": _persona(req.name)} if req.name else {})})
    saved, sys.stderr = sys.stderr, RedactingStream(err, output.redact)
    try:
        return asyncio.run(_serve(req, opts, output, settings, inp))
    except (ThinkloopError, OSError) as exc:
        output.block({"status": "error", "result": None, "session_id": req.session,
                      "error": f"{type(exc).__name__}: {exc}"})
        return 1
    finally:
        sys.stderr = saved


def _settings(req: Request) -> Settings:
    settings = load_settings()
    # The sandbox passes only allow-listed variables to commands: the payload's secrets are
    # meant for the tools, so they join the list (but the model provider's key and endpoint).
    names = [k for k in req.secrets if k not in _PROVIDER_VARS]
    tools = settings.tools.model_copy(
        update={"sandbox_env": (*settings.tools.sandbox_env, *names)})
    return settings.model_copy(update={"tools": tools})


def _persona(name: str) -> str:
    return (f"You are {name}, a personal AI assistant. Use the tools when they help; "
            "send_message tells the person something while you keep working.")


class RedactingStream:
    """stderr during the run: what tools, channels and loggers write there is redacted too."""

    def __init__(self, inner: TextIO, redact: Redactor) -> None:
        self.inner = inner
        self.redact = redact

    def write(self, text: str) -> int:
        return self.inner.write(self.redact(text))

    def flush(self) -> None:
        self.inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def _serve(req: Request, opts: AgentOptions, output: Output, settings: Settings,
                 inp: TextIO) -> int:
    """The payload's turn, then each follow-up message as the next turn; 1 on a failure."""
    async with contextlib.AsyncExitStack() as stack:
        store = open_store(settings=settings) if req.session or req.user else None
        if store is not None:
            stack.push_async_callback(store.aclose)
        inbox = Inbox(output)
        for task in inbox.start(inp, req.ipc_dir):
            stack.callback(task.cancel)
        channel = HostChannel(output, inbox, Ipc(req.ipc_dir, req.chat) if req.ipc_dir else None)
        toolless = isinstance(opts.tools, str) and opts.tools.strip() in ("", "none")
        voice = [] if toolless else [send_voice_tool(channel)]
        agent = build_agent(opts, settings, store=store, memory=req.memory, channels=[channel],
                            extra_tools=voice)
        stack.push_async_callback(agent.aclose)
        text: str | None = req.task
        while text is not None:
            result = await _turn(agent, text, req, output)
            failed = result.status in _ERROR_STATUSES
            output.block(_final(result, failed))
            if failed:
                return 1
            item = inbox.pending()
            if item is None and req.idle_timeout_s > 0:
                item = await inbox.next(req.idle_timeout_s)
            text = item.body if item is not None else None
        inbox.done()
        return 0
    raise AssertionError("unreachable")


async def _turn(agent: Any, task: str, req: Request, output: Output) -> RunResult:
    handle = agent.start(task, session=req.session, user_id=req.user, stream_model=False)
    await _stream_progress(handle, req.session, output)
    result: RunResult = await handle.result()
    await handle.wait_background()  # post-turn memory jobs finish before the store closes
    return result


def _final(result: RunResult, failed: bool) -> dict[str, Any]:
    return {
        "status": "error" if failed else "success",
        "result": None if failed else result.text,
        "session_id": result.session_id,
        "run_id": result.run_id,
        "run_status": result.status,
        "error": result.error,
        "usage": {"requests": result.usage.requests,
                  "input_tokens": result.usage.input_tokens,
                  "output_tokens": result.usage.output_tokens},
    }


async def _stream_progress(handle: RunHandle, session: str | None, output: Output) -> None:
    """One ``running`` block per step whose model text came with tool calls."""
    async for event in handle:
        if not isinstance(event, StepCompleted) or not event.tool_calls:
            continue
        # The step is appended right after its event is emitted, before the run next yields.
        text = handle.state.steps[event.step].text.strip()
        if text:
            output.block({"status": "running", "result": text, "session_id": session,
                          "run_id": handle.run_id, "step": event.step + 1})


def _brief(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return validation_summary(exc, root="payload")
    return str(exc)


def main_stdio(defaults: AgentOptions) -> int:
    return run_stdio(sys.stdin, sys.stdout, sys.stderr, defaults)
