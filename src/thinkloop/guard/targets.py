"""Targets compared by meaning, and outbound URLs checked for what they carry.

A target (path, host, recipient, account, amount) the model puts in a call counts as the
user's when the user's text holds the same value once normalised: numbers as numbers ("42.50"
is 42.5, "1,200" is 1200), paths resolved ("./a/../notes.md" is "notes.md"), addresses
case-folded, account numbers (IBANs) without spaces.

A URL a tool sends a request to (``Tool.meta["outbound"]`` names those arguments: web_fetch's
and browser_open's ``url``) is a side effect once the run has read outside content: its host,
path and query can carry what the run read to whoever runs the host (the host name reaches
their DNS server before any connection). It is free when the user's text holds the URL or
names its host, or when it is a link the run read verbatim (it then carries nothing the run
composed); otherwise provenance gating asks a person, or refuses.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from urllib.parse import unquote, urlsplit

from thinkloop.guard import linear

_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,']*(?:\.\d+)?(?![\d])")
_AMOUNT = re.compile(r"^\s*[€$£¥]?\s*([-+]?\d[\d,' ]*(?:\.\d+)?)\s*(?:[€$£¥]|[a-z]{3})?\s*$",
                     re.IGNORECASE)
_ACCOUNT = re.compile(r"^[a-z]{2}\d{2}[a-z0-9 ]{8,}$|^[\d \-]{8,}$", re.IGNORECASE)
_URL = re.compile(r"(?:https?|wss?|ftp)://[^\s<>\"'`)\]]+", re.IGNORECASE)
_HOST = re.compile(r"(?<![\w@.-])((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24})\b",
                   re.IGNORECASE)


def norm(text: str) -> str:
    """Lower case, one space between words, spotlight's datamark (``^``) as a space."""
    return _SPACE.sub(" ", text.replace("^", " ")).strip().lower()


def _number(text: str) -> Decimal | None:
    text = text.replace("'", "").replace(" ", "")
    if "," in text and "." not in text and not re.search(r",\d{3}(?!\d)", text):
        text = text.replace(",", ".")  # 84,20: a decimal comma
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def numbers_in(text: str) -> set[Decimal]:
    found = {_number(m.group(0)) for m in _NUMBER.finditer(text)}
    return {n.normalize() for n in found if n is not None}


def present(value: object, trusted: str) -> bool:
    """Does the user's text (``trusted``, normalised) hold ``value``?"""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = norm(str(value))
    if not text:
        return True
    amount = _AMOUNT.match(text) if not isinstance(value, int | float) else None
    if isinstance(value, int | float) or (amount and not _ACCOUNT.match(text)):
        number = _number(amount.group(1) if amount else text)
        return number is not None and number.normalize() in numbers_in(trusted)
    if text in trusted or text.removeprefix("./") in trusted:
        return True
    if _ACCOUNT.match(text):
        return text.replace(" ", "").replace("-", "") in _compact(trusted)
    if "/" in text or "." in text:
        resolved = posixpath.normpath(text)
        return resolved != "." and resolved.removeprefix("./") in {
            posixpath.normpath(w.strip(".,;:!?'\"()")) for w in trusted.split()}
    return False


def _compact(text: str) -> str:
    """Account numbers written in groups ("DE44 5001 0517") joined."""
    return re.sub(r"(?<=[a-z0-9]) (?=[0-9a-z]{1,4}\b)", "", text).replace("-", "")


def hosts_in(text: str) -> set[str]:
    """Host names the text names: of its URLs, and bare ones ("weather.example")."""
    # Through the linear engine (guard/linear.py): a 1 MB line of "a.a.a." took a quarter
    # of a second in re.
    urls = [m.span() for m in linear.finditer(_URL, text)]
    hosts = {urlsplit(text[a:b]).hostname or "" for a, b in urls}
    rest = " ".join(text[a:b] for a, b in zip([0] + [e for _, e in urls],
                                               [s for s, _ in urls] + [len(text)],
                                               strict=True))
    hosts |= {m.group(1).lower().rstrip(".") for m in linear.finditer(_HOST, rest)}
    return {h for h in hosts if h}


def _host_named(host: str, named: Iterable[str]) -> bool:
    return any(host == h or host.endswith("." + h) for h in named)


def outbound_problem(url: str, trusted: str, seen: str, allowed: Iterable[str] = ()) -> \
        str | None:
    """Why a request to ``url`` may carry the run's data out, or None.

    ``trusted``: the user's text (normalised); ``seen``: every output the run read, raw;
    ``allowed``: host globs the configuration trusts (already matched by the caller)."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").rstrip(".")
    except ValueError:
        return f"{url[:80]!r} is not a URL"
    if not host:
        return None  # the tool refuses it without a request
    clean = norm(unquote(url.strip()))
    if clean in trusted or clean.rstrip("/") in trusted:
        return None
    if _host_named(host, hosts_in(trusted)):
        return None
    if url.strip() and url.strip() in seen:
        return None  # a link the run read as it is: nothing of the run's in it
    return (f"the request to {host} would carry data the model composed to a host the user "
            "did not name")
