"""A host group's folder: its workspace sits where the settings allow one inside a home."""

from pathlib import Path

from thinkloop.workers.confine import Confinement


def test_a_group_made_before_the_workspaces_folder_keeps_its_files(tmp_path: Path) -> None:
    old = tmp_path / "team" / "workspace"
    old.mkdir(parents=True)
    (old / "notes.txt").write_text("kept")
    folder = Confinement(engine="none", data=tmp_path).folder("team")
    assert (folder / "workspaces" / "notes.txt").read_text() == "kept"
    assert not old.exists()
    _, env = Confinement(engine="none", data=tmp_path).command("team")
    assert env["THINKLOOP_TOOLS_WORKSPACE"] == str(folder / "workspaces")


def test_a_new_group_gets_an_empty_workspaces_folder(tmp_path: Path) -> None:
    folder = Confinement(engine="none", data=tmp_path).folder("new")
    assert list((folder / "workspaces").iterdir()) == []
