"""Lenient JSON for model output: strict first, then a one-pass repair.

Models write almost-JSON: raw newlines inside strings, unquoted keys, single quotes, trailing
commas, Python literals, a closing brace lost at the end of the output. ``repair_json`` rewrites
such text into strict JSON in a single left-to-right pass (no backtracking, no recursion), so
its cost is linear even on adversarial input. The ``json-repair`` package was measured and
rejected: it went quadratic on long unterminated strings (13.7 s for 1 MB).

``match_brackets`` pairs every ``{``/``[`` with its closer in one pass over the whole reply, so
the parser finds where a JSON value ends by a lookup instead of walking from every brace.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from thinkloop.core.errors import JsonRepairError

_LITERALS = {"true": "true", "false": "false", "null": "null", "True": "true",
             "False": "false", "None": "null"}
_WORD = re.compile(r"[A-Za-z_$][\w$.-]*")
_NUMBER = re.compile(r"[-+]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_SPACE = re.compile(r"\s*")
_PLAIN_DQ = re.compile(r'[^"\\\x00-\x1f]+')
_PLAIN_SQ = re.compile(r"[^'\"\\\x00-\x1f]+")
_ESCAPES = frozenset('"\\/bfnrtu')
_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CLOSER = {"{": "}", "[": "]"}
_SPECIAL = re.compile(r"""[{}\[\]"'\\]""")
_OPENER = re.compile(r"[{\[]")
# "(" and "=" too: pythonic calls write strings as arguments, ``[f(a="x]")]``.
_STRING_CAN_START = frozenset("{[,:(=")


