"""Model strings (``provider:name``) to Model instances.

Providers register a factory per prefix. The default registry is built on demand, so importing
thinkloop creates no clients and reads no environment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from thinkloop.errors import ConfigError, UnknownModelError
from thinkloop.models.base import Model
from thinkloop.models.openai_compat import OpenAICompatModel

Factory = Callable[[str, Mapping[str, str]], Model]

OPENAI_DEFAULT_BASE = "https://api.openai.com/v1"


def openai_factory(name: str, env: Mapping[str, str]) -> Model:
    base_url = env.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE
    key = env.get("OPENAI_API_KEY")
    if not key and base_url == OPENAI_DEFAULT_BASE:
        raise ConfigError(
            f"model 'openai:{name}' needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)"
        )
    if not name:
        raise ConfigError("model string 'openai:' needs a model name, e.g. 'openai:gpt-4o-mini'")
    return OpenAICompatModel(name, base_url=base_url, api_key=key, name=f"openai:{name}")


@dataclass
class ModelRegistry:
    factories: dict[str, Factory] = field(default_factory=dict)

    def register(self, prefix: str, factory: Factory) -> None:
        self.factories[prefix] = factory

    def resolve(self, spec: str, env: Mapping[str, str] | None = None) -> Model:
        env = os.environ if env is None else env
        prefix, sep, name = spec.partition(":")
        if prefix not in self.factories:
            known = ", ".join(sorted(self.factories))
            hint = "" if sep else " (model strings look like 'provider:name')"
            raise UnknownModelError(
                f"unknown model provider {prefix!r} in {spec!r}{hint}; known: {known}"
            )
        return self.factories[prefix](name, env)


def default_registry() -> ModelRegistry:
    return ModelRegistry({"openai": openai_factory})


def resolve_model(spec: str | Model, env: Mapping[str, str] | None = None) -> Model:
    if not isinstance(spec, str):
        return spec
    return default_registry().resolve(spec, env)
