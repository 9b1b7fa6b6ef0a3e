"""The package's import is light: heavy dependencies load where they are used (issue 19).

Each check runs in a fresh interpreter, because this test process has imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import thinkloop

HEAVY = ("aiohttp", "numpy", "rich", "typer", "httpx", "openai", "anthropic", "fastapi",
         "yaml")


def loaded_after(statement: str) -> set[str]:
    """Which of HEAVY a fresh interpreter holds after running ``statement``."""
    code = (f"import sys, json; {statement}; "
            f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return set(json.loads(out))


def test_import_thinkloop_loads_no_heavy_dependency() -> None:
    assert loaded_after("import thinkloop") == set()
    code = ("import sys, thinkloop; "
            "print([m for m in ('pydantic', 'opentelemetry', 'asyncio') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "[]"


def test_public_names_load_on_first_use() -> None:
    assert loaded_after("import thinkloop; thinkloop.Usage; thinkloop.ThinkloopError") == set()
    from thinkloop.agent import Agent
    from thinkloop.tools import tool

    assert thinkloop.Agent is Agent
    assert thinkloop.tool is tool
    assert all(getattr(thinkloop, name) is not None for name in thinkloop.__all__)
    assert set(thinkloop.__all__) <= set(dir(thinkloop))
    assert sorted(thinkloop.__all__) == sorted(thinkloop._EXPORTS)  # one list, checked


def test_a_run_loads_only_what_it_uses() -> None:
    # The HTTP client loads with the first request to a provider, rich and typer with the
    # command line; the default guard's injection classifier is plain Python (no numpy).
    run = ("from thinkloop import Agent, ScriptedModel; "
           "assert Agent(ScriptedModel(['hi'])).run_sync('hello').text == 'hi'")
    assert loaded_after(run) == set()


def test_cli_help_does_not_load_the_engine() -> None:
    code = ("import sys; from thinkloop.cli.app import app; "
            "print(sorted(m for m in ('thinkloop.agent', 'pydantic', 'aiohttp', 'numpy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "[]"


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = thinkloop.Nope  # type: ignore[attr-defined]
