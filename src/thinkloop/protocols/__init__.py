"""Tool-call protocols: how calls are described to, and read from, a model."""

from thinkloop.protocols.base import Act, Answer, Malformed, Reading, ToolCallProtocol
from thinkloop.protocols.native import NativeProtocol

__all__ = ["Act", "Answer", "Malformed", "NativeProtocol", "Reading", "ToolCallProtocol",
           "get_protocol"]


def get_protocol(name: str | ToolCallProtocol) -> ToolCallProtocol:
    if not isinstance(name, str):
        return name
    if name in ("native", "auto"):
        return NativeProtocol()
    from thinkloop.errors import ConfigError

    raise ConfigError(f"unknown tool-call protocol {name!r}; known: native, auto")
