"""``sandbox="bwrap"``: bubblewrap namespaces around every command.

What the command sees: the system (``/usr``, the ``/lib`` links, a short list of ``/etc``
files) read-only, the user's workspace read-write at its own path (but its repositories,
``.git`` and every nested one, read-only: see :mod:`thinkloop.sandbox.git`), the Python
environment thinkloop runs in read-only (``ToolSettings.sandbox_python``; the shell tool
passes it), a private ``/tmp``, ``/proc`` of its own PID namespace and a minimal ``/dev``.
Nothing else of the host exists inside: not other workspaces, not ``THINKLOOP_HOME`` (store,
agent prompt files), not ``/root`` or ``/home``. Namespaces: user, PID, network (unless
allowed), IPC, UTS, cgroup; all capabilities dropped; ``--die-with-parent`` and the PID
namespace end every process the command started (``setsid`` ones too) when the call ends.

Limits are rlimits set by ``prlimit`` *inside* the namespaces, so the process count is that of
the sandbox alone. A process of real uid 0 is exempt from ``RLIMIT_NPROC``; when we run as root
the count is enforced by a pids cgroup instead, when one is writable.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from thinkloop.core.errors import SandboxUnavailableError
from thinkloop.sandbox import git
from thinkloop.sandbox.base import SandboxLimits

_SYSTEM_DIRS = ("/usr",)
_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# /etc entries programs need to run (users, DNS, TLS roots, the dynamic linker, alternatives);
# not the whole of /etc, which may hold credentials.
_ETC = ("passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
        "ssl", "ca-certificates", "ca-certificates.conf", "alternatives", "ld.so.cache",
        "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "mime.types", "os-release",
        "debian_version", "protocols", "services", "profile", "bash.bashrc", "inputrc",
        "python3", "python3.11", "python3.12", "python3.13", "magic", "mailcap")
MISSING_HELP = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) or choose "
                "sandbox='none' (THINKLOOP_TOOLS_SANDBOX=none) to run commands unconfined")


@functools.lru_cache(maxsize=4)
def probe(bwrap: str | None = None) -> str:
    """The bwrap path after checking it can build the namespaces we use; raise otherwise."""
    path = shutil.which(bwrap or "bwrap")
    if path is None:
        raise SandboxUnavailableError(f"sandbox 'bwrap' needs the bwrap program: {MISSING_HELP}")
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise SandboxUnavailableError(
            "sandbox 'bwrap' needs the prlimit program (Debian package util-linux)")
    argv = [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc",
            "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailableError(f"sandbox 'bwrap' could not start: {exc}") from None
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise SandboxUnavailableError(
            f"sandbox 'bwrap' cannot create namespaces here ({why[0]}); user namespaces may be "
            f"disabled (sysctl kernel.unprivileged_userns_clone / user.max_user_namespaces). "
            f"Or choose sandbox='none' to run commands unconfined")
    return path


def _pids_cgroup_parent() -> Path | None:
    """A cgroup directory under which we may create a child with ``pids.max``, if any."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "pids" in controllers.split(","):
            base = Path("/sys/fs/cgroup/pids") / rel.lstrip("/")
        elif controllers == "":
            base = Path("/sys/fs/cgroup") / rel.lstrip("/")
            try:
                if "pids" not in (base / "cgroup.subtree_control").read_text().split():
                    continue
            except OSError:
                continue
        else:
            continue
        if os.access(base, os.W_OK):
            return base
    return None


def _try_remove(group: Path) -> bool:
    """Remove ``group`` or kill what is left in it; True once it is gone (cgroupfs: no I/O)."""
    try:
        group.rmdir()
        return True
    except FileNotFoundError:
        return True
    except OSError:
        with contextlib.suppress(OSError, ValueError):
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        return False


async def _remove_cgroup(group: Path) -> None:
    # Killed processes leave the cgroup a moment later; it can be removed only when empty.
    for _ in range(100):
        if _try_remove(group):
            return
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def _pids_cgroup(limit: int) -> AsyncIterator[Path | None]:
    """A fresh pids cgroup limited to ``limit``; yields its ``cgroup.procs`` (None if none)."""
    parent = _pids_cgroup_parent()
    if parent is None:
        yield None
        return
    group = parent / f"thinkloop-{uuid.uuid4().hex[:12]}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(limit))
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        yield None
        return
    try:
        yield group / "cgroup.procs"
    finally:
        await _remove_cgroup(group)


def system_mounts() -> list[str]:
    """bwrap arguments for what any program needs: the system read-only, a short list of
    ``/etc`` files, its own ``/proc``, a minimal ``/dev`` and a private ``/tmp``."""
    args: list[str] = []
    for d in _SYSTEM_DIRS:
        args += ["--ro-bind", d, d]
    for d in _LINKS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for name in _ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return [*args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]


@dataclass(frozen=True)
class BwrapSandbox:
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    bwrap: str | None = None
    name: str = "bwrap"

    def __post_init__(self) -> None:
        object.__setattr__(self, "bwrap", probe(self.bwrap))

    def describe(self) -> str:
        procs = ("" if os.geteuid() != 0 or _pids_cgroup_parent() is not None
                 else " (process count not enforced: running as root without a pids cgroup)")
        return ("Commands run inside a bubblewrap sandbox: only your working directory is "
                "writable and kept; the system is read-only, /tmp is private and emptied after "
                "each command, other users' files and the agent's own files are not there. "
                f"Limits: {self.limits.describe()}{procs}. Every process a command starts "
                "ends when the command ends or times out.")

    def _mounts(self, cwd: Path, read_only: Sequence[Path], repos: Sequence[Path] = ()
                ) -> list[str]:
        args = system_mounts()
        for p in read_only:
            args += ["--ro-bind", str(p), str(p)]
        args += ["--bind", str(cwd), str(cwd)]
        # Git runs hooks and obeys config and commondir on the person's own later commands,
        # outside this sandbox and unseen by `git diff`: every repository stays read-only.
        for p in repos:
            args += ["--ro-bind", str(p), str(p)]
        args += ["--chdir", str(cwd)]
        return args

    def _rlimits(self) -> list[str]:
        lim = self.limits
        return ["prlimit", f"--nproc={lim.max_processes}", f"--as={lim.memory_bytes}",
                f"--cpu={lim.cpu_s}", f"--fsize={lim.file_bytes}", "--core=0", "--"]

    @contextlib.asynccontextmanager
    async def launch(
        self, command: str, *, cwd: Path, read_only: Sequence[Path] = ()
    ) -> AsyncIterator[list[str]]:
        repos = await asyncio.to_thread(git.repositories, cwd)
        try:
            async with self._argv(command, cwd, read_only, git.read_only(repos)) as argv:
                yield argv
        finally:
            # A repository the command made is moved aside before anyone's git can see it.
            await asyncio.shield(asyncio.to_thread(git.quarantine, cwd, repos))

    @contextlib.asynccontextmanager
    async def _argv(self, command: str, cwd: Path, read_only: Sequence[Path],
                    repos: Sequence[Path]) -> AsyncIterator[list[str]]:
        assert self.bwrap is not None
        argv = [self.bwrap, "--unshare-all", *(["--share-net"] if self.limits.network else []),
                "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--hostname", "sandbox", *self._mounts(cwd, read_only, repos),
                "--", *self._rlimits(), "/bin/sh", "-c", command]
        if os.geteuid() != 0:
            yield argv
            return
        async with _pids_cgroup(self.limits.max_processes) as procs:
            if procs is None:
                yield argv
                return
            # Join the cgroup before bwrap starts, so every process of the sandbox counts.
            yield ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *argv]
