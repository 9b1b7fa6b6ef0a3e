"""An open agent's per-user bootstrap files kept in the store (GoClaw's managed mode).

An "open" agent gives every user their own IDENTITY.md, SOUL.md, AGENTS.md, TOOLS.md and
USER.md. Without a store they live on disk (``users/<user>/`` under the agent's directory);
with one (the gateway, ``thinkloop run`` with its default store) they live in the store, per
agent AND per user, so every process serving the agent reads the same copy. On a user's first
run their copy is seeded from the agent's own files (the store's, else the disk's, else the
templates) and the first-run greeting joins the prompt; seeding never overwrites an edit.

The hook runs before anything else of the run (``pre_assess``): it reads the user's files,
seeds them when missing, and puts the user's prompt in place of the agent-level one. A run
that skips that stage (resumed after an approval pause, or after its process died) gets the
same at its first model call (``pre_reason``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from thinkloop.context.bootstrap import Bootstrap
from thinkloop.core.contexts import AssessContext, ReasonContext
from thinkloop.core.registry import Hook
from thinkloop.core.types import Message
from thinkloop.store.sqlmanaged import UserFiles


class StoredUserFiles:
    """The ``pre_assess`` hook of an open agent whose users' files live in ``store``."""

    def __init__(self, store: UserFiles, bootstrap: Bootstrap) -> None:
        self.store = store
        self.bootstrap = bootstrap

    def hooks(self) -> list[Hook]:
        return [Hook("pre_assess", self.load, critical=True, name="context.user_files"),
                Hook("pre_reason", self.resumed, critical=True,
                     name="context.user_files.resumed")]

    async def load(self, ctx: AssessContext) -> None:
        cfg = ctx.cfg
        if cfg.user_id is None or cfg.reprompt is None:
            return  # no user: the agent-level files, as the prompt already has them
        prompt = await self.prompt(cfg.agent_id, cfg.user_id, cfg.reprompt)
        # A hook before this one may have added to the prompt: keep what it added.
        ctx.system_prompt = (ctx.system_prompt.replace(cfg.system_prompt, prompt, 1)
                             if cfg.system_prompt in ctx.system_prompt else prompt)

    async def resumed(self, ctx: ReasonContext) -> None:
        """A run that did not start here (no ``pre_assess``) still has the agent-level prompt
        in its history: the user's goes in its place, for this request and the next."""
        cfg, state = ctx.cfg, ctx.state
        if cfg.user_id is None or cfg.reprompt is None or not state.messages:
            return
        head = state.messages[0]
        if head.role != "system" or head.content != cfg.system_prompt:
            return  # the user's prompt is in place already (or another hook's)
        prompt = await self.prompt(cfg.agent_id, cfg.user_id, cfg.reprompt)
        state.messages[0] = Message.system(prompt)
        ctx.messages = [Message.system(m.content.replace(cfg.system_prompt, prompt, 1))
                        if i == 0 and m.role == "system" else m
                        for i, m in enumerate(ctx.messages)]

    async def prompt(self, agent: str, user_id: str,
                     reprompt: Callable[[Mapping[str, str], bool], str]) -> str:
        """The run's prompt with the user's files, seeding those they do not have yet."""
        files = await self.store.user_files(agent, user_id)
        defaults = self.bootstrap.defaults(agent)
        created: list[str] = []
        if any(name not in files for name in defaults):
            created = await self.store.seed_user_files(
                agent, user_id, {n: t for n, t in defaults.items() if n not in files})
            files = await self.store.user_files(agent, user_id)
        return reprompt(files, "USER.md" in created)
