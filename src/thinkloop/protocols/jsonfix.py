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
_STRING_CAN_START = frozenset("{[,:")


class JsonRepairError(ValueError):
    """The text is not JSON even after repair."""


def loads_lenient(text: str) -> Any:
    """Decode ``text`` as JSON, repairing the usual model mistakes; ValueError if hopeless."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return orjson.loads(repair_json(text))
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


def repair_json(text: str) -> str:
    """Rewrite almost-JSON as strict JSON in one pass; raise JsonRepairError if impossible."""
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
            i = _read_string(text, i, out)
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

    Quotes start a string only inside brackets and only where JSON allows one (after
    ``{ [ , :``), so apostrophes in prose do not derail the pairing. A closer that does not
    match the innermost opener is ignored; unmatched openers are absent from the map.
    """
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i, n = 0, len(text)
    while True:
        # Outside brackets only an opener matters: prose quotes are skipped at C speed.
        m = (_SPECIAL if stack else _OPENER).search(text, i)
        if m is None:
            return pairs
        i = m.start()
        ch = text[i]
        if ch in "{[":
            stack.append(i)
        elif ch in "}]":
            if stack and _CLOSER[text[stack[-1]]] == ch:
                pairs[stack.pop()] = i
        elif ch in "\"'" and stack and _prev_significant(text, i) in _STRING_CAN_START:
            i = _skip_string(text, i, n)
            continue
        i += 1


def _prev_significant(text: str, i: int) -> str:
    j = i - 1
    while j >= 0 and text[j].isspace():
        j -= 1
    return text[j] if j >= 0 else ""


def _skip_string(text: str, i: int, n: int) -> int:
    """Index just past the string opening at ``text[i]`` (``n`` if it never closes)."""
    quote = text[i]
    i += 1
    while i < n:
        j = text.find(quote, i)
        if j < 0:
            return n
        backslashes = 0
        k = j - 1
        while k >= i and text[k] == "\\":
            backslashes += 1
            k -= 1
        if backslashes % 2 == 0:
            return j + 1
        i = j + 1
    return n
