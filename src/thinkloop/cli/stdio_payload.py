"""What a container host writes on stdin: thinkloop's payload or the Stingyclaw/NanoClaw one.

Both become one :class:`Request`. The NanoClaw shape (``prompt``, ``sessionId``,
``groupFolder``, ``assistantName``, ``secrets`` with ``OPENROUTER_API_KEY`` / ``MODEL_NAME``)
is told apart by its ``prompt`` field; its answers then go between the NANOCLAW markers with a
``newSessionId``, as its hosts expect.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

import orjson
from pydantic import BaseModel, ConfigDict, Field

from thinkloop.workers.blocks import NANOCLAW, THINKLOOP, Markers

# The payload is the first JSON value on stdin; what follows are follow-up lines.
MAX_PAYLOAD_CHARS = 4 * 1024 * 1024
# The seed's own defaults when its secrets name no model.
OPENROUTER_MODEL = "liquid/lfm-2.5"
OLLAMA_MODEL = "llama3.2"
OLLAMA_URL = "http://host.docker.internal:11434/v1"
# Where the seed's container finds its IPC folders (messages/, voice/, input/).
SEED_IPC_DIR = Path("/workspace/ipc")


class StdioPayload(BaseModel):
    """thinkloop's payload."""

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
    ipc_dir: Path | None = None
    # How long the process waits for a follow-up message after an answer (0: exit at once).
    idle_timeout_s: float = Field(0.0, ge=0)


class SeedPayload(BaseModel):
    """The Stingyclaw/NanoClaw container input."""

    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1)
    sessionId: str | None = Field(None, min_length=1, max_length=200)
    group: str | None = Field(None, max_length=200)
    groupFolder: str | None = Field(None, min_length=1, max_length=200)
    chatJid: str | None = Field(None, max_length=200)
    isMain: bool = False
    isScheduledTask: bool = False
    assistantName: str | None = Field(None, min_length=1, max_length=100)
    secrets: dict[str, str] = Field(default_factory=dict)
    ipcDir: Path | None = None


@dataclass(frozen=True)
class Request:
    """One container run, whichever shape it came in."""

    task: str
    session: str | None
    user: str | None
    model: str | None
    tools: str | None
    max_steps: int | None
    approve: str
    memory: bool
    secrets: dict[str, str]
    env: dict[str, str]  # provider variables the seed's secrets imply
    markers: Markers
    seed: bool
    name: str | None
    chat: str | None
    ipc_dir: Path | None
    idle_timeout_s: float


def is_seed(data: Any) -> bool:
    """The seed's shape: a ``prompt`` where thinkloop's payload has a ``task``."""
    return isinstance(data, dict) and "prompt" in data and "task" not in data


def markers_for(data: Any) -> Markers:
    """The markers to answer ``data`` with, even when it is not a valid payload."""
    return NANOCLAW if is_seed(data) else THINKLOOP


def parse(data: Any) -> Request:
    """The request in ``data``; raises pydantic's ``ValidationError`` when it is not one."""
    if is_seed(data):
        return _from_seed(SeedPayload.model_validate(data))
    p = StdioPayload.model_validate(data)
    return Request(p.task, p.session, p.user, p.model, p.tools, p.max_steps, p.approve,
                   p.memory, dict(p.secrets), {}, THINKLOOP, False, None, None, p.ipc_dir,
                   p.idle_timeout_s)


def _from_seed(p: SeedPayload) -> Request:
    secrets = dict(p.secrets)
    model, env = _seed_backend(secrets)
    ipc = p.ipcDir or (SEED_IPC_DIR if SEED_IPC_DIR.is_dir() else None)
    # The seed keeps every conversation: a new one gets an id, returned as newSessionId.
    session = p.sessionId or uuid.uuid4().hex
    return Request(p.prompt, session, p.groupFolder or p.group or None, model, None, None,
                   "deny", False, secrets, env, NANOCLAW, True, p.assistantName, p.chatJid,
                   ipc, 0.0)


def _seed_backend(secrets: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The seed's backend detection: key ``ollama`` means a local Ollama, else OpenRouter."""
    key = secrets.get("OPENROUTER_API_KEY", "")
    name = secrets.get("MODEL_NAME")
    base = secrets.get("OPENROUTER_BASE_URL")
    if key == "ollama":
        return f"ollama:{name or OLLAMA_MODEL}", {"OLLAMA_HOST": base or OLLAMA_URL}
    return f"openrouter:{name or OPENROUTER_MODEL}", {}


def read_payload(inp: TextIO) -> str:
    """Lines from ``inp`` until they hold one whole JSON value (or the input ends): a host may
    write the payload on one line or several, and keep stdin open for follow-ups."""
    lines: list[str] = []
    size = 0
    while True:
        line = inp.readline()
        if not line:
            return "".join(lines)
        lines.append(line)
        size += len(line)
        if size > MAX_PAYLOAD_CHARS:
            return "".join(lines)
        if not line.strip():
            continue
        try:
            orjson.loads("".join(lines))
        except orjson.JSONDecodeError:
            continue
        return "".join(lines)
