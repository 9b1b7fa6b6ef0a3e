"""What git would run on the host from a workspace a sandboxed command wrote in (issue 30).

Git obeys a repository's config (``core.fsmonitor``, ``core.hooksPath``, aliases, filters),
its hooks and its ``commondir`` on the person's next ``git status``, outside any sandbox. So
every repository in the workspace (the ``.git`` of its root and of nested projects, found by
a bounded walk) is mounted read-only inside the sandbox: it can be read, not changed, renamed
or deleted (a mount point cannot be). A ``.git`` that appears during a command (``git init``,
a hand-made ``.git`` file or link) is moved aside when the command ends, under a name git does
not read: the host never takes it for a repository.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

log = logging.getLogger("thinkloop.sandbox")

# The walk's bounds: a workspace holding more directories than this (node_modules, a
# virtualenv) is walked this far, and a repository deeper in it is the person's to check
# (docs/sandbox.md).
MAX_DIRS = 20_000
MAX_MOUNTED = 64
QUARANTINE = ".git-from-sandbox-"


def repositories(root: Path) -> list[Path]:
    """Every ``.git`` (directory, file or link) under ``root``, not inside another one."""
    found: list[Path] = []
    stack, walked = [root], 0
    while stack and walked < MAX_DIRS:
        folder = stack.pop()
        walked += 1
        try:
            with os.scandir(folder) as entries:
                for e in entries:
                    if e.name == ".git":
                        found.append(Path(e.path))
                    elif e.is_dir(follow_symlinks=False):
                        stack.append(Path(e.path))
        except OSError:
            continue
    return found


def read_only(found: list[Path]) -> list[Path]:
    """The repositories to mount read-only: real directories and files, not links (a link's
    target may lie outside the workspace, where a mount must not reach)."""
    return [p for p in found if not p.is_symlink()][:MAX_MOUNTED]


def quarantine(root: Path, before: list[Path]) -> list[Path]:
    """Move aside every ``.git`` under ``root`` that was not there before the command."""
    old = set(before)
    moved = []
    for p in repositories(root):
        if p in old:
            continue
        dest = p.with_name(QUARANTINE + uuid.uuid4().hex[:8])
        try:
            p.rename(dest)
        except OSError as exc:
            log.warning("could not move aside %s made by a sandboxed command: %s", p, exc)
            continue
        log.warning("a sandboxed command made %s; moved to %s so git never runs it", p, dest)
        moved.append(dest)
    return moved
