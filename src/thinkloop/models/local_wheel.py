"""``local`` on the ``xllamacpp`` wheel: llama.cpp prebuilt, so installing needs no compiler.

Same decisions as :class:`~thinkloop.models.local.LocalModel` (the reply grammar compiled from
the tools' schemas, the token caps, the retry without tools), on a different runtime: xllamacpp
embeds llama.cpp's own server in-process and is called with OpenAI-shaped requests (no HTTP
on the way: ``handle_chat_completions`` calls the server's handler directly). Its slot keeps
the KV cache of the longest common token prefix with the previous request, so the steps of
a run evaluate only their new tokens (``timings.cache_n`` says how many were reused). The
slot is saved to a file after a process's first call and restored when the server starts
(``llama_state``), so the next process starts from the prefix this one evaluated.

The embedded server also listens on an ephemeral loopback port; it is given a random API key
no one is told, so nothing else on the machine can use it. (Chosen over llama-cpp-py-sync,
whose wheels need glibc 2.38, i.e. not Debian 12 or Ubuntu 22.04.)
"""

from __future__ import annotations

import atexit
import math
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinkloop.core.errors import ConfigError, ContextOverflowError, ModelError
from thinkloop.core.model import ReplyConstraint
from thinkloop.models.llama_state import (
    SLOT_SUFFIX,
    CallStats,
    save_slot,
    slot_action,
    state_file,
)
from thinkloop.models.local import FREE_MAX_TOKENS, GRAMMAR_CACHE, LocalModel
from thinkloop.models.local_fit import fit_turns

# llama-cpp-python's sampling defaults (the server's own temperature is 0.8): the same
# model then behaves the same on either runtime.
DEFAULT_TEMPERATURE = 0.2
# Characters per token assumed when fitting a request to the window before the server has
# counted one (English is ~4 for SmolLM2's tokenizer; 3 errs on the side of fitting).
CHARS_PER_TOKEN = 3.0


@dataclass
class _Served:
    server: Any
    api_key: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Measured characters per token of the last request that overflowed (see _fit_and_call).
    chars_per_token: float = CHARS_PER_TOKEN
    # The slot's KV cache file (across processes) and whether this process has saved it yet.
    state_path: Path | None = None
    saved: bool = False

    def keep(self) -> None:
        """Save the slot after this process's first call, as ``local._Loaded`` does: the
        next process starts from the prefix (system prompt, tools, task) this one evaluated."""
        if self.state_path is not None and not self.saved:
            self.saved = True
            save_slot(self.server.listening_address, self.api_key, self.state_path)


_SERVED: dict[tuple[str, int, int], _Served] = {}
_SERVE_LOCK = threading.Lock()


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("xllamacpp") is not None


def _slot_file(cache_dir: Path | None, path: Path, n_ctx: int) -> Path | None:
    """Where the slot's KV cache is kept (None: not kept, or the folder cannot be made)."""
    if cache_dir is None:
        return None
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        return state_file(cache_dir, path, n_ctx, SLOT_SUFFIX)
    except OSError:
        return None


def _start(path: Path, n_ctx: int, n_threads: int, cache_dir: Path | None = None) -> _Served:
    """The embedded server of a model file (the first caller's ``cache_dir`` holds for all
    the callers that share it, as their weights do)."""
    key = (str(path), n_ctx, n_threads)
    with _SERVE_LOCK:
        if key not in _SERVED:
            try:
                import xllamacpp
            except ImportError:
                raise ConfigError(
                    "model 'local' needs xllamacpp: pip install 'thinkloop[local]'"
                ) from None
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_ctx = n_ctx
            params.n_parallel = 1  # one slot: its KV cache is the prefix the next call reuses
            params.cpuparams.n_threads = n_threads
            params.cpuparams_batch.n_threads = n_threads
            params.warmup = False
            params.verbosity = -1
            params.cache_ram_mib = 0  # no copies of old prompts' state in RAM
            api_key = secrets.token_urlsafe(32)
            params.api_keys = [api_key]
            state = _slot_file(cache_dir, path, n_ctx)
            if state is not None:
                params.slot_save_path = f"{state.parent}{os.sep}"  # llama.cpp appends names
            try:
                server = xllamacpp.Server(params)
            except RuntimeError as exc:
                raise ModelError(f"local model {path} failed to load: {exc}") from exc
            if not _SERVED:
                atexit.register(stop_all)
            if state is not None and state.is_file():
                slot_action(server.listening_address, api_key, "restore", state.name)
            _SERVED[key] = _Served(server, api_key, state_path=state)
        return _SERVED[key]


def stop_all() -> None:
    """Stop every embedded server (they start again on next use)."""
    with _SERVE_LOCK:
        _SERVED.clear()


def _failure(reply: dict[str, Any]) -> ModelError:
    inner = reply.get("error")
    error: dict[str, Any] = inner if isinstance(inner, dict) else reply
    message = str(error.get("message") or error)
    if error.get("type") == "exceed_context_size_error":
        err = ContextOverflowError(400, message)
        err.args = (f"the request does not fit the local model's context window: {message}",)
        return err
    return ModelError(f"local model failed: {message}")


