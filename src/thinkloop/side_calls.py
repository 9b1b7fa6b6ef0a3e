"""Side model calls (assessment, supervisor, reflection, memory summaries and facts): one
helper that emits and counts.

Every model call outside the loop's own think step goes through :func:`side_call`: in a run
it is :meth:`HookContext.ask_model`, which emits ``llm.request`` / ``llm.response`` with
``purpose`` (so a trace shows what each extra call was for) and charges the usage to the run;
outside one (post-turn jobs run after the run reported its usage) the caller's ``Usage``
meter counts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson

from thinkloop.core.model import Model, ModelSettings
from thinkloop.core.types import Message, ModelResponse, Usage

if TYPE_CHECKING:
    from thinkloop.hooks import HookContext

SIDE_SETTINGS = ModelSettings(temperature=0.0, max_tokens=400)


@dataclass
class UsageMeter:
    """Usage of side calls made where no run counts them (post-turn jobs), by purpose."""

    by_purpose: dict[str, Usage] = field(default_factory=dict)

    def add(self, purpose: str, usage: Usage) -> None:
        self.by_purpose[purpose] = self.by_purpose.get(purpose, Usage()) + usage

    @property
    def total(self) -> Usage:
        out = Usage()
        for u in self.by_purpose.values():
            out = out + u
        return out


async def side_call(
    model: Model, messages: Sequence[Message], *, purpose: str,
    ctx: HookContext | None = None, meter: UsageMeter | None = None,
    settings: ModelSettings = SIDE_SETTINGS,
) -> ModelResponse:
    """One tool-less model call on the run's behalf, visible in its events and usage (in a
    run, through :meth:`HookContext.ask_model`, the one side-call path)."""
    if ctx is not None:
        response = await ctx.ask_model(messages, purpose=purpose, settings=settings,
                                       model=model)
    else:  # a post-turn job: no run to report to; the meter counts it
        response = await model.complete(messages, (), settings)
    if meter is not None:
        meter.add(purpose, response.usage)
    return response


def json_object(text: str) -> dict[str, object] | None:
    """The first JSON object in a model's reply (fences and prose around it tolerated)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = orjson.loads(text[start:end + 1])
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
