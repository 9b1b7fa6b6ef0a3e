"""What the local model keeps between calls and between processes, and what it measures.

llama-cpp-python already reuses the KV cache of the longest common token prefix with the
previous call on the same ``Llama`` (weights load once per process: ``models.local_load._load``),
so the steps of a run, and runs that share a system prompt, evaluate only their new tokens.
Across processes the KV cache of the first call is saved with llama.cpp's own session file
(tokens and KV cells only: about 23 KB a token for SmolLM2-135M) under
``THINKLOOP_HOME/cache/llama``, and loaded with the weights: a second ``thinkloop run``
starts from the prompt prefix its first run evaluated. The library's own ``LlamaRAMCache``
and ``LlamaDiskCache`` were not used: they save a copy of the whole logits buffer
(n_batch x vocabulary floats, ~100 MB for SmolLM2) after every call.

The xllamacpp runtime (``models.local_wheel``) keeps its slot the same way, in llama.cpp's
sequence file (a ``.slot`` beside the ``.kv``): its embedded server saves and restores a slot
only through its HTTP routes (``/slots/0?action=save|restore``), which it serves on loopback
behind the API key only this process knows.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("thinkloop.models")

SLOT_SUFFIX = ".slot"
# A save or restore moves ~23 KB a token through the page cache: milliseconds, unless the
# disk stalls; a stalled one only costs the speed-up.
SLOT_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class CallStats:
    """One local call: prompt tokens evaluated vs reused from the KV cache, and timings."""

    prompt_tokens: int
    reused_tokens: int
    completion_tokens: int
    first_token_s: float
    total_s: float

    @property
    def processed_tokens(self) -> int:
        return self.prompt_tokens - self.reused_tokens


def common_prefix(a: Any, b: Any) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def state_file(cache_dir: Path, model_path: Path, n_ctx: int, suffix: str = ".kv") -> Path:
    """The KV cache file of a model file and window (``suffix``: the runtime's format)."""
    st = model_path.stat()
    key = f"{model_path.resolve()}:{st.st_size}:{int(st.st_mtime)}:{n_ctx}"
    return cache_dir / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}{suffix}"


def load_prefix(llm: Any, path: Path) -> int:
    """Restore a saved KV cache into a fresh ``Llama``; returns the tokens restored (0: none)."""
    import llama_cpp

    if not path.is_file():
        return 0
    n_ctx = int(llm.n_ctx())
    tokens = (llama_cpp.llama_token * n_ctx)()
    count = ctypes.c_size_t(0)
    try:
        ok = llama_cpp.llama_state_load_file(llm._ctx.ctx, str(path).encode(), tokens, n_ctx,
                                             ctypes.byref(count))
    except Exception as exc:  # a damaged or foreign file is only a missed speed-up
        log.debug("cannot load %s: %s", path, exc)
        return 0
    n = int(count.value)
    if not ok or n <= 0:
        return 0
    llm.input_ids[:n] = tokens[:n]
    llm.n_tokens = n
    return n


def save_prefix(llm: Any, path: Path) -> None:
    """Save the current KV cache and its tokens (atomically: a reader never sees half)."""
    import llama_cpp

    n = int(llm.n_tokens)
    if n <= 0:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tokens = (llama_cpp.llama_token * n)(*llm.input_ids[:n].tolist())
        if llama_cpp.llama_state_save_file(llm._ctx.ctx, str(tmp).encode(), tokens, n):
            os.replace(tmp, path)
        else:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        log.debug("cannot save %s: %s", path, exc)


def slot_action(address: str, api_key: str, action: str, filename: str) -> bool:
    """Ask the embedded server (``http://127.0.0.1:port``) to save or restore its slot from
    ``filename`` in its ``slot_save_path``; whether it did (a missing, damaged or foreign
    file is only a missed speed-up)."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(address)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port,
                                      timeout=SLOT_TIMEOUT_S)
    try:
        conn.request("POST", f"/slots/0?action={action}",
                     body=orjson.dumps({"filename": filename}),
                     headers={"Authorization": f"Bearer {api_key}",
                              "Content-Type": "application/json"})
        reply = conn.getresponse()
        body = reply.read()
    except (OSError, http.client.HTTPException) as exc:
        log.debug("slot %s %s: %s", action, filename, exc)
        return False
    finally:
        conn.close()
    if reply.status != 200:
        log.debug("slot %s %s: HTTP %s %s", action, filename, reply.status, body[:200])
    return reply.status == 200


def save_slot(address: str, api_key: str, path: Path) -> None:
    """Save the slot to ``path`` (atomically: a reader never sees half; a process saving at
    the same time writes its own temporary file)."""
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
    if slot_action(address, api_key, "save", tmp.name):
        try:
            os.replace(tmp, path)
        except OSError as exc:
            log.debug("cannot keep %s: %s", path, exc)
    tmp.unlink(missing_ok=True)
