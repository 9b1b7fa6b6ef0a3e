"""Secret values and personal data in text: the patterns, and the vault that hides them.

Every search here reads a text once (the private key's lazy body is bounded by the last
footer; the personal-data patterns run through the linear engine, guard/linear.py), so a
1 MB tool result is searched in milliseconds.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from thinkloop.guard import linear

SECRET_VALUES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(p)) for label, p in (
        ("private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE "
                        r"KEY-----"),
        ("api key", r"\b(?:sk|rk|pk)-(?:proj-|live-|test-|ant-)?[A-Za-z0-9_\-]{16,}"),
        ("aws key", r"\bAKIA[0-9A-Z]{16}\b"),
        ("github token", r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
        ("slack token", r"\bxox[abpr]-[A-Za-z0-9\-]{10,}"),
        ("google key", r"\bAIza[0-9A-Za-z_\-]{30,}"),
        ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
        ("bearer token", r"(?<=Bearer )[A-Za-z0-9._\-]{16,}"),
        ("password", r"(?i)(?<=password[=:] )\S{4,}|(?<=password=)\S{4,}|(?<=passwd=)\S{4,}"),
    ))
_KEY_FOOTER = re.compile(r"-----END [A-Z ]*PRIVATE KEY-----")
# What each secret pattern cannot match without (the password's in any case).
_NEEDS = {p.pattern: needs for (_, p), needs in zip(SECRET_VALUES, (
    "PRIVATE KEY-----", "k-", "AKIA", "gh", "xox", "AIza", "eyJ", "Bearer ", "passw"),
    strict=True)}


def secret_matches(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """``pattern.finditer(text)``, bounded for the private key's lazy body: a key block ends
    with its footer, so no match starts after the last one (each header after it read to the
    end of the text: quadratic in the number of headers)."""
    needs = _NEEDS.get(pattern.pattern)
    if needs is not None and needs not in (text.lower() if needs == "passw" else text):
        return iter(())  # the pattern cannot match without it: a C search instead of a scan
    if pattern is SECRET_VALUES[0][1]:
        end = max((m.end() for m in _KEY_FOOTER.finditer(text)), default=0)
        return pattern.finditer(text, 0, end) if end else iter(())
    return pattern.finditer(text)


SENSITIVE_VALUES = (
    # An e-mail address. It starts only where a run of address characters does (and holds a
    # word character before the @): "\b[\w.+-]+@" was tried at every word of a long run
    # ("a.a.a...", 64 KB: minutes).
    re.compile(r"(?<![\w.+-])[.+-]*\w[\w.+-]*@[\w-]+\.[\w.-]+\b"),
    re.compile(r"\+?\d[\d ()-]{8,}\d"),  # phone number
)


def personal_data(text: str) -> bool:
    """Whether ``text`` holds an e-mail address or a phone number (one linear pass each)."""
    data = linear.encode(text) if linear.available() else None
    return any(linear.search(p, text, data) is not None for p in SENSITIVE_VALUES)




class Vault:
    """One run's secrets: value <-> placeholder."""

    def __init__(self, by_value: dict[str, str] | None = None) -> None:
        self.by_value: dict[str, str] = dict(by_value or {})
        # Long results are hidden in worker threads, two calls' at once: one numbering.
        self._lock = threading.Lock()

    def hide(self, text: str) -> str:
        with self._lock:
            return self._hide(text)

    def _hide(self, text: str) -> str:
        for _, pattern in SECRET_VALUES:
            for value in {m.group(0) for m in secret_matches(pattern, text)}:
                if value not in self.by_value:
                    self.by_value[value] = f"[SECRET_{len(self.by_value) + 1}]"
        for value, mark in sorted(self.by_value.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(value, mark)
            for form in encodings(value):  # the same secret, encoded: hidden all the same
                text = _replace_any_case(text, form, mark) \
                    if form.isalnum() and _HEX.fullmatch(form) else text.replace(form, mark)
        return text

    def secrets_in(self, text: str) -> list[str]:
        """The placeholders whose secret (or an encoding of it) ``text`` holds."""
        return [mark for value, mark in self.by_value.items()
                if value in text or any(f in text for f in encodings(value))]

    def reveal(self, value: Any) -> Any:
        if isinstance(value, str):
            for secret, mark in self.by_value.items():
                value = value.replace(mark, secret)
            return value
        if isinstance(value, list):
            return [self.reveal(v) for v in value]
        if isinstance(value, dict):
            return {k: self.reveal(v) for k, v in value.items()}
        return value


_HEX = re.compile(r"[0-9a-f]+", re.IGNORECASE)


def _replace_any_case(text: str, form: str, mark: str) -> str:
    """``form`` (hex digits) replaced in any case. By searching the lower-cased text, not by
    compiling the form into a regex (a long secret's hex form took seconds to compile)."""
    lower, needle = text.lower(), form.lower()
    if len(lower) != len(text):  # a character whose lower case is longer: the slow way
        return re.sub(re.escape(form), mark, text, flags=re.IGNORECASE)
    parts: list[str] = []
    last = 0
    at = lower.find(needle)
    while at >= 0:
        parts += [text[last:at], mark]
        last = at + len(needle)
        at = lower.find(needle, last)
    return "".join(parts) + text[last:] if parts else text


def encodings(secret: str) -> list[str]:
    """Common encodings of ``secret`` a tool's output may carry: base64 (standard and URL-safe,
    at each of the three alignments it can have inside a longer encoded text), hex,
    URL-encoding, reversed."""
    raw = secret.encode()
    every = "".join(c if c.isalnum() else f"%{ord(c):02X}" for c in secret)
    forms = {raw.hex(), quote(secret, safe=""), every, every.lower(), secret[::-1]}
    for pad in range(3):
        full = base64.b64encode(b"\0" * pad + raw).decode().rstrip("=")
        # Characters that depend only on the secret: skip those mixed with the padding
        # bytes before it, and the last one, mixed with whatever follows.
        core = full[(pad * 4 + 2) // 3: -1] if pad else full[:-1]
        if len(core) >= 8:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    forms.discard(secret)
    return sorted((f for f in forms if len(f) >= 8), key=len, reverse=True)
