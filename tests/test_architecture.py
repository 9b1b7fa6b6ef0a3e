"""The import graph between thinkloop's packages: no cycles, lower layers never import
higher ones (the layers of /work/shared/design.md, as the code has them), and the shells use
only the library's public face and the one recipe.

Every import counts, at the top of a module, inside a function or under ``if TYPE_CHECKING:``
(a type a module names is a dependency of its design even if the import never runs), with no
exemption: a lower part that starts a whole agent (a sub-agent tool, the memory flush,
judgement) gets ``spawn`` from its run (``thinkloop.core.spec.Spawn``) instead of importing it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import thinkloop

ROOT = Path(thinkloop.__file__).parent

# Lowest first. A unit is a top-level module or package of thinkloop.
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(layer.split()) for layer in (
    "text spotlight lifetime tuning _lazy offload arithmetic wakeups handover",
    "core",
    "types errors events plugins settings",
    "models store protocols sandbox runs",
    "context",
    "tools",
    "hooks side_calls",
    "guard",
    "memory judgement",
    "loop",
    "tracing directspans checkpoints runlog runbook aborts",
    "session",
    "agent",
    "subagents build api",
    "server cli testing tui workers channels __main__",
))
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
SHELLS = frozenset(LAYERS[-1] - {"testing"})
# What a shell may import of the library besides other shells: the top-level package, the
# vocabulary (thinkloop.core, and its old paths kept for one release), the one recipe
# (thinkloop.build) and the shells' face onto the rest (thinkloop.api).
PUBLIC_FACE = ("thinkloop", "thinkloop.core", "thinkloop.errors", "thinkloop.events",
               "thinkloop.settings", "thinkloop.types", "thinkloop.build", "thinkloop.api")


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        return [".".join([*base, node.module] if node.module else base)]
    if node.module == "thinkloop":  # from thinkloop import Agent: the unit that defines it
        return [_PUBLIC.get(a.name, f"thinkloop.{a.name}") for a in node.names]
    return [node.module or ""]


def _public_names() -> dict[str, str]:
    """What ``thinkloop/__init__.py`` re-exports, by the module it takes each name from (its
    imports sit under ``if TYPE_CHECKING:``; the names load on first use)."""
    tree = ast.parse((ROOT / "__init__.py").read_text(encoding="utf-8"))
    return {a.asname or a.name: node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            and node.module.startswith("thinkloop") for a in node.names}


_PUBLIC = _public_names()


def import_edges() -> dict[tuple[str, str], list[str]]:
    """(importer unit, imported unit) -> where, for every counted import between units."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        module = ".".join(rel.parts)
        package = module.removesuffix(".__init__") if path.name == "__init__.py" else \
            module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, package):
                src, dst = _unit(module), _unit(target)
                if target.startswith("thinkloop") and "__init__" not in (src, dst) \
                        and src != dst:
                    edges[(src, dst)].append(f"{rel}.py:{node.lineno}")
    return edges


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            component.append(v)
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_unit_has_a_layer() -> None:
    units = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.stem != "__init__"}
    assert units - set(RANK) == set()


def test_no_import_cycles_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst in import_edges():
        graph[src].add(dst)
    assert _cycles(graph) == []


def test_lower_layers_never_import_higher_ones() -> None:
    upward = {f"{src} -> {dst}": where for (src, dst), where in import_edges().items()
              if RANK[dst] > RANK[src]}
    assert upward == {}


def test_the_checker_sees_lazy_imports_and_cycles() -> None:
    tree = ast.parse("def f():\n    from thinkloop.agent import Agent\n")
    node = tree.body[0].body[0]  # type: ignore[attr-defined]
    assert _targets(node, "thinkloop.memory") == ["thinkloop.agent"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _public(module: str) -> bool:
    return any(module == face or (face == "thinkloop.core" and module.startswith(face + "."))
               for face in PUBLIC_FACE)


def shell_reaches() -> dict[str, str]:
    """``module:line`` -> the module a shell imports that is neither a shell nor public."""
    found: dict[str, str] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        if len(rel.parts) < 2 or rel.parts[1] not in SHELLS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            for module in modules:
                if module.startswith("thinkloop") and _unit(module) not in SHELLS \
                        and not _public(module):
                    found[f"{rel}.py:{node.lineno}"] = module
    return found


def test_shells_import_only_the_public_face_and_the_recipe() -> None:
    assert shell_reaches() == {}


def test_the_shell_face_names_what_it_exports() -> None:
    import thinkloop.api as api

    assert sorted(api.__all__) == sorted(api._EXPORTS)
    for name in api.__all__:
        assert getattr(api, name) is not None, name


def test_the_shell_check_tells_the_face_from_the_insides() -> None:
    assert not _public("thinkloop.store.open") and not _public("thinkloop.agent")
    assert _public("thinkloop.core.settings") and _public("thinkloop.api")
    assert not _public("thinkloop.corefoo")
