"""After each round of tool calls (CortexPrism): a follow-up instruction that grows firmer
round by round, and the quartermaster's hint naming the tool that usually comes next.

The model is re-prompted with its tool results every round; CortexPrism's follow-up
instructions "escalate per round to prevent infinite tool loops". From round
``escalate_from`` (3) on, each request carries one line of three levels: check the results
(from round 3), at most one more call (half the step limit used), answer now (three quarters).
The urgency nudge (guard/nudges.py) takes over when two steps or fewer remain.

The quartermaster learns from this agent's finished runs which tool follows which: when the
last round ended with tool T and one tool N followed T in at least ``hint_min_runs`` (3)
runs and in ``hint_confidence`` (60%) of the runs where anything followed T, the request
carries a hint naming N. Both are words for one request, never history (``nudge`` events).
With a durable store (``ToolFollows``: SQLite, PostgreSQL) the counts live there, per agent,
so they survive a restart and every process serving the agent learns from all its runs;
without one they are this process's. What the store said is kept for ``FOLLOWS_TTL_S``
(another process's runs show within that), and what this agent learns is counted into what
it kept as it writes it to the store: a store round trip on every step's request was a tenth
of the default agent's CPU per model call (issue 38's profile), and dropping the kept counts
after each run instead still read the store before most requests at 200 concurrent runs
(one run or another ends every few steps).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable
from itertools import pairwise
from operator import itemgetter

from thinkloop.core.events import Nudge
from thinkloop.core.types import Message
from thinkloop.guard.nudges import NudgeSettings, notice
from thinkloop.hooks import Hook, OutputContext, ReasonContext
from thinkloop.store.sqlmanaged import ToolFollows

FOLLOW_UPS = (
    "[Round {n}] Check the tool results above against the task. Call another tool only if "
    "the answer still needs it.",
    "[Round {n}] You have called tools in {n} rounds. Stop exploring: make at most one more "
    "essential call, then answer.",
    "[Round {n}] That is too many tool rounds. Do not call tools again unless the task cannot "
    "be finished without one: give your answer now.",
)
HINT = ("[Quartermaster] After {last}, runs of this agent called {next} next in {pct}% of "
        "{runs} runs. Consider {next} if it fits this task.")
# A confident hint: the next tool, its message and the confidence its event reports.
_Hint = tuple[str, Message, float]
MAX_TOOLS = 500  # tools the table follows (a bound, whatever the tools' names)
FOLLOWS_TTL_S = 5.0  # how long what the store said about a tool's followers is kept


class RoundFollowUps:
    def __init__(self, settings: NudgeSettings | None = None,
                 store: ToolFollows | None = None) -> None:
        self.settings = settings or NudgeSettings()
        self.store = store
        # previous tool -> next tool -> runs in which next followed previous (no store)
        self.follows: defaultdict[str, Counter[str]] = defaultdict(Counter)
        # (agent, previous tool) -> (when read, what the store said): the store's counts
        self._read: dict[tuple[str, str], tuple[float, dict[str, int]]] = {}
        self._reading: dict[tuple[str, str], asyncio.Future[dict[str, int]]] = {}
        # (agent, previous tool) -> (counts' version, the hint): what the counts say after a
        # tool is worked out once per change of the counts (a run learning, a store read),
        # not before every request (a sum and a max over the followers, the hint's text).
        self._version = 0
        self._hints: dict[tuple[str, str], tuple[int, _Hint | None]] = {}

    def hooks(self) -> list[Hook]:
        return [Hook("pre_reason", self.follow_up, name="guard.rounds"),
                Hook("post_output", self.learn, name="guard.rounds.learn")]

    def level(self, rounds: int, limit: int) -> int:
        """0 (nothing to say) to 3, by the rounds of tool calls so far and the step limit."""
        start = self.settings.escalate_from
        if start <= 0 or rounds < start:
            return 0
        if 4 * rounds >= 3 * limit:
            return 3
        return 2 if 2 * rounds >= limit else 1

    async def hint(self, last: str, agent: str = "") -> tuple[str, int, int] | None:
        """(next tool, runs it followed ``last``, runs anything did) when confident."""
        after = self._known(agent, last)
        return self._confident(await self._stored(agent, last) if after is None else after)

    def _confident(self, after: dict[str, int] | Counter[str] | None
                   ) -> tuple[str, int, int] | None:
        if not after:
            return None
        runs = sum(after.values())
        # Counter.most_common(1)'s choice (the first of the largest) without a Counter.
        nxt, count = max(after.items(), key=itemgetter(1))
        s = self.settings
        if count >= s.hint_min_runs and count >= s.hint_confidence * runs:
            return nxt, count, runs
        return None

    def _known(self, agent: str, last: str) -> dict[str, int] | Counter[str] | None:
        """What followed ``last`` as far as known without a trip to the store; None: the
        store must be read (nothing kept, or kept longer than the TTL)."""
        if self.store is None:
            return self.follows.get(last) or {}
        kept = self._read.get((agent, last))
        if kept is not None and time.monotonic() - kept[0] < FOLLOWS_TTL_S:
            return kept[1]
        return None

    async def _stored(self, agent: str, last: str) -> dict[str, int]:
        """The store's counts of what followed ``last``, kept for a TTL. Runs that ask while
        a read is under way wait for that read: at 200 concurrent runs, each TTL's expiry had
        every run in its re-prompt read the store at once."""
        key = (agent, last)
        reading = self._reading.get(key)
        if reading is None:
            reading = self._reading[key] = asyncio.ensure_future(self._read_store(agent, last))
            reading.add_done_callback(lambda done: self._read_done(key, done))
        # Shielded: a run cancelled while it waits leaves the read to the others.
        return await asyncio.shield(reading)

    def _read_done(self, key: tuple[str, str], done: asyncio.Future[dict[str, int]]) -> None:
        self._reading.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved: the runs waiting on it were given it (if any)

    async def _read_store(self, agent: str, last: str) -> dict[str, int]:
        assert self.store is not None
        after = await self.store.tool_follows(agent, last)
        if len(self._read) >= MAX_TOOLS:
            self._read.clear()
        self._read[(agent, last)] = (time.monotonic(), after)
        self._version += 1
        return after

    def follow_up(self, ctx: ReasonContext) -> Awaitable[None] | None:
        """Before each request after a round of tool calls. A plain call unless the store
        must be read (at most once a TTL per tool): most requests make no coroutine."""
        steps = ctx.state.steps
        if not ctx.tools or not steps or not steps[-1].tool_calls:
            return None  # not a re-prompt after tool results (or the tool-less final call)
        limit = ctx.state.max_steps or ctx.cfg.limits.max_steps
        if limit - ctx.state.step <= self.settings.urgency_at and self.settings.urgency:
            return None  # the urgency nudge speaks now
        last = steps[-1].tool_calls[-1].name
        if not self.settings.hints:
            self._say(ctx, limit, last, None)
            return None
        agent = ctx.cfg.agent_id
        after = self._known(agent, last)
        if after is None:
            return self._follow_up_read(ctx, limit, last)
        kept = self._hints.get((agent, last))
        if kept is None or kept[0] != self._version:
            if len(self._hints) >= MAX_TOOLS:
                self._hints.clear()
            kept = self._hints[(agent, last)] = (self._version, self._hint(last, after))
        self._say(ctx, limit, last, kept[1])
        return None

    async def _follow_up_read(self, ctx: ReasonContext, limit: int, last: str) -> None:
        after = await self._stored(ctx.cfg.agent_id, last)
        self._say(ctx, limit, last, self._hint(last, after))

    def _hint(self, last: str, after: dict[str, int] | Counter[str]) -> _Hint | None:
        """The hint after ``last`` as the counts ``after`` stand, or None."""
        found = self._confident(after)
        if found is None:
            return None
        nxt, count, runs = found
        pct = round(100 * count / runs)
        return (nxt, notice(HINT.format(last=last, next=nxt, pct=pct, runs=runs)),
                round(count / runs, 3))

    def _say(self, ctx: ReasonContext, limit: int, last: str, hint: _Hint | None) -> None:
        extra: list[Message] = []
        rounds = sum(1 for s in ctx.state.steps if s.tool_calls)
        level = self.level(rounds, limit)
        if level:
            extra.append(notice(FOLLOW_UPS[level - 1].format(n=rounds)))
            ctx.emit(Nudge, kind="follow_up", level=level, rounds=rounds)
        if hint is not None and any(t.name == hint[0] for t in ctx.tools):
            nxt, message, confidence = hint
            extra.append(message)
            ctx.emit(Nudge, kind="quartermaster", after=last, next=nxt, confidence=confidence)
        if extra:
            # A new list: the history in state.messages stays exactly as it was.
            ctx.messages = [*ctx.messages, *extra]

    async def learn(self, ctx: OutputContext) -> None:
        """Count, once per finished run, each pair of tools called one after the other."""
        if ctx.status not in (None, "completed"):
            return
        names = [c.name for s in ctx.state.steps for c in s.tool_calls]
        pairs = sorted(set(pairwise(names)))
        if self.store is not None:
            agent = ctx.cfg.agent_id
            await self.store.add_tool_follows(agent, pairs)
            for prev, nxt in pairs:  # this agent's next request sees it without a read
                kept = self._read.get((agent, prev))
                if kept is not None:
                    kept[1][nxt] = kept[1].get(nxt, 0) + 1
            self._version += 1
            return
        for prev, nxt in pairs:
            if prev in self.follows or len(self.follows) < MAX_TOOLS:
                self.follows[prev][nxt] += 1
        self._version += 1
