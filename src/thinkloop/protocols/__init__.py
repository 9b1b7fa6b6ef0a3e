"""Tool-call protocols: how calls are described to, and read from, a model."""

from thinkloop.protocols.auto import AutoProtocol
from thinkloop.protocols.base import Act, Answer, Malformed, Reading, ToolCallProtocol
from thinkloop.protocols.native import NativeProtocol
from thinkloop.protocols.parse import Parsed, parse_tool_calls
from thinkloop.protocols.sanitize import is_silent, sanitize_output
from thinkloop.protocols.text import JsonProtocol, TagsProtocol, TextProtocol, XmlProtocol

__all__ = ["Act", "Answer", "AutoProtocol", "JsonProtocol", "Malformed", "NativeProtocol",
           "Parsed", "Reading", "TagsProtocol", "TextProtocol", "ToolCallProtocol",
           "XmlProtocol", "get_protocol", "is_silent", "parse_tool_calls", "sanitize_output"]

_PROTOCOLS: dict[str, type[ToolCallProtocol]] = {
    "native": NativeProtocol,
    "auto": AutoProtocol,
    "json": JsonProtocol,
    "tags": TagsProtocol,
    "xml": XmlProtocol,
}


def get_protocol(name: str | ToolCallProtocol) -> ToolCallProtocol:
    """A fresh protocol for ``name`` (an instance is passed through unchanged)."""
    if not isinstance(name, str):
        return name
    factory = _PROTOCOLS.get(name)
    if factory is None:
        from thinkloop.errors import ConfigError

        raise ConfigError(
            f"unknown tool-call protocol {name!r}; known: {', '.join(_PROTOCOLS)}")
    return factory()
