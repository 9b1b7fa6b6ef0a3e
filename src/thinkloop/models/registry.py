"""Model strings (``provider:name``) to Model instances.

Providers register a factory per prefix. The default registry is built on demand, so importing
thinkloop creates no clients, reads no environment and imports no optional SDK: the
``anthropic`` and ``local`` factories import their provider module when called.

The registry is open: ``register(prefix, factory)`` adds a provider to a registry made in code,
and an installed package adds one for every registry with an entry point in group
``thinkloop.providers`` (its name the prefix, its object a ``factory(name, settings) -> Model``,
``settings`` the typed :class:`~thinkloop.core.settings.ProviderSettings`), so
``Agent("prefix:name")`` finds it. Packages are looked up only for a prefix no factory claims.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import EntryPoint

from thinkloop.core.errors import ConfigError, MissingCredentialsError, UnknownModelError
from thinkloop.core.model import Model
from thinkloop.core.plugins import discover
from thinkloop.core.settings import ProviderSettings, provider_settings
from thinkloop.models.presets import PRESETS, build_preset
from thinkloop.models.wrappers import FallbackModel, OverflowRecovery

Factory = Callable[[str, ProviderSettings], Model]
# What resolving takes: the typed section, or (the old form, kept for one release) the
# variables by name; None loads the settings.
Providers = ProviderSettings | Mapping[str, str] | None
ModelSpec = str | Model
GROUP = "thinkloop.providers"

log = logging.getLogger(__name__)


def anthropic_factory(name: str, settings: ProviderSettings) -> Model:
    from thinkloop.models.anthropic import build_anthropic

    return build_anthropic(name, settings)


def local_factory(name: str, settings: ProviderSettings) -> Model:
    from thinkloop.models.local import build_local

    return build_local(name, settings)


@dataclass
class ModelRegistry:
    factories: dict[str, Factory] = field(default_factory=dict)

    def register(self, prefix: str, factory: Factory) -> None:
        self.factories[prefix] = factory

    def resolve(self, spec: str, providers: Providers = None) -> Model:
        """``providers``: the provider settings (``Settings.models``); unset, they are
        loaded here."""
        settings = provider_settings(providers)
        prefix, sep, name = spec.strip().partition(":")
        factory = self.factories.get(prefix) or _installed(prefix)
        if factory is None:
            installed = {ep.name for ep in discover(GROUP)}
            known = ", ".join(sorted({*self.factories, *installed}))
            hint = "" if sep else " (model strings look like 'provider:name')"
            raise UnknownModelError(
                f"unknown model provider {prefix!r} in {spec!r}{hint}; known: {known}"
            )
        return factory(name.strip(), settings)


def _installed(prefix: str) -> Factory | None:
    """The factory an installed package registers for ``prefix``, loaded now."""
    found = [ep for ep in discover(GROUP) if ep.name == prefix]
    return _loaded(found[0]) if found else None


def _loaded(ep: EntryPoint) -> Factory:
    try:
        factory = ep.load()
    except Exception as exc:
        raise ConfigError(f"model provider {ep.name!r} ({ep.value}, entry point group {GROUP}) "
                          f"could not load: {type(exc).__name__}: {exc}") from exc
    if not callable(factory):
        raise ConfigError(f"model provider {ep.name!r} ({ep.value}) is not a factory")
    return factory  # type: ignore[no-any-return]


def default_registry() -> ModelRegistry:
    factories: dict[str, Factory] = {
        prefix: partial(build_preset, preset) for prefix, preset in PRESETS.items()
    }
    factories["anthropic"] = anthropic_factory
    factories["local"] = local_factory
    return ModelRegistry(factories)


def resolve_model(
    spec: ModelSpec | Sequence[ModelSpec],
    providers: Providers = None,
    registry: ModelRegistry | None = None,
) -> Model:
    """A model string, a Model, or a list of either (tried in order, see FallbackModel).

    Strings get context-overflow recovery. In a list, entries whose credentials are missing
    are skipped, so ``["openai:gpt-4o-mini", "local"]`` works on a machine with no key.
    """
    registry = registry or default_registry()
    if isinstance(spec, str):
        return OverflowRecovery(registry.resolve(spec, providers))
    if not isinstance(spec, Sequence):
        return spec
    models: list[Model] = []
    skipped: list[str] = []
    for item in spec:
        try:
            models.append(resolve_model(item, providers, registry))
        except MissingCredentialsError as exc:
            log.info("fallback list: skipping %s", exc)
            skipped.append(str(exc))
    if not models:
        detail = "; ".join(skipped) if skipped else "the list is empty"
        raise ConfigError(f"no usable model in the fallback list: {detail}")
    return models[0] if len(models) == 1 else FallbackModel(models)
