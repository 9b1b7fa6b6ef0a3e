"""Per-agent, per-user workspaces (GoClaw ``base/<user>``) with ``openat``-style no-follow access.

Paths from the model are checked lexically (no absolute paths, no ``..``, no NUL) and then
opened one component at a time relative to the user's directory with ``O_NOFOLLOW``: a
symbolic link anywhere on the way is refused, so a directory swapped for a link between a check
and an open cannot lead outside. The user's own folder is opened the same way from the base
directory, so a link planted at another user's folder name is refused too. Writes to one file
are serialised (a read-modify-write such as ``edit_file`` holds the file's lock throughout).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING

from thinkloop.core.errors import PathEscapeError, ToolExecutionError

if TYPE_CHECKING:
    from thinkloop.core.settings import ToolSettings

DEFAULT_USER = "default"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted in the workspace must not hang a read.
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


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


def split_path(path: str) -> list[str]:
    """The components of a workspace-relative ``path``; refuses anything that could leave it."""
    if "\x00" in path:
        raise PathEscapeError("path contains a NUL byte")
    text = path.strip() or "."
    if PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute() or text[:1] in (
        "/", "\\", "~"
    ):
        raise PathEscapeError(
            f"absolute paths are not allowed: {path!r}; use a path relative to the workspace"
        )
    parts = [p for p in re.split(r"[\\/]+", text) if p not in ("", ".")]
    if ".." in parts:
        raise PathEscapeError(f"'..' is not allowed in paths: {path!r}")
    return parts


def _link_refused(path: str, name: str) -> PathEscapeError:
    return PathEscapeError(
        f"{path!r} goes through the symbolic link {name!r}; links are not followed, so no "
        "path can lead outside the workspace. Access refused")


def _missing(what: str, path: str, parent: int, shown: int = 20) -> ToolExecutionError:
    """``no such file: path``, naming what the directory it was looked for in holds, so the
    model can correct a guessed name (a small model lists ``workspace.json`` for the root)."""
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        names = []
    held = ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown
                                       else "")
    return ToolExecutionError(f"no such {what}: {path} (where it was looked for: "
                              f"{held or 'nothing'})")


def _open_dir(parent: int, name: str, *, path: str, create: bool) -> int:
    """``openat(parent, name, O_DIRECTORY | O_NOFOLLOW)``, creating it when asked."""
    for attempt in (0, 1):
        try:
            return os.open(name, _DIR, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise _missing("file or directory", path, parent) from None
            if attempt:  # made and gone again: a race, and the base may hold other users
                raise ToolExecutionError(f"no such file or directory: {path}") from None
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                    raise _link_refused(path, name) from None
                raise ToolExecutionError(f"not a directory: {path}") from None
            raise
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Workspace:
    """The directory tree an agent's tools may touch: ``base/<sanitised user id>``, or with
    ``per_user=False`` the base itself, for every user (one person's own project)."""

    base: Path
    per_user: bool = True
    _locks: dict[tuple[str, ...], threading.RLock] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    _locks_guard: threading.Lock = field(
        default_factory=threading.Lock, init=False, repr=False, compare=False)

    def _base(self) -> Path:
        base = Path(self.base).expanduser()
        base.mkdir(parents=True, exist_ok=True)
        return base.resolve()

    @contextlib.contextmanager
    def _root_fd(self, user_id: str | None) -> Iterator[int]:
        base_fd = os.open(self._base(), _DIR & ~os.O_NOFOLLOW)
        if not self.per_user:
            # The base was chosen by whoever set the agent up (a link to it is theirs to make);
            # below it, every component is opened without following links, as for a user's.
            try:
                yield base_fd
            finally:
                os.close(base_fd)
            return
        try:
            name = sanitize_user_id(user_id)
            fd = _open_dir(base_fd, name, path=name, create=True)
        finally:
            os.close(base_fd)
        try:
            yield fd
        finally:
            os.close(fd)

    def root(self, user_id: str | None) -> Path:
        """The user's directory, created on first use; never a symbolic link."""
        with self._root_fd(user_id):
            return self._base() / sanitize_user_id(user_id) if self.per_user else self._base()

    @classmethod
    def of(cls, settings: ToolSettings) -> Workspace:
        """The workspace the tools' settings describe."""
        return cls(settings.workspace, per_user=settings.workspace_per_user)

    @contextlib.contextmanager
    def directory(self, user_id: str | None, path: str, *, create: bool = False) -> Iterator[int]:
        """A file descriptor of the workspace directory ``path`` (no link followed)."""
        with self._root_fd(user_id) as root:
            fd = os.dup(root)
            try:
                for name in split_path(path):
                    nxt = _open_dir(fd, name, path=path, create=create)
                    os.close(fd)
                    fd = nxt
                yield fd
            finally:
                os.close(fd)

    @contextlib.contextmanager
    def parent(
        self, user_id: str | None, path: str, *, create: bool = False
    ) -> Iterator[tuple[int, str]]:
        """(descriptor of the directory holding ``path``, its last component)."""
        parts = split_path(path)
        if not parts:
            raise ToolExecutionError(f"{path!r} is the workspace itself, not a file")
        with self.directory(user_id, "/".join(parts[:-1]), create=create) as fd:
            yield fd, parts[-1]

    def lock(self, user_id: str | None, path: str) -> threading.RLock:
        """The lock serialising writes to one file (held across a read-modify-write)."""
        key = (sanitize_user_id(user_id), *split_path(path))
        with self._locks_guard:
            return self._locks.setdefault(key, threading.RLock())

    def read_bytes(self, user_id: str | None, path: str, limit: int) -> tuple[bytes, int]:
        """Up to ``limit`` bytes of a regular file, and its full size."""
        with self.parent(user_id, path) as (dfd, name):
            try:
                fd = os.open(name, _READ, dir_fd=dfd)
            except FileNotFoundError:
                raise _missing("file", path, dfd) from None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _link_refused(path, name) from None
                raise ToolExecutionError(f"cannot open {path}: {exc.strerror}") from None
            with os.fdopen(fd, "rb") as fh:
                info = os.fstat(fh.fileno())
                if not stat.S_ISREG(info.st_mode):
                    kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
                    raise ToolExecutionError(f"{path} is {kind}")
                return fh.read(limit), info.st_size

    def write_bytes(self, user_id: str | None, path: str, data: bytes) -> None:
        """Replace ``path`` atomically (readers see the old file or the new one, never half)."""
        with self.lock(user_id, path), self.parent(user_id, path, create=True) as (dfd, name):
            try:
                old = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None and stat.S_ISDIR(old.st_mode):
                raise ToolExecutionError(f"{path} is a directory")
            _replace_at(dfd, name, data, old.st_mode & 0o7777 if old and stat.S_ISREG(
                old.st_mode) else 0o644)

    def resolve(self, user_id: str | None, path: str) -> Path:
        """``path`` as a host path inside the user's folder, checked for links on the way."""
        with self.parent(user_id, path, create=True) as (dfd, name), contextlib.suppress(
                FileNotFoundError):
            if stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
                    raise _link_refused(path, name)
        return self.root(user_id).joinpath(*split_path(path))


def _replace_at(dfd: int, name: str, data: bytes, mode: int) -> None:
    tmp = f".{name[:100]}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode, dir_fd=dfd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        # rename replaces a link at ``name`` itself; it never writes through one.
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dfd)
        raise


def confine(root: Path, path: str) -> Path:
    """``path`` under ``root`` with no symbolic link on the way, or :class:`PathEscapeError`."""
    current = root
    for name in split_path(path):
        current = current / name
        if current.is_symlink():
            raise _link_refused(path, name)
    return current


def relative(root: Path, path: Path) -> str:
    """How a resolved path is shown to the model: relative to the workspace."""
    rel = path.relative_to(root).as_posix()
    return rel or "."


def atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` (a path we chose, not the model) atomically."""
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
