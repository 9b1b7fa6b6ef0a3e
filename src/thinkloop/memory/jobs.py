"""Post-turn jobs (CortexPrism): run after the answer is out, never delaying it.

Every job is ``async (turn) -> None``. :func:`run_jobs` runs them one after another and logs
a failing job instead of raising, so one broken job neither loses the others nor breaks a run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import orjson

from thinkloop.context.focus import is_small
from thinkloop.core.model import Model, ModelSettings
from thinkloop.core.types import Message
from thinkloop.memory.layers import MemorySettings
from thinkloop.memory.profile import FactExtractor, extract_facts, fact_key, llm_facts
from thinkloop.memory.recall import embed_unless
from thinkloop.models.embedding import Embedder
from thinkloop.side_calls import side_call
from thinkloop.spotlight import as_outside, has_block
from thinkloop.store.base import MemoryBackend, ProfileBackend

log = logging.getLogger("thinkloop.memory")


@dataclass(frozen=True)
class Turn:
    """One finished run, as the post-turn jobs see it."""

    store: object
    session_id: str | None
    user_id: str | None
    owner: str
    task: str
    answer: str
    messages: tuple[Message, ...]  # the run's new messages
    settings: MemorySettings = field(default_factory=MemorySettings)
    model: Model | None = None  # for jobs that need one (summaries, LLM profile extraction)
    embedder: Embedder | None = None
    extractor: FactExtractor | None = extract_facts
    run_id: str = ""  # the run this turn was (observations are keyed by it)
    # Asked while a job would embed: True leaves the text without a vector (the agent is
    # closing and the embedding model not loaded; recall embeds the row when it reads it).
    embed_later: Callable[[], bool] | None = None


PostTurnJob = Callable[[Turn], Awaitable[None]]


def outside(turn: Turn) -> bool:
    """Did the turn read outside content (a tool's output wrapped as such)?"""
    return any(has_block(m.content) for m in turn.messages)


def kept(text: str, what: str, tainted: bool) -> str:
    """``text`` as a memory: marked as outside content when derived from some, so a later run
    that recalls it is gated as if it had read the original (guard/provenance.py)."""
    return as_outside(text, f"{what} of a turn that read outside content") if tainted else text


def _said(turn: Turn) -> str:
    # The user's own words only: tool output (text protocols) never becomes a profile fact.
    return "\n".join(m.content for m in turn.messages
                     if m.role == "user" and not m.from_loop) or turn.task


async def extract_profile(turn: Turn) -> None:
    """The patterns' facts (name, place, employer, "my X is Y"): the fallback that needs no
    model. A capable model adds open-ended facts in the session summary's call
    (:func:`summarize_session`), so that they cost no request of their own."""
    if not isinstance(turn.store, ProfileBackend):
        return
    said = _said(turn)
    if turn.extractor is not None:
        facts = turn.extractor(said)
    elif turn.model is not None:
        facts = await llm_facts(turn.model, said)
    else:
        return
    await turn.store.set_facts(turn.owner, facts)


def model_profiles(turn: Turn) -> bool:
    """Does the model extract profile facts? Only a capable one (the local tiny model's are
    noise: the patterns stay), only from a turn that read no outside content (a page must
    never write the user's profile), and only when the profile is kept."""
    return (turn.settings.model_profile and turn.model is not None
            and not is_small(turn.model) and not outside(turn)
            and isinstance(turn.store, ProfileBackend))


async def record_episode(turn: Turn) -> None:
    """The turn as an episodic memory, embedded when a model is at hand, for recall later.
    Closing, it is kept unembedded rather than wait for the model's load (10+ s of a Ctrl-C),
    begun or not: the vector retriever embeds rows without one when it reads them."""
    if not isinstance(turn.store, MemoryBackend) or not turn.answer:
        return
    text = f"User: {turn.task}\nAssistant: {turn.answer}"[: turn.settings.episode_chars]
    await turn.store.add_memory(turn.owner, "episode", "", kept(text, "episode", outside(turn)),
                                await embed_unless(turn.embedder, text, turn.embed_later))


SESSION_SUMMARY_PROMPT = (
    "Summarise this conversation turn for your future self in at most five short bullet "
    "points: what the user wanted, what was decided or done, anything left open."
)
# The profile layer's facts ride on the summary's call (no request of their own).
FACTS_MARK = "USER FACTS:"
PROFILE_ASK = (
    f"Then, on one last line, write {FACTS_MARK} followed by a JSON object of the durable "
    "facts the user stated about themselves in this turn (plans with their dates, places, "
    "people, preferences, projects), with short snake_case keys and string values, or {} "
    "if there are none."
)


def split_facts(text: str) -> tuple[str, dict[str, str]]:
    """The summary without its facts line, and the facts it names (hostile text: anything
    that is not a JSON object of strings is dropped)."""
    head, mark, tail = text.rpartition(FACTS_MARK)
    if not mark:
        return text, {}
    try:
        data = orjson.loads(tail.strip().removeprefix("```json").strip("`\n "))
    except orjson.JSONDecodeError:
        data = {}
    facts = {fact_key(str(k)): str(v)[:200] for k, v in data.items()
             if fact_key(str(k)) and isinstance(v, str | int | float) and str(v).strip()
             } if isinstance(data, dict) else {}
    return head.strip(), dict(list(facts.items())[:20])


async def summarize_session(turn: Turn) -> None:
    """Keep one summary per session, rewritten after each turn (needs a model)."""
    if turn.model is None or turn.session_id is None:
        return
    if not isinstance(turn.store, MemoryBackend):
        return
    key = f"session:{turn.session_id}"
    previous = [m for m in await turn.store.memories(turn.owner, "summary") if m.key == key]
    lines = [f"Previous summary:\n{previous[-1].content}"] if previous else []
    lines += [f"{m.role}: {m.content}" for m in turn.messages if m.content]
    profiles = model_profiles(turn)
    prompt = f"{SESSION_SUMMARY_PROMPT} {PROFILE_ASK}" if profiles else SESSION_SUMMARY_PROMPT
    response = await side_call(
        turn.model, [Message.system(prompt), Message.user("\n".join(lines))],
        purpose="memory.session_summary", settings=ModelSettings(temperature=0.3, max_tokens=500))
    text, facts = split_facts(response.message.content.strip())
    if profiles and facts:
        await turn.store.set_facts(turn.owner, facts)  # type: ignore[attr-defined]
    text = text[: turn.settings.summary_chars]
    if text:
        # Once a session read outside content, its summary says so, turn after turn.
        tainted = outside(turn) or any(has_block(m.content) for m in previous)
        await turn.store.delete_memory(turn.owner, key)
        await turn.store.add_memory(turn.owner, "summary", key, kept(text, "summary", tainted))


DEFAULT_JOBS: tuple[PostTurnJob, ...] = (extract_profile, summarize_session, record_episode)


async def run_jobs(turn: Turn, jobs: Sequence[PostTurnJob] = DEFAULT_JOBS) -> list[str]:
    """Run every job; return the names of those that failed (each one logged)."""
    failed = []
    for job in jobs:
        try:
            await job(turn)
        except Exception:
            name = getattr(job, "__name__", repr(job))
            log.exception("post-turn job %s failed for session %s", name, turn.session_id)
            failed.append(name)
    return failed
