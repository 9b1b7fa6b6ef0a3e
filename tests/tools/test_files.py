from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.tools.helpers import call

from thinkloop.tools.builtin.files import file_tools
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.workspace import (
    PathEscapeError,
    Workspace,
    atomic_write,
    confine,
    sanitize_user_id,
)


@pytest.fixture
def tools(workspace: Workspace, settings: ToolSettings):  # type: ignore[no-untyped-def]
    return file_tools(workspace, settings)


def test_workspace_per_user_created_on_first_use(workspace: Workspace) -> None:
    assert not workspace.base.exists()
    root = workspace.root("alice")
    assert root == (workspace.base / "alice").resolve() and root.is_dir()
    assert workspace.root(None).name == "default"


@pytest.mark.parametrize(
    ("user", "expected_prefix"),
    [("alice", "alice"), ("../../etc", "etc-"), ("a/b", "a_b-"), ("", "default"), ("..", "user-")],
)
def test_sanitize_user_id(user: str, expected_prefix: str) -> None:
    name = sanitize_user_id(user)
    assert name.startswith(expected_prefix)
    assert "/" not in name and ".." not in name
    assert sanitize_user_id("a/b") != sanitize_user_id("a_b")


TRAVERSALS = [
    "../secret.txt",
    "../../etc/passwd",
    "sub/../../secret.txt",
    "sub/../..",
    "/etc/passwd",
    "\\etc\\passwd",
    "~/secret.txt",
    "..\\secret.txt",
    "C:\\Windows\\win.ini",
    "a\x00b",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_confine_refuses_traversal(tmp_path: Path, path: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(PathEscapeError):
        confine(root.resolve(), path)


def test_confine_refuses_symlink_escapes(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    root = (tmp_path / "root").resolve()
    root.mkdir()
    (root / "link_dir").symlink_to(outside)
    (root / "link_file").symlink_to(outside / "secret.txt")
    (root / "inner.txt").write_text("ok")
    (root / "good_link").symlink_to(root / "inner.txt")
    for p in ("link_dir/secret.txt", "link_file", "link_dir"):
        with pytest.raises(PathEscapeError, match="outside the workspace"):
            confine(root, p)
    # No link is followed, not even one that stays inside: nothing to race between check and use.
    with pytest.raises(PathEscapeError, match="symbolic link 'good_link'"):
        confine(root, "good_link")
    assert confine(root, "./new/dir/file.txt") == root / "new/dir/file.txt"


async def test_tools_refuse_escapes_and_leave_outside_untouched(
    tools, workspace: Workspace, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    root = workspace.root("alice")
    (root / "esc").symlink_to(tmp_path)
    for name, args in [
        ("read_file", {"path": "../../secret.txt"}),
        ("read_file", {"path": "esc/secret.txt"}),
        ("write_file", {"path": "esc/secret.txt", "content": "pwned"}),
        ("write_file", {"path": str(secret), "content": "pwned"}),
        ("edit_file", {"path": "esc/secret.txt", "old_string": "top", "new_string": "x"}),
        ("list_dir", {"path": "esc"}),
        ("glob", {"pattern": "../*"}),
        ("grep", {"pattern": "secret", "path": "esc"}),
    ]:
        result = await call(tools, name, **args)
        assert result.is_error, (name, args)
        assert "workspace" in result.content or "not allowed" in result.content
    assert secret.read_text() == "top secret"
    # glob and grep over the whole workspace must not follow the escaping symlink either.
    assert "secret" not in (await call(tools, "glob", pattern="**/*")).content
    assert (await call(tools, "grep", pattern="top secret")).content == "no matches"


async def test_write_read_edit_roundtrip(tools, workspace: Workspace) -> None:
    r = await call(tools, "write_file", path="notes/a.txt", content="one\ntwo\ntwo\nthree\n")
    assert r.content == "wrote 18 bytes to notes/a.txt" and not r.is_error
    assert (workspace.root("alice") / "notes/a.txt").read_text() == "one\ntwo\ntwo\nthree\n"
    assert (await call(tools, "read_file", path="notes/a.txt")).content == "one\ntwo\ntwo\nthree\n"
    part = await call(tools, "read_file", path="notes/a.txt", start_line=2, max_lines=1)
    assert part.content == "two\n\n[showing lines 2-2 of 4]"

    many = await call(tools, "edit_file", path="notes/a.txt", old_string="two", new_string="2")
    assert many.is_error and "occurs 2 times" in many.content
    none = await call(tools, "edit_file", path="notes/a.txt", old_string="four", new_string="4")
    assert none.is_error and "not found" in none.content
    assert (workspace.root("alice") / "notes/a.txt").read_text() == "one\ntwo\ntwo\nthree\n"
    ok = await call(tools, "edit_file", path="notes/a.txt", old_string="two\nthree",
                    new_string="3")
    assert ok.content == "edited notes/a.txt: replaced 1 occurrence"
    assert (workspace.root("alice") / "notes/a.txt").read_text() == "one\ntwo\n3\n"
    # Users do not see each other's files.
    other = await call(tools, "read_file", user="bob", path="notes/a.txt")
    assert other.is_error and "no such file" in other.content


async def test_list_glob_grep(tools, workspace: Workspace) -> None:
    root = workspace.root("alice")
    (root / "src/pkg").mkdir(parents=True)
    (root / "src/pkg/mod.py").write_text("def hello():\n    return 'hi'\n")
    (root / "src/readme.md").write_text("hello world\n")
    (root / "blob.bin").write_bytes(b"\x00hello")
    assert (await call(tools, "list_dir")).content == "blob.bin (6 bytes)\nsrc/"
    assert (await call(tools, "list_dir", path="src")).content == "pkg/\nreadme.md (12 bytes)"
    assert (await call(tools, "glob", pattern="**/*.py")).content == "src/pkg/mod.py"
    assert (await call(tools, "grep", pattern=r"hel+o")).content == (
        "src/pkg/mod.py:1: def hello():\nsrc/readme.md:1: hello world"
    )
    assert (await call(tools, "grep", pattern="hello", include="**/*.md")).content == (
        "src/readme.md:1: hello world"
    )
    bad = await call(tools, "grep", pattern="(")
    assert bad.is_error and "invalid regular expression" in bad.content


def test_atomic_write_keeps_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "f.sh"
    target.write_text("old")
    os.chmod(target, 0o751)
    atomic_write(target, b"new")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o751
    assert [p.name for p in tmp_path.iterdir()] == ["f.sh"]


def test_atomic_write_failure_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old")

    with pytest.raises(TypeError):
        atomic_write(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


async def test_a_missing_path_names_what_is_there_and_nothing_of_other_users(
    tools, workspace: Workspace
) -> None:
    root = workspace.root("alice")
    (root / "apple.txt").write_text("a")
    (root / "docs").mkdir()
    (root / "docs/b.md").write_text("b")
    (workspace.root("bob") / "bobs-diary.txt").write_text("private")
    os.mkdir(os.path.join(os.fsencode(root), b"caf\xe9"))  # a name that is not UTF-8

    listed = await call(tools, "list_dir", path="workspace.json")  # a small model's guess
    assert listed.is_error
    assert "no such file or directory: workspace.json" in listed.content
    assert "apple.txt" in listed.content and "docs" in listed.content
    read = await call(tools, "read_file", path="docs/readme.md")
    assert read.is_error and "no such file: docs/readme.md" in read.content
    assert "b.md" in read.content and "apple.txt" not in read.content  # the directory it was in
    read.content.encode("utf-8")  # the undecodable name is shown, as valid text
    for result in (listed, read, await call(tools, "read_file", user="carol", path="x.txt")):
        assert "bob" not in result.content
    empty = await call(tools, "read_file", user="carol", path="x.txt")
    assert "(where it was looked for: nothing)" in empty.content

    for i in range(30):
        (root / f"n{i:02}.txt").write_text("")
    many = await call(tools, "read_file", path="missing.txt")
    assert "n00.txt" in many.content and "and 13 more" in many.content
