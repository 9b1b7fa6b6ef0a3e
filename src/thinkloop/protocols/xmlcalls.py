"""Scanner handlers for the XML-like formats: Hermes ``<tool_call>``, CortexPrism's five,
Llama 3.1 ``<function=name>``, Qwen3-Coder, GLM and Seed-OSS parameters, Claude-style and
MiniMax-M2 ``<invoke>``, Step-3 ``<steptml:invoke>``, ``<tool_calls>`` lists (Jamba, Hunyuan,
MiniMax-M1)."""

from __future__ import annotations

import re

from thinkloop.protocols import formats as fmt
from thinkloop.protocols.scanbase import ScanBase

_BARE_NAME = re.compile(r"\s*([A-Za-z_][\w.-]{0,127})\s*")
_GLM_HEAD = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*(?=<arg_key>)")
# Tags that are prose markup or answer wrappers, never a tool named after the tag.
_NOT_TOOLS = frozenset({
    "a", "abbr", "answer", "b", "blockquote", "body", "br", "caption", "cite", "code", "context",
    "dd", "details", "div", "dl", "dt", "em", "example", "final", "h1", "h2", "h3", "h4", "h5",
    "h6", "head", "header", "html", "i", "img", "input", "kbd", "li", "observation", "ol",
    "output", "p", "pre", "q", "response", "result", "s", "small", "span", "strong", "sub",
    "summary", "sup", "system", "table", "tbody", "td", "th", "thead", "title", "tool_result",
    "tr", "u", "ul",
})
_MAX_DEPTH = 2


class XmlHandlers(ScanBase):
    """Each handler returns the end of the region it consumed, or None to decline."""

    def _function(self, m: re.Match[str]) -> int | None:
        name = m.group("fname")
        body_start = self.space(m.end())
        json_end = self._span_end(body_start) if self.at("{", body_start) else None
        if json_end is not None:
            args, err = fmt.decode_arguments(self.text[body_start:json_end])
            close = self.space(json_end)
            end = close + 11 if self.at("</function>", close) else json_end
            return self._take(fmt.Found(calls=[(name, args, err)]), end)
        after = self._after("</function>", m.end())
        if after is None:
            return None
        body_end, end = after
        body = self.text[m.end():body_end]
        args_or_none = fmt.xml_children(body) if body.strip() else {}
        if args_or_none is None:
            self._problem(f"could not read the arguments of <function={name}>", m.start())
            return self._skip(end)
        return self._take(fmt.Found(calls=[(name, args_or_none, None)]), end)

    def _xml(self, m: re.Match[str]) -> int | None:
        tag, attrs = m.group("xname").lower(), m.group("xattr") or ""
        self_closing = attrs.rstrip().endswith("/")
        attrs = attrs.rstrip().removesuffix("/")
        if tag == "tool_call_name" and not attrs:
            return self._name_then_args(m)
        # CortexPrism's attribute syntax puts the name first: <tool_call_name="read_file" ...>
        head = fmt.attributes("name" + attrs if attrs.startswith("=") else attrs)
        name = head.pop("name", None)
        if self_closing:
            if name is None:
                return None
            return self._take(fmt.Found(calls=[(name, dict(head), None)]), m.end())
        closer = f"</{m.group('xname')}>"
        body_start = self.space(m.end())
        json_end = self._span_end(body_start)
        if json_end is not None:
            close = self.space(json_end)
            # Granite-20b writes "<function_call> {...} <function_call> {...}" without closers.
            if self.at(closer, close) or close >= self.n or self.at("<" + m.group("xname"), close):
                found = self._body_calls(self.text[body_start:json_end], name, head)
                if found is not None:
                    end = close + len(closer) if self.at(closer, close) else json_end
                    return self._take(found, min(end, self.n))
        after = self._after(closer, m.end())
        if after is None:
            return None
        body_end, end = after
        found = self._body_calls(self.text[m.end():body_end], name, head)
        if found is None or not found.calls:
            self._problem(f"could not read the tool call in <{m.group('xname')}>", m.start())
            # Skip the whole unreadable region: its insides are not re-read as other calls.
            return self._skip(end)
        return self._take(found, end)

    def _body_calls(self, body: str, name: str | None, head: dict[str, str]) -> fmt.Found | None:
        if name is not None:
            if not body.strip():
                return fmt.Found(calls=[(name, dict(head), None)])
            if body.lstrip().startswith("{"):
                args, err = fmt.decode_arguments(body)
                return fmt.Found(calls=[(name, {**head, **args}, err)])
            children = fmt.xml_children(body)
            return None if children is None else fmt.Found(calls=[(name, {**head, **children},
                                                                    None)])
        found = fmt.found_in_blob(body, pythonic=True)
        if found is not None or self.depth >= _MAX_DEPTH:
            return found
        bare = _BARE_NAME.fullmatch(body)
        if bare is not None:  # GLM-4.5 with no arguments: just the name
            return fmt.Found(calls=[(bare.group(1), {}, None)])
        glm = _GLM_HEAD.match(body)
        if glm is not None:  # GLM-4.5: the name, then <arg_key>/<arg_value> pairs
            children = fmt.xml_children(body[glm.end():])
            if children is not None:
                return fmt.Found(calls=[(glm.group(1), children, None)])
        inner = type(self)(body, self.tool_names, self.depth + 1)
        inner.run()
        return inner.found if inner.found.calls else None

    def _name_then_args(self, m: re.Match[str]) -> int | None:
        after = self._after("</tool_call_name>", m.end())
        if after is None:
            return None
        name_end, end = after
        name = self.text[m.end():name_end].strip()
        i = self.space(end)
        args: dict[str, object] = {}
        err = None
        if self.at("<tool_call_args>", i):
            body_end, end = self._after("</tool_call_args>", i + 16) or (self.n, self.n)
            body = self.text[i + 16:body_end]
            children = None if body.lstrip().startswith("{") else fmt.xml_children(body)
            args, err = (children, None) if children is not None else fmt.decode_arguments(body)
        if not name:
            self._problem("empty <tool_call_name>", m.start())
            return None
        return self._take(fmt.Found(calls=[(name, args, err)]), end)

    def _named_tag(self, m: re.Match[str]) -> int | None:
        name = m.group("gname")
        if self.tool_names is not None:
            if name not in self.tool_names:
                return None
        elif name.lower() in _NOT_TOOLS:
            return None
        span = self.closing_tag(name, m.end())
        if span is None:
            return None
        body = self.text[m.end():span[0]]
        args = fmt.xml_children(body)
        if args is None and body.strip() == "" and self.tool_names is not None:
            args = {}
        if args is None or (not args and self.tool_names is None):
            return None
        return self._take(fmt.Found(calls=[(name, args, None)]), span[1])
