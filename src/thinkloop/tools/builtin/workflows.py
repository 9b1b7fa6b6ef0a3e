"""Workflows (Stingyclaw) and skills (GoClaw): scripts and instructions the agent can find.

A workflow registry is a YAML file::

    workflows:
      - name: db_backup
        description: Dump a PostgreSQL database to a compressed file
        args:
          database: name of the database to dump          # required
          target: {description: output file, default: backup.sql.gz}
        run: pg_dump "$DATABASE" | gzip > "$TARGET"
        timeout_s: 300

``run_workflow`` runs ``run`` with ``/bin/sh`` in the user's workspace, each argument as an
upper-case environment variable, the registry's directory first on ``PATH`` (so scripts stored
beside the registry run by name) and as ``$WORKFLOW_DIR``; confined and timed like ``shell``.

Skills are markdown files in a directory, optionally with ``name``/``description`` front matter.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from thinkloop.context.sections import render_skills
from thinkloop.core.errors import ConfigError, ToolArgumentsError
from thinkloop.core.tool import Tool, ToolContext, make_tool
from thinkloop.core.types import Skill
from thinkloop.sandbox import CommandSlots, Sandbox
from thinkloop.tools.builtin.process import command_env, run_confined
from thinkloop.tools.builtin.settings import ToolSettings, make_sandbox
from thinkloop.tools.workspace import Workspace

_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?", re.DOTALL)
INLINE_SKILLS_MAX = 5
WORKFLOW_GUIDANCE = (
    "Before doing a multi-step job by hand, call search_tools to look for a ready-made workflow "
    "or skill. Run a workflow with run_workflow; follow a skill's instructions. Fall back to the "
    "other tools only when nothing relevant is found."
)


class WorkflowArg(BaseModel):
    description: str = ""
    required: bool = True
    default: str | None = None


class Workflow(BaseModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str
    args: dict[str, WorkflowArg] = Field(default_factory=dict)
    run: str
    timeout_s: float | None = None

    @field_validator("args", mode="before")
    @classmethod
    def _short_args(cls, value: Any) -> Any:
        if isinstance(value, list):
            value = {str(v): "" for v in value}
        if isinstance(value, dict):
            return {
                k: {"description": v} if isinstance(v, str) or v is None else
                {**v, "required": v.get("required", "default" not in v)}
                for k, v in value.items()
            }
        return value

    def search_text(self) -> str:
        args = ", ".join(f"{k} ({a.description})" if a.description else k
                         for k, a in self.args.items())
        return f"{self.name.replace('_', ' ')}: {self.description}" + (
            f". Arguments: {args}" if args else "")


@dataclass(frozen=True)
class Registry:
    path: Path
    workflows: tuple[Workflow, ...]
    source: str  # the file's text, so a change invalidates the embedding cache

    def get(self, name: str) -> Workflow:
        for w in self.workflows:
            if w.name == name:
                return w
        known = ", ".join(w.name for w in self.workflows) or "none"
        raise ToolArgumentsError(f"unknown workflow {name!r}; known workflows: {known}")


def load_registry(path: Path) -> Registry:
    """Parse a workflow registry; one clear :class:`ConfigError` for any problem in it."""
    import yaml  # only when workflows or skills are configured

    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read workflow registry {path}: {exc}") from None
    items = data.get("workflows", []) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ConfigError(f"{path}: expected a list of workflows under 'workflows'")
    try:
        workflows = tuple(Workflow.model_validate(i) for i in items)
    except ValidationError as exc:
        raise ConfigError(f"{path}: invalid workflow: {exc}") from None
    names = [w.name for w in workflows]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{path}: duplicate workflow names: {', '.join(dupes)}")
    return Registry(path, workflows, text)


def load_skills(directory: Path) -> list[Skill]:
    """Every ``*.md`` in ``directory`` (sorted); front matter supplies name and description."""
    import yaml

    skills = []
    for f in sorted(directory.glob("*.md")):
        text = f.read_text(encoding="utf-8")
        meta: dict[str, Any] = {}
        if m := _FRONT.match(text):
            loaded = yaml.safe_load(m.group(1))
            meta = loaded if isinstance(loaded, dict) else {}
            text = text[m.end():]
        body = text.strip()
        first = next((ln.strip("# ").strip() for ln in body.splitlines() if ln.strip()), "")
        skills.append(Skill(str(meta.get("name") or f.stem), str(meta.get("description") or first),
                            body))
    return skills


def skills_prompt_section(skills: Sequence[Skill], max_inline: int = INLINE_SKILLS_MAX) -> str:
    """A few skills go into the prompt whole; many are only announced, to be searched."""
    return render_skills(skills, searchable=True, inline_max=max_inline) or ""


def workflow_env(workflow: Workflow, args: dict[str, str]) -> dict[str, str]:
    unknown = sorted(set(args) - set(workflow.args))
    if unknown:
        raise ToolArgumentsError(
            f"workflow {workflow.name!r} has no argument(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(workflow.args) or 'none'}")
    env = {}
    for name, spec in workflow.args.items():
        value = args.get(name, spec.default)
        if value is None:
            raise ToolArgumentsError(f"workflow {workflow.name!r} needs argument {name!r}")
        env[re.sub(r"[^A-Z0-9_]", "_", name.upper())] = str(value)
    return env


def run_workflow_tool(
    registry: Registry, workspace: Workspace, settings: ToolSettings,
    sandbox: Sandbox | None = None, slots: CommandSlots | None = None,
) -> Tool:
    """``slots``: the caps on sandboxes at once, shared with ``shell`` (a Toolbox passes one
    to both, so a run's workflows and commands count against the same cap)."""
    box = sandbox if sandbox is not None else make_sandbox(settings)
    held = slots if slots is not None else CommandSlots()

    async def run_workflow(ctx: ToolContext, name: str, args: dict[str, str] | None = None) -> str:
        """Run a workflow found with search_tools; arguments become upper-case env variables.

        Args:
            name: the workflow's name
            args: the workflow's arguments by name
        """
        workflow = registry.get(name)
        extra = workflow_env(workflow, args or {})
        folder = str(registry.path.parent.resolve())
        root = workspace.root(ctx.user_id)
        env = command_env(settings.sandbox_env, box, **extra, WORKFLOW_DIR=folder, PWD=str(root),
                          HOME=str(root))
        env["PATH"] = folder + os.pathsep + env["PATH"]
        limit = min(workflow.timeout_s or settings.workflow_timeout_s,
                    settings.shell_max_timeout_s)
        async with held.hold(ctx.run_id):
            return await run_confined(f"workflow {name!r}", workflow.run, cwd=root,
                                      timeout_s=limit, cap=settings.output_cap_bytes, env=env,
                                      sandbox=box, read_only=[Path(folder)])

    return make_tool(run_workflow, idempotent=False, needs_approval=True, trusted_output=False,
                     timeout_s=settings.shell_max_timeout_s + 5)
