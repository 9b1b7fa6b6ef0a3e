"""File tools confined to the caller's workspace: read, write, edit, list, glob, grep."""

from __future__ import annotations

import re
from pathlib import Path

from thinkloop.errors import ToolExecutionError
from thinkloop.tools.base import Tool, ToolContext, make_tool
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.workspace import PathEscapeError, Workspace, atomic_write, relative

_LIST_LIMIT = 500


def _check_pattern(pattern: str) -> None:
    if pattern.startswith(("/", "\\", "~")) or ".." in re.split(r"[\\/]+", pattern):
        raise PathEscapeError(f"glob patterns must stay inside the workspace: {pattern!r}")


def _inside(root: Path, path: Path) -> bool:
    """True when ``path`` is really in ``root`` (symlinks followed)."""
    try:
        return path.resolve().is_relative_to(root)
    except OSError:
        return False


def file_tools(workspace: Workspace, settings: ToolSettings) -> list[Tool]:
    """The six file tools bound to ``workspace``; the user comes from each call's context."""

    def read_file(ctx: ToolContext, path: str, start_line: int = 1, max_lines: int = 2000) -> str:
        """Read a text file from the workspace.

        Args:
            path: file path relative to the workspace
            start_line: first line to return (1-based)
            max_lines: how many lines to return at most
        """
        target = workspace.resolve(ctx.user_id, path)
        if not target.is_file():
            raise ToolExecutionError(f"no such file: {path}")
        size = target.stat().st_size
        with target.open("rb") as fh:
            raw = fh.read(settings.read_max_bytes)
        text = raw.decode("utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        first = max(start_line, 1) - 1
        chosen = "".join(lines[first : first + max_lines])
        notes = []
        if size > settings.read_max_bytes:
            notes.append(f"[file is {size} bytes; only the first {settings.read_max_bytes} read]")
        if first + max_lines < len(lines):
            notes.append(f"[showing lines {first + 1}-{first + max_lines} of {len(lines)}]")
        return chosen + ("\n" + "\n".join(notes) if notes else "")

    def write_file(ctx: ToolContext, path: str, content: str) -> str:
        """Create or overwrite a file in the workspace (parent directories are created).

        Args:
            path: file path relative to the workspace
            content: the complete new content of the file
        """
        target = workspace.resolve(ctx.user_id, path)
        if target.is_dir():
            raise ToolExecutionError(f"{path} is a directory")
        data = content.encode()
        atomic_write(target, data)
        return f"wrote {len(data)} bytes to {relative(workspace.root(ctx.user_id), target)}"

    def edit_file(ctx: ToolContext, path: str, old_string: str, new_string: str) -> str:
        """Replace one exact occurrence of old_string with new_string in a file.

        Args:
            path: file path relative to the workspace
            old_string: the exact text to replace; must occur exactly once
            new_string: the replacement text
        """
        target = workspace.resolve(ctx.user_id, path)
        if not target.is_file():
            raise ToolExecutionError(f"no such file: {path}")
        if not old_string:
            raise ToolExecutionError("old_string must not be empty")
        text = target.read_text(encoding="utf-8")
        count = text.count(old_string)
        if count == 0:
            raise ToolExecutionError(f"old_string was not found in {path}; nothing changed")
        if count > 1:
            raise ToolExecutionError(
                f"old_string occurs {count} times in {path}; include more surrounding text so "
                "it matches exactly once. Nothing changed"
            )
        atomic_write(target, text.replace(old_string, new_string, 1).encode())
        return f"edited {path}: replaced 1 occurrence"

    def list_dir(ctx: ToolContext, path: str = ".") -> str:
        """List a directory of the workspace: directories end with '/', files show their size.

        Args:
            path: directory path relative to the workspace
        """
        target = workspace.resolve(ctx.user_id, path)
        if not target.is_dir():
            raise ToolExecutionError(f"not a directory: {path}")
        entries = sorted(target.iterdir(), key=lambda p: p.name)
        lines = [
            f"{p.name}/" if p.is_dir() else f"{p.name} ({p.stat().st_size} bytes)"
            for p in entries[:_LIST_LIMIT] if p.exists()
        ]
        if len(entries) > _LIST_LIMIT:
            lines.append(f"[{len(entries) - _LIST_LIMIT} more entries not shown]")
        return "\n".join(lines) or "(empty directory)"

    def glob(ctx: ToolContext, pattern: str) -> str:
        """Find workspace files matching a glob pattern such as '**/*.py'.

        Args:
            pattern: glob pattern relative to the workspace
        """
        _check_pattern(pattern)
        root = workspace.root(ctx.user_id)
        found = sorted(
            relative(root, p) for p in root.glob(pattern) if _inside(root, p) and p != root
        )
        if len(found) > _LIST_LIMIT:
            found = [*found[:_LIST_LIMIT], f"[{len(found) - _LIST_LIMIT} more matches]"]
        return "\n".join(found) or "no matches"

    def grep(ctx: ToolContext, pattern: str, path: str = ".", include: str = "**/*") -> str:
        """Search file contents with a regular expression; prints path:line: text.

        Args:
            pattern: Python regular expression
            path: directory or file to search, relative to the workspace
            include: glob of files to search under path
        """
        _check_pattern(include)
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolExecutionError(f"invalid regular expression {pattern!r}: {exc}") from None
        root = workspace.root(ctx.user_id)
        start = workspace.resolve(ctx.user_id, path)
        files = [start] if start.is_file() else sorted(start.glob(include))
        hits: list[str] = []
        for f in files:
            if not f.is_file() or not _inside(root, f):
                continue
            with f.open("rb") as fh:
                data = fh.read(settings.read_max_bytes)
            if b"\x00" in data[:1024]:
                continue  # binary
            for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{relative(root, f.resolve())}:{n}: {line[:300]}")
                    if len(hits) >= settings.grep_max_matches:
                        hits.append(f"[stopped at {settings.grep_max_matches} matches]")
                        return "\n".join(hits)
        return "\n".join(hits) or "no matches"

    return [
        # The workspace changes between calls, so no answer may be replayed from an earlier one.
        make_tool(read_file, idempotent=False, trusted_output=False),
        make_tool(write_file, idempotent=False, needs_approval=True),
        make_tool(edit_file, idempotent=False, needs_approval=True),
        make_tool(list_dir, idempotent=False, trusted_output=False),
        make_tool(glob, idempotent=False, trusted_output=False),
        make_tool(grep, idempotent=False, trusted_output=False),
    ]
