"""Per-agent, per-user workspaces and confined path resolution (GoClaw ``base/<user>``).

Every filesystem, shell, browser-screenshot and workflow tool resolves paths through
:meth:`Workspace.resolve`, which refuses absolute paths, ``..`` components and anything whose
real path (symlinks followed) lands outside the user's directory.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from thinkloop.errors import ToolExecutionError

DEFAULT_USER = "default"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class PathEscapeError(ToolExecutionError):
    """A path that would leave the workspace."""


def sanitize_user_id(user_id: str | None) -> str:
    """A directory name for ``user_id``: safe characters only, distinct ids stay distinct.

    When characters had to be replaced a short hash of the original is appended, so
    ``a/b`` and ``a_b`` never share a workspace.
    """
    if not user_id:
        return DEFAULT_USER
    clean = _UNSAFE.sub("_", user_id).strip("._-")[:64]
    if clean == user_id:
        return clean
    digest = hashlib.sha256(user_id.encode()).hexdigest()[:10]
    return f"{clean or 'user'}-{digest}"


@dataclass(frozen=True)
class Workspace:
    """The directory tree an agent's tools may touch: ``base/<sanitised user id>``."""

    base: Path

    def root(self, user_id: str | None) -> Path:
        """The user's directory, created on first use; always a resolved real path."""
        base = Path(self.base).expanduser()
        base.mkdir(parents=True, exist_ok=True)
        root = base.resolve() / sanitize_user_id(user_id)
        root.mkdir(exist_ok=True)
        return root.resolve()

    def resolve(self, user_id: str | None, path: str) -> Path:
        """``path`` (relative to the user's directory) as a real path inside it."""
        return confine(self.root(user_id), path)


def confine(root: Path, path: str) -> Path:
    """Resolve ``path`` under ``root`` or raise :class:`PathEscapeError`."""
    if "\x00" in path:
        raise PathEscapeError("path contains a NUL byte")
    text = path.strip() or "."
    if PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute() or text[:1] in (
        "/", "\\", "~"
    ):
        raise PathEscapeError(
            f"absolute paths are not allowed: {path!r}; use a path relative to the workspace"
        )
    parts = re.split(r"[\\/]+", text)
    if ".." in parts:
        raise PathEscapeError(f"'..' is not allowed in paths: {path!r}")
    candidate = (root / text).resolve()
    if not candidate.is_relative_to(root):
        raise PathEscapeError(
            f"{path!r} resolves outside the workspace (through a symlink); access refused"
        )
    return candidate


def relative(root: Path, path: Path) -> str:
    """How a resolved path is shown to the model: relative to the workspace."""
    rel = path.relative_to(root).as_posix()
    return rel or "."


def atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` so readers see the old file or the new one, never half."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