def loads_lenient(text: str, *, complete: bool = False) -> Any:
    """Decode ``text`` as JSON, repairing the usual model mistakes; ValueError if hopeless.

    ``complete``: text that ends inside a string was cut off (a stream that stopped, a
    token limit): refuse it rather than run a call with a truncated value.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return orjson.loads(repair_json(text, complete=complete))
    except orjson.JSONDecodeError as exc:
        raise JsonRepairError(f"invalid JSON: {exc}") from None


def _read_string(text: str, i: int, out: list[str]) -> int:
    """Copy the string opening at ``text[i]`` as a double-quoted JSON string; return its end."""
    quote = text[i]
    plain = _PLAIN_DQ if quote == '"' else _PLAIN_SQ
    n = len(text)
    out.append('"')
    i += 1
    while i < n:
        m = plain.match(text, i)
        if m:
            out.append(m.group())
            i = m.end()
            if i >= n:
                break
        ch = text[i]
        if ch == quote:
            out.append('"')
            return i + 1
        if ch == "\\":
            nxt = text[i + 1] if i + 1 < n else "\\"
            if nxt == "'" and quote == "'":
                out.append("'")
            elif nxt in _ESCAPES:
                out.append("\\" + nxt)
            else:
                # Not a JSON escape: keep the backslash as a literal character.
                out.append("\\\\")
                i += 1
                continue
            i += 2
            continue
        if ch == '"':
            out.append('\\"')
        else:
            out.append(_CONTROL.get(ch) or f"\\u{ord(ch):04x}")
        i += 1
    out.append('"')  # unterminated: the output ended inside the string
    return n


def _closed_at_end(text: str, opened: int) -> bool:
    """Whether the string opened at ``opened``, which reached the end of ``text``, was closed
    by the last character (its quote, not escaped)."""
    last = len(text) - 1
    if last <= opened or text[last] != text[opened]:
        return False
    body = text[opened + 1:last]
    return (len(body) - len(body.rstrip("\\"))) % 2 == 0


def repair_json(text: str, *, complete: bool = False) -> str:
    """Rewrite almost-JSON as strict JSON in one pass; raise JsonRepairError if impossible
    (and, with ``complete``, if the text ends inside a string)."""
    out: list[str] = []
    stack: list[str] = []
    pending_comma = False
    i, n = 0, len(text)
    while i < n:
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if i >= n:
            break
        ch = text[i]
        if ch == ",":
            pending_comma = True
            i += 1
            continue
        if ch in "}]":
            if not stack or _CLOSER[stack[-1]] != ch:
                raise JsonRepairError(f"unexpected {ch!r} at {i}")
            stack.pop()
            out.append(ch)
            pending_comma = False
            i += 1
            continue
        if pending_comma or (ch != ":" and out and out[-1][-1] not in "{[,:"):
            # A value right after a value: the model forgot the comma between them.
            out.append(",")
            pending_comma = False
        if ch in "{[":
            stack.append(ch)
            out.append(ch)
            i += 1
        elif ch == ":":
            out.append(":")
            i += 1
        elif ch in "\"'":
            opened = i
            i = _read_string(text, i, out)
            if complete and i >= n and not _closed_at_end(text, opened):
                raise JsonRepairError("the text ends inside a string: it was cut off")
        elif (m := _NUMBER.match(text, i)) and m.end() > i:
            out.append(m.group().lstrip("+").replace("_", ""))
            i = m.end()
        elif m := _WORD.match(text, i):
            i = m.end()
            word = m.group()
            after = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            if after < n and text[after] == ":":
                out.append(orjson.dumps(word).decode())
            elif word in _LITERALS:
                out.append(_LITERALS[word])
            else:
                raise JsonRepairError(f"bare word {word[:40]!r} at {m.start()}")
        else:
            raise JsonRepairError(f"unexpected {ch!r} at {i}")
    if out and out[-1] == ":":
        out.append("null")
    out.extend(_CLOSER[c] for c in reversed(stack))
    return "".join(out)


def match_brackets(text: str) -> dict[int, int]:
    """Map the index of each ``{``/``[`` to the index of its closer, in one pass.

    Quotes start a string only inside brackets and only where JSON or a Python call allows
    one (after ``{ [ , : ( =``), so apostrophes in prose do not derail the pairing. A closer
    that does not match the innermost opener is ignored; unmatched openers are absent from the
    map.
    """
    matcher = BracketMatcher()
    matcher.feed(text)
    return matcher.pairs


_STOP = {'"': re.compile(r'[\\"]'), "'": re.compile(r"[\\']")}


class BracketMatcher:
    """``match_brackets`` fed chunk by chunk (a stream): pairs found so far never change, so
    a reader can trust any pair it sees; an opener without a pair may still be closed later."""

    def __init__(self) -> None:
        self.pairs: dict[int, int] = {}
        self.stack: list[tuple[int, str]] = []
        self.n = 0  # characters seen
        self.quote: str | None = None  # inside a string opened by this quote
        self.escaped = False  # the last character seen was an escaping backslash
        self.last = ""  # the last non-space character seen

    def feed(self, chunk: str) -> None:
        base, i, m = self.n, 0, len(chunk)
        while i < m:
            if self.quote is not None:
                if self.escaped:
                    self.escaped = False
                    i += 1
                    continue
                stop = _STOP[self.quote].search(chunk, i)
                if stop is None:
                    break
                i = stop.end()
                if stop.group() == "\\":
                    self.escaped = True
                else:
                    self.quote = None
                continue
            # Outside brackets only an opener matters: prose quotes are skipped at C speed.
            found = (_SPECIAL if self.stack else _OPENER).search(chunk, i)
            if found is None:
                break
            j = found.start()
            ch = chunk[j]
            if ch in "{[":
                self.stack.append((base + j, ch))
            elif ch in "}]":
                if self.stack and _CLOSER[self.stack[-1][1]] == ch:
                    self.pairs[self.stack.pop()[0]] = base + j
            elif ch in "\"'" and self._prev_significant(chunk, j) in _STRING_CAN_START:
                self.quote = ch
            i = j + 1
        tail = chunk.rstrip()
        if tail:
            self.last = tail[-1]
        self.n += m

    def _prev_significant(self, chunk: str, i: int) -> str:
        j = i - 1
        while j >= 0 and chunk[j].isspace():
            j -= 1
        return chunk[j] if j >= 0 else self.last
