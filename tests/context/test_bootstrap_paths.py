"""Bootstrap files are read every run, whatever the paths it keeps joined."""

from __future__ import annotations

import dataclasses
from pathlib import Path

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
