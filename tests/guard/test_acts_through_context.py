"""Guards act on a run only through their hook context (``ctx.set_step_budget``,
``ctx.defer``, ``ctx.stop``, ...): no guard assigns to run state or mutates what it holds."""

from __future__ import annotations

import ast
from pathlib import Path

import thinkloop.guard

GUARD = Path(thinkloop.guard.__file__).parent
MUTATORS = {"append", "extend", "insert", "add", "update", "pop", "clear", "remove",
            "discard", "setdefault", "popitem", "sort", "reverse"}


def state_writes(source: str) -> list[int]:
    """Lines that write run state: ``x.state.f = ...``, ``state.f += ...``, an alias of
    ``ctx.state`` assigned to, ``state.pending.append(...)``, ``setattr(state, ...)``."""
    found: list[int] = []
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            found += _writes_in(fn)
    return sorted(set(found))


def _writes_in(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[int]:
    aliases = {"state"}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute) \
                and n.value.attr == "state":
            aliases |= {t.id for t in n.targets if isinstance(t, ast.Name)}

    def is_state(e: ast.expr) -> bool:
        return (isinstance(e, ast.Attribute) and e.attr == "state") or (
            isinstance(e, ast.Name) and e.id in aliases)

    def held(e: ast.expr) -> bool:  # state.x, or state.x.y
        return isinstance(e, ast.Attribute) and (
            is_state(e.value) or (isinstance(e.value, ast.Attribute) and is_state(e.value.value)))

    lines = []
    for n in ast.walk(fn):
        targets = (n.targets if isinstance(n, ast.Assign) else
                   [n.target] if isinstance(n, ast.AugAssign | ast.AnnAssign) else [])
        for t in targets:
            while isinstance(t, ast.Subscript):
                t = t.value
            if held(t):
                lines.append(n.lineno)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in MUTATORS and held(n.func.value):
            lines.append(n.lineno)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" \
                and n.args and is_state(n.args[0]):
            lines.append(n.lineno)
    return lines


def test_no_guard_assigns_to_run_state() -> None:
    writes = {f"{p.relative_to(GUARD)}:{line}" for p in sorted(GUARD.rglob("*.py"))
              for line in state_writes(p.read_text(encoding="utf-8"))}
    assert writes == set()


def test_the_check_sees_each_kind_of_write() -> None:
    source = '''
def a(ctx):
    ctx.state.max_steps = 3
def b(ctx):
    s = ctx.state
    s.lean = True
def c(ctx):
    ctx.state.pending.append(1)
def d(state):
    state.usage += 1
def e(ctx):
    setattr(ctx.state, "lean", True)
def f(ctx):
    ctx.state.counts["x"] = 1
def fine(ctx):
    ctx.set_step_budget(3, lean=True)
    x = ctx.state.max_steps
    ctx.emit("e", max_steps=x)
'''
    assert state_writes(source) == [3, 6, 8, 10, 12, 14]
