"""Learned skills are private: each owner (user, else session) searches its own.

``search_tools`` here ranks the skill files of ``skills_dir`` (written by whoever configures
the agent, shared by everyone) and the skills *this* owner's runs learned (stored under the
owner, kind ``skill``; written as files under ``skills_dir/learned/<owner>/``). A skill keeps
the procedure, never the task's personal data: its description is the task with names,
e-mail addresses, phone and account numbers and health terms replaced by placeholders.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import OrderedDict
from pathlib import Path

import orjson

from thinkloop.memory.layers import owner_of
from thinkloop.store.base import MemoryBackend
from thinkloop.tools.base import Tool, ToolContext, make_tool
from thinkloop.tools.builtin.embeddings import Embedder
from thinkloop.tools.builtin.toolsearch import Entry, ToolIndex, render_hit
from thinkloop.tools.builtin.workflows import load_skills
from thinkloop.types import Skill

_PERSONAL: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.I), mark) for p, mark in (
    (r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", "<email>"),
    (r"\b[a-z]{2}\d{2}(?:\s?[a-z0-9]{4}){2,7}(?:\s?[a-z0-9]{1,4})?\b", "<account>"),
    (r"\+?\d[\d ()./-]{6,}\d", "<number>"),
    (r"\b(?:lab results?|blood (?:test|work|pressure)|diagnos\w*|diabet\w*|cancer|tumou?r|hiv|"
     r"aids|pregnan\w*|depress\w*|anxiety|medicat\w*|prescri\w*|therap\w*|surger\w*|hba1c|"
     r"cholesterol|insulin|allerg\w*|disease|symptoms?|illness|mental health|asthma|covid\w*|"
     r"chemo\w*|dementia|alzheimer\w*|psychiatr\w*|std|sti|hepatitis|epilep\w*|pathology|"
     r"biopsy|mri|x-ray|vaccin\w*)\b", "<health>"),
    ))
# Capitalised words after the first of a sentence: names of people, places, companies.
_NAME = re.compile(r"(?<=[\w,;:] )[A-Z][\w'-]*(?:\s+(?:de |van |von |of )?[A-Z][\w'-]*)*")
MAX_OWNERS = 256  # indexes kept in memory; the least recently searched is dropped first


def redact_personal(text: str) -> str:
    """``text`` with personal data replaced by placeholders (``<name>``, ``<email>``, ...)."""
    for pattern, mark in _PERSONAL:
        text = pattern.sub(mark, text)
    return _NAME.sub("<name>", text)


def skill_dir(base: Path, owner: str) -> Path:
    """Where one owner's learned skill files go (a digest: owners can hold any character)."""
    return base / "learned" / hashlib.sha256(owner.encode()).hexdigest()[:24]


class SkillLibrary:
    """Per-owner ``search_tools`` indexes over shared and learned skills."""

    def __init__(self, embedder: Embedder, store: object, skills_dir: Path | None) -> None:
        self.embedder = embedder
        self.store = store
        self.skills_dir = skills_dir
        self._indexes: OrderedDict[str, ToolIndex] = OrderedDict()
        self._lock = asyncio.Lock()

    async def index(self, owner: str | None) -> ToolIndex:
        key = owner or ""
        async with self._lock:
            if key in self._indexes:
                self._indexes.move_to_end(key)
                return self._indexes[key]
            skills = await self._skills(owner)
            index = ToolIndex([Entry("skill", s.name, s.search_text(), s) for s in skills],
                              self.embedder)
            self._indexes[key] = index
            while len(self._indexes) > MAX_OWNERS:
                self._indexes.popitem(last=False)
            return index

    async def _skills(self, owner: str | None) -> list[Skill]:
        base = self.skills_dir
        skills = await asyncio.to_thread(load_skills, base) if base and base.is_dir() else []
        if owner is not None and isinstance(self.store, MemoryBackend):
            for r in await self.store.memories(owner, "skill"):
                data = orjson.loads(r.content)
                skills.append(Skill(data["name"], data["description"], data["body"]))
        return list({s.name: s for s in skills}.values())

    async def add(self, owner: str, skill: Skill) -> None:
        async with self._lock:
            index = self._indexes.get(owner)
        if index is not None:
            index.add([Entry("skill", skill.name, skill.search_text(), skill)])

    def tool(self) -> Tool:
        async def search_tools(ctx: ToolContext, query: str, limit: int = 3) -> str:
            """Find skills (written instructions, some learned from your earlier tasks) for a
            job, by meaning. Use before building something by hand.

            Args:
                query: what you want to do, in plain words
                limit: how many results at most
            """
            index = await self.index(owner_of(ctx.user_id, ctx.session_id))
            hits = await asyncio.to_thread(index.search, query, max(1, min(limit, 10)))
            if not hits:
                return f"nothing relevant found for {query!r}; use the built-in tools"
            return "\n\n".join(render_hit(h) for h in hits)

        # The first search may load the embedding model.
        return make_tool(search_tools, timeout_s=180.0)
