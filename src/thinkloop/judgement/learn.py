"""Learning after the turn (CortexPrism post-turn jobs, OrcBot step memories).

Every job is a :data:`~thinkloop.memory.jobs.PostTurnJob` run by ``memory/jobs.run_jobs``
from a ``post_output`` hook, so none of them delays the answer:

- ``reflect``: one side call names behavioural lessons; stored as ``reflection`` memories,
  deduplicated by their normalised text; ``adversarial`` adds a critical second pass;
- ``learn_skill``: a run with two or more tool calls becomes a procedural skill (the tools in
  order, argument names with values redacted, the task with its personal data redacted),
  stored under the run's owner and, with ``skills_dir``, written as a file under
  ``skills_dir/learned/<owner>``; that owner's later tasks find it through ``search_tools``
  (judgement/skills.py), nobody else's.
  Lessons and skills from a turn that read outside content are kept as outside content;
- ``extract_entities``: capitalised names (stop words filtered) become graph nodes and
  co-mention edges (``GraphBackend``, migration 5); ``pre_assess`` recalls the known
  entities a task names, with their neighbours, and the latest lessons;
- ``persist_preferences``: "I prefer ...", "always ...", "never ..." go to the profile;
- ``record_observations``: one ``observation`` memory per tool result, keyed
  ``<run id>:step-<n>`` (:func:`run_observations` lists one run's).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import orjson

from thinkloop.core.events import EntitiesRecalled
from thinkloop.core.model import Model
from thinkloop.core.tool import Tool
from thinkloop.core.types import ANSWERED, Message, Skill
from thinkloop.hooks import AssessContext, Hook, OutputContext
from thinkloop.judgement.skills import SkillLibrary, redact_personal, skill_dir
from thinkloop.memory.jobs import PostTurnJob, Turn, kept, outside, run_jobs
from thinkloop.memory.layers import owner_of
from thinkloop.side_calls import UsageMeter, json_object, side_call
from thinkloop.store.base import GraphBackend, MemoryBackend, MemoryRecord, ProfileBackend
from thinkloop.tools.builtin.embeddings import Embedder
from thinkloop.tools.workspace import atomic_write

REFLECT_PROMPT = (
    "Review this finished agent turn. Name at most three short, reusable lessons about how "
    "the agent should behave next time (what worked, what to avoid). Reply with only JSON: "
    "{\"patterns\": [\"...\"]}; an empty list when there is nothing to learn."
)
ADVERSARIAL_PROMPT = (
    "Critically review this finished agent turn as a sceptical reviewer: hunt for missed edge "
    "cases, unvalidated assumptions and security concerns. Reply with only JSON: "
    "{\"patterns\": [\"...\"]} with at most three concrete critiques, or an empty list."
)
_STOP_TEXT = (
    "a an and are as at be but by can could did do does for from had has have how i if in is it "
    "its me my no not of on or our please so that the their them then there these they this to "
    "us was we were what when where which who why will with would you your yes ok okay thanks "
    "hello hi hey monday tuesday wednesday thursday friday saturday sunday today tomorrow "
    "yesterday use find show tell give make read write check send get run list search look"
)
ENTITY_STOP_WORDS = frozenset(_STOP_TEXT.split())
_NAME = re.compile(r"\b[A-Z][\w.+-]*(?:\s+(?:of\s+|de\s+)?[A-Z][\w.+-]*)*")
_PREFERENCE = re.compile(
    r"\b(?:i\s+(?:really\s+)?(?:prefer|like|love|want|hate|dislike|don't\s+like)|"
    r"i'd\s+rather|please\s+always|always|never|don't\s+ever)\s+([^.!?\n]{3,80})", re.I)


@dataclass(frozen=True)
class LearningSettings:
    reflection: bool = True
    adversarial: bool = False
    skills: bool = True
    skills_dir: Path | None = None  # also write learned skills here (search_tools reads it)
    entities: bool = True
    preferences: bool = True
    observations: bool = True
    recall: bool = True  # pre_assess: known entities and the latest lessons
    model: Model | None = None  # for reflections (default: the run's model)
    embedder: Embedder | None = None  # for search_tools over learned skills (default MiniLM)


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


_FAILED = ("error", "denied", "not approved", "[no result", "loop detected", "message limit")


def _tool_calls(turn: Turn, *, worked: bool = False) -> list[tuple[str, tuple[str, ...]]]:
    """The turn's calls as (tool, argument names); ``worked``: only those that succeeded."""
    failed = {m.tool_call_id for m in turn.messages
              if m.role == "tool" and m.content.lower().startswith(_FAILED)}
    return [(c.name, tuple(sorted(c.arguments))) for m in turn.messages
            if m.role == "assistant" for c in m.tool_calls
            if not worked or (c.id not in failed and c.name != "search_tools")]


