"""How ``thinkloop host`` confines one container-mode process: bubblewrap, docker or podman.

Whichever engine, the child gets the same things: its group's data folder read-write (its
store, sessions and workspace), a short environment of non-secret names, and nothing else of
the host. Secrets never appear here: they travel in the payload on the child's stdin, so no
argument vector or environment (``ps``, ``/proc/PID/environ``) ever shows them.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from thinkloop.api import SYSTEM_PATH, probe, system_mounts
from thinkloop.core.errors import ConfigError
from thinkloop.core.settings import DEFAULT_ENV_ALLOW, host_environment

Engine = Literal["auto", "bwrap", "docker", "podman", "none"]
ENGINES = ("auto", "bwrap", "docker", "podman", "none")
# Inside a container the data folder is mounted here.
CONTAINER_DATA = "/data"
# Host variables a child may see: locale, and where Python finds thinkloop (not secret).
PASS_ENV = (*DEFAULT_ENV_ALLOW, "PYTHONPATH")
_GROUP_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Confinement:
    """One engine's way to start a child; :meth:`command` gives the argv and environment."""

    engine: Engine = "auto"
    data: Path = Path("host-data")  # one folder per group under it
    image: str | None = None  # docker/podman: an image with thinkloop installed
    network: str | None = None  # docker/podman --network (default: the engine's)
    extra_env: dict[str, str] = field(default_factory=dict)  # non-secret settings

    def resolved(self) -> Engine:
        """``auto``: a container engine when an image is configured and one is installed,
        else bubblewrap."""
        if self.engine != "auto":
            return self.engine
        if self.image:
            for name in ("docker", "podman"):
                if shutil.which(name):
                    return name
        return "bwrap"

    def folder(self, group: str) -> Path:
        name = _GROUP_CHARS.sub("_", group).strip("._")[:64] or "default"
        path = (self.data / name).resolve()
        # Under the home's own "workspaces" folder: a workspace elsewhere inside the home is
        # refused by the settings (the model would edit the group's store and prompt files).
        # A group made before that kept its files in "workspace": they move along once.
        legacy, current = path / "workspace", path / "workspaces"
        if legacy.is_dir() and not legacy.is_symlink() and not current.exists():
            legacy.rename(current)
        current.mkdir(parents=True, exist_ok=True)
        return path

    def command(self, group: str) -> tuple[list[str], dict[str, str]]:
        """The argv starting ``thinkloop run --stdio`` for ``group``, and its environment."""
        engine = self.resolved()
        folder = self.folder(group)
        if engine in ("docker", "podman"):
            return self._container(engine, folder), _passed({"PATH": host_environment().get(
                "PATH", SYSTEM_PATH)})
        env = _passed({"PATH": SYSTEM_PATH, "HOME": str(folder),
                       "THINKLOOP_HOME": str(folder),
                       "THINKLOOP_TOOLS_WORKSPACE": str(folder / "workspaces"),
                       # The whole process is confined: its commands run in it as they are.
                       "THINKLOOP_TOOLS_SANDBOX": "none", **self.extra_env})
        child = [sys.executable, "-m", "thinkloop", "run", "--stdio"]
        if engine == "none":
            return child, env
        if engine != "bwrap":
            raise ConfigError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
        return [*_bwrap(folder), *child], env

    def _container(self, engine: str, folder: Path) -> list[str]:
        if not self.image:
            raise ConfigError(f"engine {engine!r} needs an image with thinkloop installed "
                              "(--image; deploy/Dockerfile builds one)")
        if shutil.which(engine) is None:
            raise ConfigError(f"engine {engine!r} is not installed")
        env = {"THINKLOOP_HOME": CONTAINER_DATA, "HOME": CONTAINER_DATA,
               "THINKLOOP_TOOLS_WORKSPACE": f"{CONTAINER_DATA}/workspaces",
               "THINKLOOP_TOOLS_SANDBOX": "none", **self.extra_env}
        argv = [engine, "run", "--rm", "-i", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--pids-limit", "256",
                "--user", f"{os.getuid()}:{os.getgid()}",
                "-v", f"{folder}:{CONTAINER_DATA}", "-w", CONTAINER_DATA]
        if self.network:
            argv += ["--network", self.network]
        for key, value in env.items():  # names and values here are settings, never secrets
            argv += ["-e", f"{key}={value}"]
        return [*argv, self.image, "thinkloop", "run", "--stdio"]


def _bwrap(folder: Path) -> list[str]:
    """bubblewrap around the child: the system and this Python read-only, the group's folder
    read-write, the network shared (the model is reached over it), nothing else."""
    argv = [probe(), "--unshare-all", "--share-net", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--hostname", "thinkloop", *system_mounts()]
    for path in _python_paths(folder):
        argv += ["--ro-bind", str(path), str(path)]
    return [*argv, "--bind", str(folder), str(folder), "--chdir", str(folder), "--"]


def _python_paths(folder: Path) -> list[Path]:
    """The interpreter's prefixes and every import path, outermost first, once each."""
    found: list[Path] = []
    candidates = [sys.prefix, sys.base_prefix, *sys.path, *host_environment().get(
        "PYTHONPATH", "").split(os.pathsep)]
    for raw in candidates:
        if not raw or not os.path.isabs(raw) or not os.path.exists(raw):
            continue
        path = Path(raw).resolve()
        if path == Path("/") or path.is_relative_to(folder) or str(path).startswith("/usr/"):
            continue
        if not any(path.is_relative_to(p) for p in found):
            found = [p for p in found if not p.is_relative_to(path)] + [path]
    return found


def _passed(values: dict[str, str]) -> dict[str, str]:
    host = host_environment()
    return {**{k: host[k] for k in PASS_ENV if k in host}, **values}
