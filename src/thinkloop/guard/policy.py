"""Tool policy (GoClaw PolicyEngine, CortexPrism validateToolCall): who may call what, how.

A :class:`ToolPolicy` holds allow/deny lists (tool-name globs) for the agent and per role
(RBAC: ``user_roles`` maps the run's ``user_id`` to a role), argument rules (a regex or a
callable per tool and argument) and per-run rate limits per tool. ``evaluate`` returns a
:class:`Verdict`; the tool gate turns a denial into an observation for the model.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

from thinkloop.core.types import ToolCall

# A callable argument check returns why the value is refused, or None when it is fine.
ArgCheck = Callable[[Any], str | None]


@dataclass(frozen=True)
class ArgRule:
    """Refuse (or send for approval) calls whose ``argument`` matches ``pattern``/``check``."""

    tool: str  # a glob over tool names: "shell", "fs_*", "*"
    argument: str
    pattern: re.Pattern[str] | None = None
    check: ArgCheck | None = None
    reason: str = "argument not allowed"
    action: Literal["deny", "approve"] = "deny"

    def violation(self, call: ToolCall) -> str | None:
        if not fnmatchcase(call.name, self.tool) or self.argument not in call.arguments:
            return None
        value = call.arguments[self.argument]
        if self.pattern is not None and self.pattern.search(str(value)):
            return f"{self.argument}: {self.reason}"
        if self.check is not None:
            problem = self.check(value)
            if problem:
                return f"{self.argument}: {problem}"
        return None


@dataclass(frozen=True)
class RolePolicy:
    allow: tuple[str, ...] | None = None  # None: every tool the agent allows
    deny: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    action: Literal["allow", "deny", "approve"]
    reason: str = ""


ALLOW = Verdict("allow")


def _matches(name: str, globs: Sequence[str]) -> bool:
    # Asked for every tool call, most often of an empty deny list: no generator for that.
    return bool(globs) and any(fnmatchcase(name, g) for g in globs)


@dataclass(frozen=True)
class ToolPolicy:
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    roles: Mapping[str, RolePolicy] = field(default_factory=dict)
    user_roles: Mapping[str, str] = field(default_factory=dict)
    default_role: str | None = None
    rules: tuple[ArgRule, ...] = ()
    rate_limits: Mapping[str, int] = field(default_factory=dict)  # glob -> calls per run

    @property
    def limits_tools(self) -> bool:
        """Whether ``permits`` can refuse a tool by name (an allow or deny list, or roles)."""
        return self.allow is not None or bool(self.deny) or bool(self.roles)

    def role_of(self, user_id: str | None) -> str | None:
        if user_id is not None and user_id in self.user_roles:
            return self.user_roles[user_id]
        return self.default_role

    def permits(self, tool: str, user_id: str | None) -> str | None:
        """Why ``tool`` is off limits for this user, or None when it is allowed."""
        if self.allow is not None and not _matches(tool, self.allow):
            return f"tool {tool!r} is not in this agent's allow list"
        if _matches(tool, self.deny):
            return f"tool {tool!r} is denied for this agent"
        role = self.role_of(user_id)
        rp = self.roles.get(role) if role is not None else None
        if rp is not None:
            if rp.allow is not None and not _matches(tool, rp.allow):
                return f"role {role!r} may not use tool {tool!r}"
            if _matches(tool, rp.deny):
                return f"tool {tool!r} is denied for role {role!r}"
        return None

    def evaluate(self, call: ToolCall, user_id: str | None, prior_calls: int) -> Verdict:
        """``prior_calls``: how many times this run already asked for this tool."""
        refused = self.permits(call.name, user_id)
        if refused:
            return Verdict("deny", refused)
        for glob, cap in self.rate_limits.items():
            if fnmatchcase(call.name, glob) and prior_calls >= cap:
                return Verdict("deny", f"rate limit: {call.name} may be called at most {cap} "
                                       f"time(s) per run")
        approve: Verdict | None = None
        for rule in self.rules:
            problem = rule.violation(call)
            if problem and rule.action == "deny":
                return Verdict("deny", problem)
            if problem and approve is None:
                approve = Verdict("approve", problem)
        return approve or ALLOW


# Shell commands nobody wants a model to run (CortexPrism/Parallax-style regex policy).
DANGEROUS_COMMANDS = re.compile(
    r"\brm\s+(?:-[a-z]*\s+)*-(?:[a-z]*r[a-z]*f|[a-z]*f[a-z]*r)[a-z]*\s+(?:--no-preserve-root\s+)?"
    r"(?:/|/\*|~|~/|\$home|/(?:etc|usr|bin|boot|var|lib|home|root))(?:\s|$|;|&)"
    r"|\brm\s+(?:-r\s+-f|-f\s+-r|--recursive\s+--force|--force\s+--recursive)\s+/(?:\s|$|\*)"
    r"|\bmkfs(?:\.\w+)?\b|\bdd\s+[^;|&]*\bof=/dev/(?:sd|hd|nvme|disk|xvd)"
    r"|:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:|>\s*/dev/(?:sd|nvme|hd)\w*"
    r"|\bchmod\s+-r\s+0?777\s+/(?:\s|$)|\b(?:shutdown|reboot|halt|poweroff)\b(?:\s|$)",
    re.IGNORECASE,
)


def deny_dangerous_commands(tool: str = "shell", argument: str = "command") -> ArgRule:
    return ArgRule(tool, argument, DANGEROUS_COMMANDS,
                   reason="destructive system command refused by policy")


def outside(root: str | os.PathLike[str]) -> ArgCheck:
    """A check refusing paths that resolve outside ``root`` (``..`` and absolute paths too)."""
    base = os.path.realpath(root)

    def check(value: Any) -> str | None:
        raw = os.path.expanduser(str(value))
        full = os.path.realpath(os.path.join(base, raw))
        if full != base and not full.startswith(base + os.sep):
            return f"path {value!r} is outside the workspace"
        return None

    return check


def confine_paths(
    root: str | os.PathLike[str], tool: str = "*",
    arguments: Sequence[str] = ("path", "file", "filename", "directory", "dest", "src"),
) -> tuple[ArgRule, ...]:
    check = outside(root)
    return tuple(ArgRule(tool, a, check=check, reason="outside the workspace") for a in arguments)
