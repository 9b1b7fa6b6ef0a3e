"""Agent definitions: the agents file is read again when it changes (it is kept between
changes), the store's definitions go over it, and ``exists`` answers without bootstrap files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from thinkloop.core.errors import ConfigError
from thinkloop.server.agents import Definitions
from thinkloop.store.gateway import AgentDefinition


class FakeStore:
    """The two reads Definitions makes, counted."""

    def __init__(self) -> None:
        self.defs: list[AgentDefinition] = []
        self.files: dict[str, dict[str, str]] = {}
        self.file_reads = 0

    async def agent_definitions(self) -> list[AgentDefinition]:
        return list(self.defs)

    async def agent_files(self, agent: str) -> dict[str, str]:
        self.file_reads += 1
        return self.files.get(agent, {})


def definitions(path: Path) -> tuple[Definitions, FakeStore]:
    store = FakeStore()
    return Definitions(store, path), store  # type: ignore[arg-type]


def write(path: Path, text: str, age_s: float = 0.0) -> None:
    path.write_text(text)
    if age_s:
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(age_s * 1e9)))


async def test_an_edit_of_the_agents_file_is_seen_by_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    write(path, "agents:\n  a:\n    model: openai:one\n")
    defs, _ = definitions(path)
    assert str((await defs.all())["a"].model) == "openai:one"
    # Rewritten at once, same size: still read again (the file was not settled).
    write(path, "agents:\n  a:\n    model: openai:two\n")
    assert str((await defs.all())["a"].model) == "openai:two"
    write(path, "agents:\n  b:\n    model: openai:three\n", age_s=5)
    assert sorted(await defs.all()) == ["b"]


async def test_a_settled_file_is_parsed_once(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import thinkloop.server.agents as agents

    path = tmp_path / "agents.yaml"
    write(path, "agents:\n  a:\n    model: openai:one\n", age_s=5)
    loads: list[Path] = []
    real = agents.load_agents_file

    def counted(p: Path) -> Any:
        loads.append(p)
        return real(p)

    monkeypatch.setattr(agents, "load_agents_file", counted)
    defs, _ = definitions(path)
    for _ in range(3):
        assert "a" in await defs.all()
    assert loads == [path]


async def test_exists_reads_no_bootstrap_files_and_checks_teams(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    write(path, "agents:\n  a:\n    model: openai:one\n  lead:\n    team: [ghost]\n")
    defs, store = definitions(path)
    store.defs = [AgentDefinition("stored", '{"model": "openai:x"}', 0.0)]
    assert await defs.exists("a") and await defs.exists("stored")
    assert not await defs.exists("nobody")
    assert store.file_reads == 0
    with pytest.raises(ConfigError, match="ghost"):
        await defs.exists("lead")
    # A missing file is one clear error, as before.
    path.unlink()
    with pytest.raises(ConfigError, match="cannot read agents file"):
        await defs.exists("a")


async def test_the_router_knows_an_agent_exists_for_its_ttl_and_forgets_it_when_edited(
        tmp_path: Path) -> None:
    from thinkloop.server.agents import AgentRouter

    write(tmp_path / "agents.yaml", "agents:\n  helper:\n    model: openai:x\n", age_s=5)
    defs, _ = definitions(tmp_path / "agents.yaml")
    asked: list[str] = []
    real = defs.exists

    async def counted(name: str) -> bool:
        asked.append(name)
        return await real(name)

    defs.exists = counted  # type: ignore[method-assign]
    now = [0.0]
    build: Any = lambda name, spec: None  # noqa: E731 (never called: nothing is built)
    router = AgentRouter(defs, build, ttl_s=30.0, clock=lambda: now[0])
    assert await router.exists("helper") and await router.exists("helper")
    assert not await router.exists("nobody") and not await router.exists("nobody")
    assert asked == ["helper", "nobody", "nobody"]  # a no is asked again, a yes kept
    router.invalidate("helper")
    assert await router.exists("helper")
    now[0] = 31.0
    assert await router.exists("helper")
    assert asked == ["helper", "nobody", "nobody", "helper", "helper"]
