"""``@tool`` and ``Tool``: a Python function plus the JSON schema a model sees.

The schema comes from the signature, type hints and docstring through a pydantic model, which
also validates the model's arguments before the call. A parameter annotated ``ToolContext`` is
filled by the loop and never shown to the model.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_type_hints, overload

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model

from thinkloop.core.children import ChildRuns
from thinkloop.core.errors import ConfigError
from thinkloop.core.types import ToolSpec, Usage

# The pager's tool (tools/paging.py): offered only once a result was truncated, so the prompt
# leaves it out; the truncation note names it.
READ_MORE = "read_more"

@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may know about the run calling it."""

    run_id: str
    step: int
    call_id: str
    session_id: str | None = None
    user_id: str | None = None
    deps: Any = None
    # Let a tool publish events into its run and charge work it delegates (sub-agents).
    emit: Callable[..., None] | None = None
    charge_usage: Callable[[Usage], None] | None = None
    # The calling run's configuration (``hooks.RunConfig``): what a tool that starts runs
    # of its own (spawn_agent) must pass on: hooks and guards, tools, limits.
    run: Any = None
    # Who calls: the agent's name, and the run that started this run when it is a sub-agent.
    agent_id: str = ""
    parent_run_id: str | None = None
    # The calling run's sub-agent runs (``core.children.ChildRuns``): spawn_agent adds its
    # children there, so the run lists them and stops them when it ends.
    children: ChildRuns | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    parameters: dict[str, Any]
    context_param: str | None = None
    is_async: bool = False
    timeout_s: float | None = None
    # The tool changes or sends something (shell, file writes, messages): a person approves
    # each call first (the approval gate; the CLI asks on its terminal).
    needs_approval: bool = False
    # Safe to answer a repeated identical call from the first result.
    idempotent: bool = True
    # Provenance, the one declaration of it: False when the output can carry text from
    # outside (web, files, shell, MCP, sub-agents, messages from others). Such output is
    # scanned, wrapped and datamarked, and it taints the run (guard/provenance.py).
    trusted_output: bool = True
    # What the tool changes stays inside the user's workspace: files through the workspace's
    # no-follow opens, commands in a sandbox without network. After outside content was
    # read, the provenance gate then asks only that the request asked for the action, not
    # that every argument came from it (ProvenanceSettings.confined).
    confined: bool = False
    # How to use the tool well, for the system prompt: the "tool_guidance" section includes
    # it whenever the run has the tool (ask_human's "ask instead of guessing"), whichever
    # shell built the agent.
    guidance: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    @property
    def external(self) -> bool:
        """The older spelling of ``not trusted_output``."""
        return not self.trusted_output

    @property
    def requires_approval(self) -> bool:
        """The earlier name of :attr:`needs_approval`."""
        return self.needs_approval


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            k: _strip_titles(v)
            for k, v in schema.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    needs_approval: bool = False,
    idempotent: bool = True,
    external: bool = False,
    trusted_output: bool | None = None,
    requires_approval: bool = False,
    confined: bool = False,
    guidance: str = "",
) -> Tool:
    """Build a :class:`Tool` from a plain or async function.

    ``external=True`` is the older spelling of ``trusted_output=False``, and
    ``requires_approval`` the earlier name of ``needs_approval``.
    """
    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    param_docs = {p.arg_name: p.description or "" for p in doc.params}
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    context_param = None
    for pname, param in inspect.signature(fn).parameters.items():
        annotation = hints.get(pname, Any)
        if annotation is ToolContext:
            context_param = pname
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__}: *args/**kwargs cannot be described to a model")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, Field(default, description=param_docs.get(pname) or None))
    tool_name = name or fn.__name__
    args_model = create_model(
        f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields
    )
    parameters = _strip_titles(args_model.model_json_schema())
    parameters.setdefault("properties", {})
    text = description or "\n\n".join(
        p for p in (doc.short_description, doc.long_description) if p
    )
    return Tool(
        name=tool_name,
        description=text or tool_name,
        fn=fn,
        args_model=args_model,
        parameters=parameters,
        context_param=context_param,
        is_async=inspect.iscoroutinefunction(fn),
        timeout_s=timeout_s,
        needs_approval=needs_approval or requires_approval,
        idempotent=idempotent,
        trusted_output=(not external) if trusted_output is None else trusted_output,
        confined=confined,
        guidance=guidance,
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    needs_approval: bool = False,
    idempotent: bool = True,
    external: bool = False,
    trusted_output: bool | None = None,
    requires_approval: bool = False,
    confined: bool = False,
    guidance: str = "",
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Turn a function into a :class:`Tool`. Use bare (``@tool``) or with options."""
    if fn is not None:
        return make_tool(fn)
    return lambda f: make_tool(f, **options)


def as_tool(obj: Tool | Callable[..., Any]) -> Tool:
    if isinstance(obj, Tool):
        return obj
    if not callable(obj):  # a name, say: one clear error instead of typing's TypeError
        hint = (" (built-in tools by name go in an agent definition: "
                "AgentSpec(tools=[...]) with thinkloop.build, or agents.yaml)"
                if isinstance(obj, str) else "")
        raise ConfigError(f"a tool is a function or a Tool, not {type(obj).__name__} "
                          f"{obj!r}{hint}")
    return make_tool(obj)
