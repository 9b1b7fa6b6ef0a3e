"""Hook stages around the loop (CortexPrism's ten).

A hook is a plain sync or async function of one argument, the typed context of its stage. It
may observe, modify the context's mutable fields, or stop the run with ``ctx.stop(reason)``.
Built-in guards, memory injection and post-turn jobs are hooks too, so the loop itself stays a
short list of phases.

==============  =====================================  ==========================================
stage           when                                   context (mutable fields)
==============  =====================================  ==========================================
pre_assess      before anything, once per run          AssessContext (task, system_prompt)
post_assess     after assessment, before step 1        AssessContext
pre_reason      before each model call                 ReasonContext (messages, tools, settings)
post_reason     after each model call                  ReasonContext (+ response)
pre_tool        before each tool call                  ToolHookContext (call; set result to skip)
post_tool       after each tool call                   ToolHookContext (result)
pre_reflect     before a final answer is accepted      ReflectContext (text; ``reject`` to go on)
post_reflect    after it was accepted                  ReflectContext
pre_output      before the result is delivered         OutputContext (text, output, silent)
post_output     after the run ended, off the hot path  OutputContext
==============  =====================================  ==========================================

A hook that raises is reported as a ``hook.failed`` event and skipped, unless registered with
``critical=True``, in which case the run fails. A stop at ``pre_output`` withholds the answer
(unless the hook wrote a replacement); ``post_output`` runs after delivery and cannot stop.

Installed packages register hooks for every agent through the entry point group
``thinkloop.hooks`` (see :func:`entry_point_hooks`); they run before the agent's own hooks.
``Agent(plugins=False)`` leaves them out.
"""

from thinkloop.core.contexts import (
    AssessContext,
    HookContext,
    OutputContext,
    ReasonContext,
    ReflectContext,
    ToolHookContext,
)
from thinkloop.core.errors import HookFailed  # its earlier import path
from thinkloop.core.registry import (
    ENTRY_POINT_GROUP,
    STAGES,
    Hook,
    HookFn,
    Hooks,
    HookSpec,
    Stage,
    entry_point_hooks,
    load_plugin_hooks,
    normalise,
)
from thinkloop.core.run import Limits, Recovered, Resumption, RunConfig, RunState

__all__ = [
    "ENTRY_POINT_GROUP",
    "STAGES",
    "AssessContext",
    "Hook",
    "HookContext",
    "HookFailed",
    "HookFn",
    "HookSpec",
    "Hooks",
    "Limits",
    "OutputContext",
    "ReasonContext",
    "Recovered",
    "ReflectContext",
    "Resumption",
    "RunConfig",
    "RunState",
    "Stage",
    "ToolHookContext",
    "entry_point_hooks",
    "load_plugin_hooks",
    "normalise",
]
