"""Behaviour added around any Model: context-overflow recovery and fallback across models.

Both are Models themselves, so they stack: ``FallbackModel([OverflowRecovery(a), b])``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace

from thinkloop.core.errors import ContextOverflowError, ModelError
from thinkloop.core.model import Model, ModelSettings, input_kinds
from thinkloop.core.types import Message, ModelResponse, TextDelta, ToolSpec
from thinkloop.models.catalog import ModelFacts, facts_of, facts_of_all
from thinkloop.models.sanitize import trim_history

log = logging.getLogger(__name__)

Trimmer = Callable[[Sequence[Message]], Sequence[Message] | None]


class OverflowRecovery:
    """On :class:`ContextOverflowError`, trim the history once and ask again (Stingyclaw).

    The trimmed history is only what this request sends; the run keeps its full history.
    ``trim`` returns ``None`` when it cannot cut anything, and the error then propagates.
    """

    def __init__(self, inner: Model, trim: Trimmer = trim_history) -> None:
        self.inner = inner
        self.name = inner.name
        self.trim = trim

    @property
    def facts(self) -> ModelFacts:
        """The wrapped model's (its window, its price)."""
        return facts_of(self.inner)

    def _trimmed(self, messages: Sequence[Message], exc: ContextOverflowError) -> (
        Sequence[Message]
    ):
        trimmed = self.trim(messages)
        if trimmed is None:
            raise exc
        log.warning(
            "%s: context overflow; retrying once with %d of %d messages",
            self.name, len(trimmed), len(messages),
        )
        return trimmed

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> ModelResponse:
        try:
            return await self.inner.complete(messages, tools, settings)
        except ContextOverflowError as exc:
            trimmed = self._trimmed(messages, exc)
        return await self.inner.complete(trimmed, tools, settings)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        # Overflow is reported before any output, so nothing yielded has to be taken back.
        started = False
        try:
            async for item in self.inner.stream(messages, tools, settings):
                started = True
                yield item
            return
        except ContextOverflowError as exc:
            if started:
                raise
            trimmed = self._trimmed(messages, exc)
        async for item in self.inner.stream(trimmed, tools, settings):
            yield item

    async def aclose(self) -> None:
        await _aclose(self.inner)


class FallbackModel:
    """Try each model in order; the next one answers when one fails after its own retries.

    ``ModelResponse.model`` names the model that answered. A stream that already yielded
    output is not restarted on another model: its error propagates.
    """

    def __init__(self, models: Sequence[Model]) -> None:
        if not models:
            from thinkloop.core.errors import ConfigError

            raise ConfigError("a fallback list needs at least one model")
        self.models = list(models)
        self.name = " -> ".join(m.name for m in self.models)

    @property
    def facts(self) -> ModelFacts:
        return facts_of_all(self.models)

    def _give_up(self, errors: list[tuple[str, ModelError]]) -> ModelError:
        if len(errors) == 1:
            return errors[0][1]
        lines = "; ".join(f"{name}: {exc}" for name, exc in errors)
        err = ModelError(f"all {len(errors)} models failed: {lines}")
        err.__cause__ = errors[-1][1]
        return err

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> ModelResponse:
        errors: list[tuple[str, ModelError]] = []
        for model in self.models:
            try:
                response = await model.complete(messages, tools, settings)
            except ModelError as exc:
                log.warning("%s failed (%s); trying the next model", model.name, exc)
                errors.append((model.name, exc))
                continue
            return replace(response, model=model.name, fallbacks=_failed(errors))
        raise self._give_up(errors)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        errors: list[tuple[str, ModelError]] = []
        for model in self.models:
            started = False
            try:
                async for item in model.stream(messages, tools, settings):
                    started = True
                    if isinstance(item, ModelResponse):
                        item = replace(item, model=model.name, fallbacks=_failed(errors))
                    yield item
                return
            except ModelError as exc:
                if started:
                    raise
                log.warning("%s failed (%s); trying the next model", model.name, exc)
                errors.append((model.name, exc))
        raise self._give_up(errors)

    @property
    def input_kinds(self) -> frozenset[str]:
        """Only what every model in the list reads, since any of them may answer."""
        kinds = [input_kinds(m) for m in self.models]
        return frozenset.intersection(*kinds)

    async def aclose(self) -> None:
        for m in self.models:
            await _aclose(m)


def _failed(errors: list[tuple[str, ModelError]]) -> tuple[tuple[str, str], ...]:
    # What the run's ``model.fallback`` event says: each model that failed and why.
    return tuple((name, str(exc)[:500]) for name, exc in errors)


async def _aclose(model: Model) -> None:
    close = getattr(model, "aclose", None)
    if close is not None:
        await close()
