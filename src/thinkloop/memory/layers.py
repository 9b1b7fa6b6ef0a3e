"""The memory layers injected into a run's system prompt (UrchinLoop's "Load Memory").

Loading is one async function over the store; rendering is a list of small section functions,
one per layer, each ``(view, settings) -> str`` (empty when the layer has nothing). Recent
messages, the fifth layer, are the session history itself, bounded by the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from thinkloop.store.base import MemoryBackend, MemoryRecord, ProfileBackend, SessionAdmin

MEMORY_HEADER = "# Memory"


@dataclass(frozen=True)
class MemorySettings:
    condensed_chars: int = 4000
    recent_messages: int = 30
    summaries: int = 20
    summary_chars: int = 1500
    manual_limit: int = 200
    recall_k: int = 5
    episode_chars: int = 1000
    # Auto-compaction between runs (GoClaw section 7).
    compact_after_messages: int = 50
    compact_window_ratio: float = 0.75
    # UrchinLoop keeps the 30 most recent messages verbatim after summarising the rest.
    keep_after_compaction: int = 30
    flush_steps: int = 5
    flush_timeout_s: float = 90.0
    summary_timeout_s: float = 120.0
    # A capable model adds the facts the user states about themselves to the profile
    # (asked in the session summary's call); the patterns stay the fallback.
    model_profile: bool = True


@dataclass(frozen=True)
class MemoryView:
    """Everything remembered that is relevant to one run."""

    condensed: str = ""
    profile: dict[str, str] = field(default_factory=dict)
    summaries: tuple[str, ...] = ()
    manual: tuple[MemoryRecord, ...] = ()
    recalled: tuple[MemoryRecord, ...] = ()


def owner_of(user_id: str | None, session_id: str | None) -> str | None:
    """Memories belong to the user when known, else to the session."""
    if user_id:
        return f"user:{user_id}"
    return f"session:{session_id}" if session_id else None


async def load_view(
    store: object,
    session_id: str | None,
    owner: str,
    settings: MemorySettings,
    recalled: Sequence[MemoryRecord] = (),
) -> MemoryView:
    condensed = ""
    if session_id and isinstance(store, SessionAdmin):
        info = await store.session_info(session_id)
        condensed = info.summary if info else ""
    profile = await store.profile(owner) if isinstance(store, ProfileBackend) else {}
    summaries: tuple[str, ...] = ()
    manual: tuple[MemoryRecord, ...] = ()
    if isinstance(store, MemoryBackend):
        recs = await store.memories(owner, "summary", settings.summaries)
        summaries = tuple(r.content for r in recs)
        manual = tuple(await store.memories(owner, "manual", settings.manual_limit))
    shown = {r.id for r in manual}
    return MemoryView(condensed, profile, summaries, manual,
                      tuple(r for r in recalled if r.id not in shown))


Section = Callable[[MemoryView, MemorySettings], str]


def condensed_section(view: MemoryView, s: MemorySettings) -> str:
    text = view.condensed[: s.condensed_chars]
    return f"## Earlier in this conversation (condensed)\n{text}" if text else ""


def profile_section(view: MemoryView, s: MemorySettings) -> str:
    if not view.profile:
        return ""
    lines = "\n".join(f"- {k.replace('_', ' ')}: {v}" for k, v in view.profile.items())
    return f"## What you know about the user\n{lines}"


def summaries_section(view: MemoryView, s: MemorySettings) -> str:
    if not view.summaries:
        return ""
    # Summaries are often bullet lists already: one paragraph each, no extra bullet.
    body = "\n\n".join(t[: s.summary_chars] for t in view.summaries[-s.summaries :])
    return f"## Summaries of past sessions\n{body}"


def manual_section(view: MemoryView, s: MemorySettings) -> str:
    if not view.manual:
        return ""
    body = "\n".join(
        f"- [{r.key or r.id}] {r.content}" for r in view.manual[-s.manual_limit :]
    )
    return f"## Saved memories (remember / forget)\n{body}"


def recall_section(view: MemoryView, s: MemorySettings) -> str:
    if not view.recalled:
        return ""
    body = "\n".join(f"- ({r.kind}) {r.content[: s.episode_chars]}" for r in view.recalled)
    return f"## Possibly relevant memories\n{body}"


DEFAULT_SECTIONS: tuple[Section, ...] = (
    condensed_section,
    profile_section,
    summaries_section,
    manual_section,
    recall_section,
)


def render(
    view: MemoryView, settings: MemorySettings, sections: Sequence[Section] = DEFAULT_SECTIONS
) -> str:
    parts = [text for section in sections if (text := section(view, settings))]
    return "\n\n".join([MEMORY_HEADER, *parts]) if parts else ""
