"""Tool-call protocols by name: the built-ins, any an installed package adds, any you add.

A package adds one with an entry point in group ``thinkloop.protocols`` (the name is the
protocol's, the object a zero-argument factory: usually the class), so ``Agent(protocol=
"name")`` and ``thinkloop run --protocol name`` find it. The registry is a plain object made on
demand, nothing is global: ``ProtocolRegistry()`` starts with the built-ins,
``register_protocol`` adds a factory to it; ``Agent(protocol=...)`` also takes an instance.
Installed packages are looked up only for a name that is not registered (no scan for the
built-ins); one that cannot load is a :class:`ConfigError` naming it, then and only then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint

from thinkloop.core.errors import ConfigError
from thinkloop.core.plugins import discover
from thinkloop.core.protocol import ToolCallProtocol
from thinkloop.protocols.auto import AutoProtocol
from thinkloop.protocols.native import NativeProtocol
from thinkloop.protocols.text import JsonProtocol, TagsProtocol, XmlProtocol

ProtocolFactory = Callable[[], ToolCallProtocol]
GROUP = "thinkloop.protocols"
BUILTIN: dict[str, ProtocolFactory] = {
    "native": NativeProtocol,
    "auto": AutoProtocol,
    "json": JsonProtocol,
    "tags": TagsProtocol,
    "xml": XmlProtocol,
}


def _from_entry_point(ep: EntryPoint) -> ProtocolFactory:
    def make() -> ToolCallProtocol:
        try:
            factory = ep.load()
            protocol: ToolCallProtocol = factory()
        except Exception as exc:
            raise ConfigError(f"tool-call protocol {ep.name!r} ({ep.value}, entry point group "
                              f"{GROUP}) could not load: {type(exc).__name__}: {exc}") from exc
        return protocol

    return make


@dataclass
class ProtocolRegistry:
    """Protocol names to factories; each lookup makes a fresh protocol."""

    factories: dict[str, ProtocolFactory] = field(default_factory=lambda: dict(BUILTIN))

    def register_protocol(self, name: str, factory: ProtocolFactory) -> None:
        self.factories[name] = factory

    def create(self, name: str) -> ToolCallProtocol:
        factory = self.factories.get(name) or self._installed(name)
        if factory is None:
            raise ConfigError(
                f"unknown tool-call protocol {name!r}; known: {', '.join(self.names())}")
        return factory()

    def names(self) -> list[str]:
        """Registered names, then those installed packages add."""
        installed = [ep.name for ep in discover(GROUP)]
        return [*self.factories, *(n for n in installed if n not in self.factories)]

    @staticmethod
    def _installed(name: str) -> ProtocolFactory | None:
        found = [ep for ep in discover(GROUP) if ep.name == name]
        return _from_entry_point(found[0]) if found else None
