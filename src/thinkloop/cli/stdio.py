"""``thinkloop run --stdio``: the container mode (Stingyclaw's runner protocol).

A host starts the process, writes one JSON payload on stdin and reads stdout. Every message for
the host is a JSON object between two marker lines, so anything else on stdout (a library that
prints) can never be mistaken for one::

    ---THINKLOOP_OUTPUT_START---
    {"status": "success", "result": "...", "session_id": "s1", "run_id": "...", ...}
    ---THINKLOOP_OUTPUT_END---

The text a model writes alongside its tool calls is streamed as blocks with ``"status":
"running"``; the last block is the result. A run that fails (or times out, or is cancelled), a
payload that is not valid, or a model that cannot be reached writes ``"status": "error"`` and
the process exits 1, which a host takes as "retry later". Secrets in the payload become
environment variables for the model provider and the tools, and their values are cut out of
everything written to stdout and stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any, Literal, TextIO

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from thinkloop.api import RunHandle, RunResult, open_store, validation_summary
from thinkloop.cli.build import AgentOptions, build_agent
from thinkloop.core.errors import ThinkloopError
from thinkloop.core.events import StepCompleted
from thinkloop.core.settings import Settings, export_environment, load_settings

OUTPUT_START = "---THINKLOOP_OUTPUT_START---"
OUTPUT_END = "---THINKLOOP_OUTPUT_END---"
# Outcomes a host should treat as failures (and may retry); the others carry an answer.
_ERROR_STATUSES = frozenset({"failed", "timeout", "cancelled"})


class StdioPayload(BaseModel):
    """What the host writes on stdin."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1)
    session: str | None = Field(None, min_length=1, max_length=200)
    user: str | None = Field(None, min_length=1, max_length=200)
    model: str | None = None
    tools: str | None = None
    max_steps: int | None = Field(None, ge=1)
    # No terminal here: a tool that needs approval is denied unless the host says "auto".
    approve: Literal["auto", "deny"] = "deny"
    # The session's messages are always kept; memory layers and post-turn jobs (summaries,
    # episodes) only when asked: a container exits right after its answer.
    memory: bool = False
    secrets: dict[str, str] = Field(default_factory=dict)


class Redactor:
    """Cuts secret values out of text before it leaves the process."""

    def __init__(self, secrets: dict[str, str]) -> None:
        # Longest first, so a secret that contains another is cut whole.
        self.values = sorted((v for v in secrets.values() if len(v) >= 4), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, "[redacted]")
        return text


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


class Output:
    """Writes marker blocks to ``out``; each block is one JSON object on one line."""

    def __init__(self, out: TextIO, redact: Redactor) -> None:
        self.out = out
        self.redact = redact

    def block(self, data: dict[str, Any]) -> None:
        text = self.redact(orjson.dumps(data, default=str).decode())
        self.out.write(f"{OUTPUT_START}\n{text}\n{OUTPUT_END}\n")
        self.out.flush()


def run_stdio(inp: TextIO, out: TextIO, err: TextIO, defaults: AgentOptions) -> int:
    """Read the payload, run it, write the blocks; the exit code (0 or 1)."""
    raw = inp.read()
    try:
        payload = StdioPayload.model_validate(orjson.loads(raw or b"null"))
    except (orjson.JSONDecodeError, ValidationError) as exc:
        Output(out, Redactor({})).block(
            {"status": "error", "result": None, "error": f"invalid payload: {_brief(exc)}"})
        return 1
    output = Output(out, Redactor(payload.secrets))
    # The secrets are environment variables for the providers and the tools' commands; this
    # process is the container's, so they live exactly as long as the run.
    export_environment(payload.secrets)
    settings = load_settings()
    # The sandbox passes only allow-listed variables to commands: the payload's secrets are
    # meant for the tools, so they join the list.
    tools = settings.tools.model_copy(
        update={"sandbox_env": (*settings.tools.sandbox_env, *payload.secrets)})
    settings = settings.model_copy(update={"tools": tools})
    opts = defaults.model_copy(update={
        "model": payload.model or defaults.model, "tools": payload.tools or defaults.tools,
        "max_steps": payload.max_steps or defaults.max_steps, "approve": payload.approve})
    saved, sys.stderr = sys.stderr, RedactingStream(err, output.redact)
    try:
        result = asyncio.run(_run(payload, opts, output, settings))
    except (ThinkloopError, OSError) as exc:
        output.block({"status": "error", "result": None, "session_id": payload.session,
                      "error": f"{type(exc).__name__}: {exc}"})
        return 1
    finally:
        sys.stderr = saved
    failed = result.status in _ERROR_STATUSES
    output.block({
        "status": "error" if failed else "success",
        "result": None if failed else result.text,
        "session_id": result.session_id,
        "run_id": result.run_id,
        "run_status": result.status,
        "error": result.error,
        "usage": {"requests": result.usage.requests,
                  "input_tokens": result.usage.input_tokens,
                  "output_tokens": result.usage.output_tokens},
    })
    return 1 if failed else 0


async def _run(payload: StdioPayload, opts: AgentOptions, output: Output,
               settings: Settings) -> RunResult:
    async with contextlib.AsyncExitStack() as stack:
        needs_store = payload.session or payload.user
        store = open_store(settings=settings) if needs_store else None
        if store is not None:
            stack.push_async_callback(store.aclose)
        agent = build_agent(opts, settings, store=store, memory=payload.memory)
        stack.push_async_callback(agent.aclose)
        handle = agent.start(payload.task, session=payload.session, user_id=payload.user,
                             stream_model=False)
        await _stream_progress(handle, payload.session, output)
        result = await handle.result()
        await handle.wait_background()  # post-turn memory jobs finish before the store closes
        return result
    raise AssertionError("unreachable")


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
