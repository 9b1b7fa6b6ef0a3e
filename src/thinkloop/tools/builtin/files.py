"""File tools confined to the caller's workspace: read, write, edit, list, glob, grep.

Every access goes through :class:`~thinkloop.tools.workspace.Workspace`'s no-follow opens;
walks (glob, grep) never descend through symbolic links. Model-chosen regular expressions run
on the ``regex`` engine with a time limit and without holding the GIL, so a backtracking
pattern ends in an error instead of freezing the event loop. Names are made valid text.
"""

from __future__ import annotations

import os
import re
import stat
import time

import regex

from thinkloop.core.errors import PathEscapeError, ToolExecutionError
from thinkloop.core.tool import Tool, ToolContext, make_tool
from thinkloop.text import valid_text
from thinkloop.tools.builtin.settings import ToolSettings
from thinkloop.tools.workspace import Workspace, split_path

_LIST_LIMIT = 500
# CPU seconds all of one grep's matching may take (a backtracking pattern hits this; the
# regex engine counts CPU time, and releases the GIL while it matches).
GREP_TIME_S = 5.0


def _check_pattern(pattern: str) -> None:
    if pattern.startswith(("/", "\\", "~")) or ".." in re.split(r"[\\/]+", pattern):
        raise PathEscapeError(f"glob patterns must stay inside the workspace: {pattern!r}")


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob (``*``, ``?``, ``[..]``, ``**`` for any depth) as a regex on relative paths."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("(?s:" + "".join(out) + r")\Z")


def _grep_files(
    workspace: Workspace, user_id: str | None, path: str, wanted: re.Pattern[str]
) -> list[str]:
    """Workspace-relative paths grep searches, sorted: ``path`` itself if it is a file, else
    the files under it matching ``wanted`` (links are never descended)."""
    parts = split_path(path)
    prefix = "/".join(parts)
    try:
        with workspace.directory(user_id, path) as start:
            found = []
            for top, _dirs, files, _fd in os.fwalk(".", dir_fd=start, follow_symlinks=False):
                rel = top[2:] if top.startswith("./") else ""
                found += [f"{rel}/{n}" if rel else n for n in files]
    except ToolExecutionError as exc:
        if parts and str(exc).startswith("not a directory"):
            return [prefix]
        raise
    return sorted(f"{prefix}/{f}" if prefix else f for f in found if wanted.match(f))


def _describe(entry: os.DirEntry[str]) -> str:
    name = valid_text(entry.name)
    if entry.is_symlink():
        return f"{name}@ (symbolic link, not followed)"
    if entry.is_dir(follow_symlinks=False):
        return f"{name}/"
    return f"{name} ({entry.stat(follow_symlinks=False).st_size} bytes)"


