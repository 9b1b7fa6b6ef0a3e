"""Everyday arithmetic in words: spotting it in a sentence and reading it as an expression.

People ask "15% of 240", "the square root of 144", "7 squared", "2.5 kilometers to meters"
or "how many minutes are in 3 hours", and a small model copies those words into the
calculator instead of writing ``0.15*240``. ``plain`` reads each form as the arithmetic it
means (the calculator's input); ``phrases_in`` finds them in a task, so a small model's
decision grammar can offer the task's own words as the calculator's argument (the grammar
lives below the tools, hence this lowest-layer module both share).

Unit conversions cover time, length, mass and volume in metric and common imperial units;
a conversion between two kinds (metres to seconds) is not read and stays an error.
"""

from __future__ import annotations

import re

_NUM = r"(\d{1,30}(?:\.\d{1,30})?)"

# name -> (kind, size in the kind's base unit). Plural and short forms are listed.
_UNIT_TABLE: tuple[tuple[str, str, float], ...] = (
    ("second seconds sec secs s", "time", 1.0),
    ("minute minutes min mins", "time", 60.0),
    ("hour hours hr hrs h", "time", 3600.0),
    ("day days", "time", 86400.0),
    ("week weeks", "time", 604800.0),
    ("millimeter millimeters millimetre millimetres mm", "length", 0.001),
    ("centimeter centimeters centimetre centimetres cm", "length", 0.01),
    ("meter meters metre metres m", "length", 1.0),
    ("kilometer kilometers kilometre kilometres km", "length", 1000.0),
    ("inch inches in", "length", 0.0254),
    ("foot feet ft", "length", 0.3048),
    ("yard yards yd", "length", 0.9144),
    ("mile miles mi", "length", 1609.344),
    ("milligram milligrams mg", "mass", 0.001),
    ("gram grams g", "mass", 1.0),
    ("kilogram kilograms kg", "mass", 1000.0),
    ("ounce ounces oz", "mass", 28.349523125),
    ("pound pounds lb lbs", "mass", 453.59237),
    ("milliliter milliliters millilitre millilitres ml", "volume", 0.001),
    ("liter liters litre litres l", "volume", 1.0),
)
_UNITS = {name: (kind, size) for names, kind, size in _UNIT_TABLE for name in names.split()}

# Longest names first, so "minutes" is not read as "min" + "utes".
_UNIT = "(" + "|".join(sorted(map(re.escape, _UNITS), key=len, reverse=True)) + r")\b"
_CONVERT = re.compile(rf"{_NUM}\s{{0,3}}{_UNIT}\s{{1,3}}(?:to|in|into|as)\s{{1,3}}{_UNIT}",
                      re.IGNORECASE)
_HOW_MANY = re.compile(rf"how\s{{1,3}}many\s{{1,3}}{_UNIT}\s{{1,3}}(?:are\s{{1,3}})?"
                       rf"(?:there\s{{1,3}})?in\s{{1,3}}(?:a\s{{1,3}}|an\s{{1,3}})?{_NUM}?"
                       rf"\s{{0,3}}{_UNIT}", re.IGNORECASE)
_PERCENT = re.compile(rf"{_NUM}\s{{0,3}}(?:%|percent|per\s?cent)\s{{1,3}}of\s{{1,3}}"
                      rf"(?:the\s{{1,3}})?{_NUM}", re.IGNORECASE)
_ROOT = re.compile(rf"(?:the\s{{1,3}})?square\s{{1,3}}root\s{{1,3}}of\s{{0,3}}{_NUM}",
                   re.IGNORECASE)
_POWER = re.compile(rf"{_NUM}\s{{1,3}}(squared|cubed)\b", re.IGNORECASE)
_TIMES = re.compile(r"(?<=\d)\s*[x×]\s*(?=\d)")


def _converted(amount: str, source: str, target: str, whole: str) -> str:
    a, b = _UNITS.get(source.lower()), _UNITS.get(target.lower())
    if a is None or b is None or a[0] != b[0]:
        return whole  # two kinds of unit (metres to seconds): not a conversion
    return f"({amount}*{a[1]!r}/{b[1]!r})"


def _convert(m: re.Match[str]) -> str:
    return _converted(m.group(1), m.group(2), m.group(3), m.group(0))


def _how_many(m: re.Match[str]) -> str:
    return _converted(m.group(2) or "1", m.group(3), m.group(1), m.group(0))


def plain(expression: str) -> str:
    """``expression`` with everyday phrasing as arithmetic: "15% of 240" is ``(15*240/100)``,
    "2.5 km to m" is ``(2.5*1000.0/1.0)``; anything else is left as it was."""
    text = expression.strip().rstrip("?.=").strip()
    text = _HOW_MANY.sub(_how_many, text)
    text = _CONVERT.sub(_convert, text)
    text = _PERCENT.sub(r"(\1*\2/100)", text)  # 7% of 300 is 21, not 21.000000000000004
    text = re.sub(rf"{_NUM}\s*(?:%|percent)\s*of\s*", r"(\1/100)*", text, flags=re.IGNORECASE)
    text = _ROOT.sub(r"sqrt(\1)", text)
    text = _POWER.sub(lambda m: f"({m.group(1)}**{2 if m.group(2).lower() == 'squared' else 3})",
                      text)
    return _TIMES.sub("*", text).replace("÷", "/")


def phrases_in(text: str) -> list[str]:
    """The everyday arithmetic phrases of ``text`` (each one ``plain`` reads), in order."""
    found: list[tuple[int, str]] = []
    for pattern in (_HOW_MANY, _CONVERT, _PERCENT, _ROOT, _POWER):
        for m in pattern.finditer(text):
            if pattern in (_HOW_MANY, _CONVERT) and plain(m.group(0)) == m.group(0).strip():
                continue  # two kinds of unit: not a conversion
            if not any(start <= m.start() < start + len(p) for start, p in found):
                found.append((m.start(), m.group(0).strip()))
    return list(dict.fromkeys(p for _, p in sorted(found)))