class WheelModel(LocalModel):
    """The ``local`` provider on xllamacpp (see the module docstring)."""

    def _grammar(self, schema: bytes) -> Any:
        return self._cached(schema, lambda: wheel_gbnf(schema.decode()))

    def _constrained(self, constraint: ReplyConstraint) -> Any:
        key = f"{constraint.kind}:{constraint.text}".encode()
        if constraint.kind == "json_schema":
            return self._cached(key, lambda: wheel_gbnf(constraint.text))
        return constraint.text

    def _cached(self, key: bytes, make: Callable[[], str]) -> str:
        if key not in self._grammars:
            if len(self._grammars) >= GRAMMAR_CACHE:
                del self._grammars[next(iter(self._grammars))]
            self._grammars[key] = make()
        return str(self._grammars[key])

    def _served(self) -> _Served:
        from thinkloop.models.local import default_threads

        return _start(self.path, self.n_ctx, self.n_threads or default_threads(),
                      self.cache_dir)

    def is_loaded(self) -> bool:
        from thinkloop.models.local import default_threads

        return (str(self.path), self.n_ctx, self.n_threads or default_threads()) in _SERVED

    def load(self) -> None:
        self._served()

    def _request(self, kwargs: dict[str, Any], served: _Served) -> tuple[dict[str, Any], int]:
        """The request fitted to the window, and how many characters that cut."""
        request = dict(kwargs)
        request.setdefault("temperature", DEFAULT_TEMPERATURE)
        request["max_tokens"] = kwargs.get("max_tokens") or FREE_MAX_TOKENS
        size = _estimate(served.chars_per_token)
        request["messages"], cut = fit_turns(size, kwargs["messages"], self.n_ctx,
                                             request["max_tokens"])
        return request, cut

    def _call(self, kwargs: dict[str, Any],
              send: Callable[[dict[str, Any]], Any]) -> tuple[Any, int]:
        """Fit, send; when the server counts more tokens than estimated, fit again once with
        the measured characters per token. The reply, and the characters cut to fit."""
        served = self._served()
        request, cut = self._request(kwargs, served)
        reply = send(request)
        if isinstance(reply, dict) and _overflowed(reply) and len(request["messages"]) > 1:
            counted = int(reply["error"].get("n_prompt_tokens") or 0)
            chars = sum(len(m["content"]) for m in request["messages"])
            if counted > 0:
                served.chars_per_token = max(1.0, chars / counted * 0.95)
                request, cut = self._request(kwargs, served)
                reply = send(request)
        return reply, cut

    def _run(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], int]:
        served = self._served()
        with served.lock:
            started = time.perf_counter()
            reply, cut = self._call(kwargs, served.server.handle_chat_completions)
            if "choices" not in reply:
                raise _failure(reply)
            self._note(reply.get("timings") or {}, started, None)
            served.keep()
            return reply, cut

    def _note(self, timings: dict[str, Any], started: float, first: float | None) -> None:
        now = time.perf_counter()
        reused = int(timings.get("cache_n") or 0)
        prompt = reused + int(timings.get("prompt_n") or 0)
        self.last_stats = CallStats(prompt, reused, int(timings.get("predicted_n") or 0),
                                    (first or now) - started, now - started)

    def _stream_thread(self, kwargs: dict[str, Any], emit: Any, stop: threading.Event) -> None:
        try:
            served = self._served()
        except Exception as exc:  # crossing the thread: re-raised in the consumer
            emit(exc)
            return
        with served.lock:
            started = time.perf_counter()
            state: dict[str, Any] = {"first": None, "timings": {}, "error": None}

            def on_chunk(chunk: dict[str, Any]) -> bool:
                if "choices" not in chunk:
                    state["error"] = chunk.get("error", chunk)
                    return True
                state["timings"] = chunk.get("timings") or state["timings"]
                if chunk["choices"]:
                    if (chunk["choices"][0].get("delta") or {}).get("content"):
                        state["first"] = state["first"] or time.perf_counter()
                    emit(chunk)
                return stop.is_set()

            def send(request: dict[str, Any]) -> Any:
                state["error"] = None
                served.server.handle_chat_completions({**request, "stream": True}, on_chunk)
                return {"error": state["error"]} if state["error"] else None

            try:
                reply, cut = self._call(kwargs, send)
            except Exception as exc:
                emit(exc)
                return
            if reply is not None:
                emit(_failure(reply))
                return
            timings = state["timings"]
            self._note(timings, started, state["first"])
            served.keep()
            emit(("end", int(timings.get("cache_n") or 0) + int(timings.get("prompt_n") or 0)
                  + int(timings.get("predicted_n") or 0), cut))


def _overflowed(reply: dict[str, Any]) -> bool:
    error = reply.get("error")
    return isinstance(error, dict) and error.get("type") == "exceed_context_size_error"


def _estimate(chars_per_token: float) -> Callable[[str], int]:
    return lambda text: math.ceil(len(text) / chars_per_token) + 8


def wheel_gbnf(schema: str) -> str:
    """GBNF for a JSON schema by llama.cpp's own converter (its strings are strict JSON)."""
    import xllamacpp

    return str(xllamacpp.json_schema_to_grammar(schema))