def _transcript(turn: Turn) -> str:
    lines = [f"Task: {turn.task}"]
    for name, args in _tool_calls(turn):
        lines.append(f"Tool call: {name}({', '.join(args)})")
    errors = [m.content[:200] for m in turn.messages if m.role == "tool"
              and m.content.lower().startswith(("error", "denied", "not approved"))]
    lines += [f"Tool error: {e}" for e in errors]
    return "\n".join([*lines, f"Answer: {turn.answer[:1500]}"])


async def _patterns(turn: Turn, prompt: str, purpose: str, meter: UsageMeter,
                    model: Model) -> list[str]:
    response = await side_call(model, [Message.system(prompt), Message.user(_transcript(turn))],
                               purpose=purpose, meter=meter)
    data = json_object(response.message.content) or {}
    found = data.get("patterns")
    lessons = [str(p).strip()[:300] for p in found if str(p).strip()][:3] \
        if isinstance(found, list) else []
    # Lessons drawn from a turn that read outside content are kept as outside content: a
    # later run that recalls one is gated as if it had read the original.
    return [kept(p, f"{purpose} lesson", outside(turn)) for p in lessons]


async def store_patterns(store: MemoryBackend, owner: str, category: str,
                         patterns: Sequence[str]) -> int:
    """Store new lessons; one whose normalised text is already there is skipped."""
    have = {_norm(r.content) for r in await store.memories(owner, "reflection")}
    added = 0
    for p in patterns:
        if _norm(p) and _norm(p) not in have:
            await store.add_memory(owner, "reflection", category, p)
            have.add(_norm(p))
            added += 1
    return added


def entities(text: str) -> list[str]:
    """Capitalised names in ``text``, stop words and lone sentence-start words dropped."""
    out: dict[str, str] = {}
    for m in _NAME.finditer(text):
        words = [w for w in m.group(0).split() if w.lower() not in ENTITY_STOP_WORDS]
        name = " ".join(words).strip(".,")
        if len(name) >= 2 and name.lower() not in ENTITY_STOP_WORDS:
            out.setdefault(name.lower(), name)
    return list(out.values())[:8]


def preferences(text: str) -> dict[str, str]:
    found = {}
    for m in _PREFERENCE.finditer(text):
        phrase = m.group(0).strip()
        key = "_".join(re.findall(r"[a-z0-9]+", m.group(1).lower())[:4])
        if key:
            found[f"preference_{key}"] = phrase
    return found


def skill_from(turn: Turn) -> Skill | None:
    calls = _tool_calls(turn, worked=True)  # the procedure: what worked, not the detours
    if len(calls) < 2:
        return None
    task = redact_personal(turn.task)
    words = re.findall(r"[a-z0-9]+", re.sub(r"<\w+>", " ", task).lower())[:6]
    name = "learned-" + "-".join(words or ["task"])
    steps = "\n".join(f"{i}. {tool}({', '.join(f'{a}=<value>' for a in args)})"
                      for i, (tool, args) in enumerate(calls, 1))
    body = (f"Procedure learned from a finished task (values redacted; fill in your own):\n"
            f"{steps}\nThen answer from what these calls returned.")
    # The order of the calls may have been steered by what the turn read: a later run that
    # follows the procedure is gated as if it had read that content (memory/jobs.py).
    return Skill(name, f"How to: {task[:200]}", kept(body, "skill", outside(turn)))


async def run_observations(store: MemoryBackend, owner: str, run_id: str) -> list[MemoryRecord]:
    """The per-step observations one run left (OrcBot's action memories)."""
    return [r for r in await store.memories(owner, "observation")
            if r.key.startswith(f"{run_id}:")]


