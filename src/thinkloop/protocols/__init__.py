"""Tool-call protocols: how calls are described to, and read from, a model."""

from thinkloop.core.protocol import Act, Answer, Malformed, Reading, ToolCallProtocol
from thinkloop.protocols.auto import AutoProtocol
from thinkloop.protocols.native import NativeProtocol
from thinkloop.protocols.parse import Parsed, parse_tool_calls
from thinkloop.protocols.registry import ProtocolFactory, ProtocolRegistry
from thinkloop.protocols.sanitize import is_silent, sanitize_output
from thinkloop.protocols.text import JsonProtocol, TagsProtocol, TextProtocol, XmlProtocol

__all__ = ["Act", "Answer", "AutoProtocol", "JsonProtocol", "Malformed", "NativeProtocol",
           "Parsed", "ProtocolFactory", "ProtocolRegistry", "Reading", "TagsProtocol",
           "TextProtocol", "ToolCallProtocol", "XmlProtocol", "get_protocol", "is_silent",
           "parse_tool_calls", "sanitize_output"]


def get_protocol(
    name: str | ToolCallProtocol, registry: ProtocolRegistry | None = None
) -> ToolCallProtocol:
    """A fresh protocol for ``name`` (an instance is passed through unchanged): from
    ``registry``, else the built-ins and the installed packages' (``thinkloop.protocols``)."""
    if not isinstance(name, str):
        return name
    return (registry or ProtocolRegistry()).create(name)