def file_tools(workspace: Workspace, settings: ToolSettings) -> list[Tool]:
    """The six file tools bound to ``workspace``; the user comes from each call's context."""

    def read_file(ctx: ToolContext, path: str, start_line: int = 1, max_lines: int = 2000) -> str:
        """Read a text file from the workspace.

        Args:
            path: file path relative to the workspace
            start_line: first line to return (1-based)
            max_lines: how many lines to return at most
        """
        raw, size = workspace.read_bytes(ctx.user_id, path, settings.read_max_bytes)
        lines = valid_text(raw).splitlines(keepends=True)
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
        data = valid_text(content).encode()
        workspace.write_bytes(ctx.user_id, path, data)
        return f"wrote {len(data)} bytes to {'/'.join(split_path(path))}"

    def edit_file(ctx: ToolContext, path: str, old_string: str, new_string: str) -> str:
        """Replace one exact occurrence of old_string with new_string in a file.

        Args:
            path: file path relative to the workspace
            old_string: the exact text to replace; must occur exactly once
            new_string: the replacement text
        """
        if not old_string:
            raise ToolExecutionError("old_string must not be empty")
        # Read, change and write under the file's lock: parallel edits all land.
        with workspace.lock(ctx.user_id, path):
            raw, size = workspace.read_bytes(ctx.user_id, path, settings.read_max_bytes + 1)
            if size > settings.read_max_bytes:
                raise ToolExecutionError(
                    f"{path} is {size} bytes; edit_file handles files up to "
                    f"{settings.read_max_bytes} bytes")
            text = valid_text(raw)
            count = text.count(old_string)
            if count == 0:
                raise ToolExecutionError(f"old_string was not found in {path}; nothing changed")
            if count > 1:
                raise ToolExecutionError(
                    f"old_string occurs {count} times in {path}; include more surrounding text "
                    "so it matches exactly once. Nothing changed"
                )
            new = text.replace(old_string, valid_text(new_string), 1)
            workspace.write_bytes(ctx.user_id, path, new.encode())
        return f"edited {path}: replaced 1 occurrence"

    def list_dir(ctx: ToolContext, path: str = ".") -> str:
        """List a directory of the workspace: directories end with '/', files show their size.

        Args:
            path: directory path relative to the workspace
        """
        with workspace.directory(ctx.user_id, path) as fd, os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: e.name)
            lines = [_describe(e) for e in entries[:_LIST_LIMIT]]
        if len(entries) > _LIST_LIMIT:
            lines.append(f"[{len(entries) - _LIST_LIMIT} more entries not shown]")
        return "\n".join(lines) or "(empty directory)"

    def glob(ctx: ToolContext, pattern: str) -> str:
        """Find workspace files matching a glob pattern such as '**/*.py'.

        Args:
            pattern: glob pattern relative to the workspace
        """
        _check_pattern(pattern)
        match = glob_regex("/".join(p for p in re.split(r"/+", pattern) if p != ".") or "*")
        found: list[str] = []
        with workspace.directory(ctx.user_id, ".") as root:
            for top, dirs, files, _fd in os.fwalk(".", dir_fd=root, follow_symlinks=False):
                rel = top[2:] if top.startswith("./") else ""
                for name in [*dirs, *files]:
                    path = f"{rel}/{name}" if rel else name
                    if match.match(path):
                        found.append(valid_text(path))
        found.sort()
        if len(found) > _LIST_LIMIT:
            found = [*found[:_LIST_LIMIT], f"[{len(found) - _LIST_LIMIT} more matches]"]
        return "\n".join(found) or "no matches"

    def grep(ctx: ToolContext, pattern: str, path: str = ".", include: str = "**/*") -> str:
        """Search file contents with a regular expression; prints path:line: text.

        Args:
            pattern: regular expression (Python syntax)
            path: directory or file to search, relative to the workspace
            include: glob of files to search under path
        """
        _check_pattern(include)
        try:
            compiled = regex.compile(pattern)
        except (regex.error, ValueError, OverflowError) as exc:
            raise ToolExecutionError(f"invalid regular expression {pattern!r}: {exc}") from None
        searcher = _Searcher(compiled, settings.grep_max_matches, time.process_time() + GREP_TIME_S)
        wanted = glob_regex(include)
        try:
            for shown in _grep_files(workspace, ctx.user_id, path, wanted):
                with workspace.parent(ctx.user_id, shown) as (dfd, name):
                    searcher.search_file(dfd, name, valid_text(shown), settings.read_max_bytes)
        except _Enough:
            searcher.hits.append(f"[stopped at {settings.grep_max_matches} matches]")
        return "\n".join(searcher.hits) or "no matches"

    return [
        # The workspace changes between calls, so no answer may be replayed from an earlier one.
        make_tool(read_file, idempotent=False, trusted_output=False),
        make_tool(write_file, idempotent=False, needs_approval=True, confined=True),
        make_tool(edit_file, idempotent=False, needs_approval=True, confined=True),
        make_tool(list_dir, idempotent=False, trusted_output=False),
        make_tool(glob, idempotent=False, trusted_output=False),
        make_tool(grep, idempotent=False, trusted_output=False),
    ]


class _Enough(Exception):
    """grep found as many matches as it may show."""


class _Searcher:
    def __init__(self, compiled: regex.Pattern[str], limit: int, deadline: float) -> None:
        self.compiled, self.limit, self.deadline = compiled, limit, deadline  # process_time
        self.hits: list[str] = []

    def search_file(self, dir_fd: int, name: str, shown: str, max_bytes: int) -> None:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dir_fd)
        except OSError:
            return  # a link, or gone: not followed, not searched
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return
            data = fh.read(max_bytes)
        if b"\x00" in data[:1024]:
            return  # binary
        for n, line in enumerate(valid_text(data).splitlines(), 1):
            left = self.deadline - time.process_time()
            try:
                found = left > 0 and self.compiled.search(line, timeout=left, concurrent=True)
            except TimeoutError:
                found, left = None, 0
            if left <= 0:
                raise ToolExecutionError(
                    f"the regular expression used more than {GREP_TIME_S:g}s of CPU (it "
                    f"backtracks too much); simplify it. Matches so far: {len(self.hits)}")
            if found:
                self.hits.append(f"{shown}:{n}: {line[:300]}")
                if len(self.hits) >= self.limit:
                    raise _Enough