class Learner:
    def __init__(self, settings: LearningSettings, store: object, meter: UsageMeter) -> None:
        self.settings = settings
        self.store = store
        self.meter = meter
        self.library: SkillLibrary | None = None

    def tools(self, existing: Sequence[str]) -> list[Tool]:
        """``search_tools`` over learned skills, unless the agent has its own."""
        if not self.settings.skills or "search_tools" in existing:
            return []
        embedder = self.settings.embedder
        if embedder is None:
            from thinkloop.tools.builtin.embeddings import MiniLMEmbedder

            embedder = MiniLMEmbedder()
        self.library = SkillLibrary(embedder, self.store, self.settings.skills_dir)
        return [self.library.tool()]

    def hooks(self) -> list[Hook]:
        out = [Hook("post_output", self.after_turn, name="judgement.learn")]
        if self.settings.recall:
            out.insert(0, Hook("pre_assess", self.recall, name="judgement.learn.recall"))
        return out

    def jobs(self) -> list[PostTurnJob]:
        s = self.settings
        chosen: list[tuple[bool, PostTurnJob]] = [
            (s.observations, self.record_observations), (s.skills, self.learn_skill),
            (s.entities, self.extract_entities), (s.preferences, self.persist_preferences),
            (s.reflection, self.reflect), (s.reflection and s.adversarial, self.adversarial)]
        return [job for on, job in chosen if on]

    async def after_turn(self, ctx: OutputContext) -> None:
        cfg, state = ctx.cfg, ctx.state
        owner = owner_of(cfg.user_id, cfg.session_id)
        if owner is None or ctx.status not in ANSWERED or not state.steps:
            return  # no steps: answered before any model call (ask_first), nothing to learn
        turn = Turn(self.store, cfg.session_id, cfg.user_id, owner, state.task, ctx.text,
                    tuple(state.new_messages), model=self.settings.model or cfg.model)
        turn = replace(turn, run_id=state.run_id)
        await run_jobs(turn, self.jobs())

    async def reflect(self, turn: Turn) -> None:
        if isinstance(self.store, MemoryBackend) and turn.model is not None:
            found = await _patterns(turn, REFLECT_PROMPT, "reflection", self.meter, turn.model)
            await store_patterns(self.store, turn.owner, "reflection", found)

    async def adversarial(self, turn: Turn) -> None:
        if isinstance(self.store, MemoryBackend) and turn.model is not None:
            found = await _patterns(turn, ADVERSARIAL_PROMPT, "adversarial", self.meter,
                                    turn.model)
            await store_patterns(self.store, turn.owner, "adversarial", found)

    async def learn_skill(self, turn: Turn) -> None:
        skill = skill_from(turn)
        if skill is None or not isinstance(self.store, MemoryBackend):
            return
        known = await self.store.memories(turn.owner, "skill")
        if any(orjson.loads(r.content)["body"] == skill.body for r in known):
            return  # the same procedure was learned before
        await self.store.add_memory(turn.owner, "skill", skill.name, orjson.dumps(
            {"name": skill.name, "description": skill.description, "body": skill.body}).decode())
        if self.settings.skills_dir is not None:
            described = orjson.dumps(skill.description).decode()  # JSON is valid YAML
            text = f"---\nname: {skill.name}\ndescription: {described}\n---\n{skill.body}\n"
            folder = skill_dir(self.settings.skills_dir, turn.owner)
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write(folder / f"{skill.name}.md", text.encode())
        if self.library is not None:
            await self.library.add(turn.owner, skill)

    async def extract_entities(self, turn: Turn) -> None:
        if not isinstance(self.store, GraphBackend):
            return
        said = "\n".join(m.content for m in turn.messages if m.role == "user") or turn.task
        names = entities(f"{said}\n{turn.answer}")
        if names:
            edges = [(a, "mentioned_with", b) for i, a in enumerate(names) for b in names[i + 1:]]
            await self.store.add_graph(turn.owner, names, edges)

    async def persist_preferences(self, turn: Turn) -> None:
        if not isinstance(self.store, ProfileBackend):
            return
        said = "\n".join(m.content for m in turn.messages if m.role == "user") or turn.task
        found = preferences(said)
        if found:
            await self.store.set_facts(turn.owner, found)

    async def record_observations(self, turn: Turn) -> None:
        if not isinstance(self.store, MemoryBackend):
            return
        step = 0
        for m in turn.messages:
            if m.role == "assistant" and m.tool_calls:
                step += 1
            elif m.role == "tool":
                await self.store.add_memory(
                    turn.owner, "observation", f"{turn.run_id}:step-{step}",
                    f"Observation: Tool {m.name} returned {m.content[:1000]}")

    async def recall(self, ctx: AssessContext) -> None:
        owner = owner_of(ctx.cfg.user_id, ctx.cfg.session_id)
        # Lean mode too: two store reads, and a short follow-up about a known entity
        # ("What did Acme Clinic say?") is when its edges and the lessons matter most.
        if owner is None or not self.settings.recall:
            return
        lines: list[str] = []
        if isinstance(self.store, GraphBackend):
            known = [n for n, _ in await self.store.graph_nodes(owner)
                     if re.search(rf"\b{re.escape(n)}\b", ctx.task, re.I)]
            edges = await self.store.graph_edges(owner, known) if known else []
            lines += [f"- {a} {rel.replace('_', ' ')} {b} ({w}x)" for a, rel, b, w in edges]
            if known:
                ctx.emit(EntitiesRecalled, entities=known, edges=len(edges))
        if isinstance(self.store, MemoryBackend):
            lessons = await self.store.memories(owner, "reflection", 5)
            lines += [f"- lesson ({r.key}): {r.content}" for r in lessons]
        if lines:
            ctx.system_prompt += "\n\nLEARNED FROM EARLIER TURNS:\n" + "\n".join(lines)
