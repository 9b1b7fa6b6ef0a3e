"""Bootstrap files: an edit shows on the next run, whatever the paths and texts it keeps."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from thinkloop.context.bootstrap import Bootstrap


def test_an_edit_on_disk_is_read_by_the_next_run(tmp_path: Path) -> None:
    boot = Bootstrap(tmp_path)
    assert "Name: helper" in boot.load("helper", "ana").identity
    (tmp_path / "agents" / "helper" / "IDENTITY.md").write_text("# IDENTITY.md\n\n- edited\n")
    (tmp_path / "MISSION.md").write_text("the mission")
    files = boot.load("helper", "ana")
    assert files.identity == "# IDENTITY.md\n\n- edited\n"
    assert files.missions == ("the mission",)


def test_a_copy_with_another_root_reads_its_own_root(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    boot = Bootstrap(first)
    boot.load("helper", None)
    (second / "agents" / "helper").mkdir(parents=True)
    (second / "agents" / "helper" / "SOUL.md").write_text("second soul")
    other = dataclasses.replace(boot, root=second)
    assert other.load("helper", None).soul == "second soul"
    assert boot.load("helper", None).soul != "second soul"
    assert (second / "agents" / "helper" / "IDENTITY.md").is_file()  # seeded there


def _age(path: Path, seconds: float) -> None:
    """Make ``path`` look last changed ``seconds`` ago."""
    import os
    import time

    then = time.time() - seconds
    os.utime(path, (then, then))


def test_an_unchanged_file_is_read_once_and_an_edit_again(tmp_path: Path,
                                                          monkeypatch: Any) -> None:
    from thinkloop.context import bootstrap

    boot = Bootstrap(tmp_path)
    boot.load("helper", "ana")  # seeds the files
    for path in tmp_path.rglob("*.md"):
        _age(path, 60)
    reads: list[str] = []
    real = bootstrap._read

    def counted(path: Path) -> str:
        reads.append(path.name)
        return real(path)

    monkeypatch.setattr(bootstrap, "_read", counted)
    boot.load("helper", "ana")
    first = sorted(reads)
    assert "IDENTITY.md" in first and "USER.md" in first
    reads.clear()
    assert boot.load("helper", "ana").identity.startswith("# IDENTITY.md")
    assert reads == []  # nothing changed: nothing read again

    identity = tmp_path / "agents" / "helper" / "IDENTITY.md"
    identity.write_text("# IDENTITY.md\n\n- edited\n")
    _age(identity, 30)
    assert boot.load("helper", "ana").identity == "# IDENTITY.md\n\n- edited\n"
    assert reads == ["IDENTITY.md"]


def test_an_edit_within_the_same_clock_tick_still_shows(tmp_path: Path) -> None:
    """A file read within a second of its change is not kept: a second write of the same
    size with the same mtime (one tick of a coarse clock) is still seen."""
    import os

    boot = Bootstrap(tmp_path)
    boot.load("helper", None)
    soul = tmp_path / "agents" / "helper" / "SOUL.md"
    soul.write_text("first")
    stamp = soul.stat().st_mtime_ns
    assert boot.load("helper", None).soul == "first"
    soul.write_text("secnd")  # the same size
    os.utime(soul, ns=(stamp, stamp))  # and the same mtime
    assert boot.load("helper", None).soul == "secnd"
