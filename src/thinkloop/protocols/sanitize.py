"""Cleaning a final answer before anyone sees it (GoClaw's seven-pass output sanitizer).

``CLEANERS`` is the pipeline: plain ``str -> str`` functions applied in order. Each removes one
kind of debris models leave in answers. Paired tags are matched by walking the tag positions
with a stack (never a lazy ``.*?`` regex), so every cleaner is linear in the answer's length.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

Cleaner = Callable[[str], str]

_GARBLED = re.compile(
    r"</?(?:tool_call|tool_calls|function_call|function_calls|tool_use|minimax:tool_call"
    r"|invoke|parameter|tool_call_name|tool_call_args)\b[^<>]*>",
    re.IGNORECASE,
)
_THINKING = re.compile(
    r"<(/?)(think|thinking|thought|antthinking)\s*>|<<(/?)THINK>>", re.IGNORECASE
)
_FINAL = re.compile(r"</?\s*final\s*>", re.IGNORECASE)
_DOWNGRADED = re.compile(
    r"\s*\[(?:Tool Call:|Tool Result\b|Historical context:|Tool [\w.:-]+\]:?)", re.IGNORECASE
)
_SENTENCE_GAP = re.compile(r"(?<=[.!?])[ \t]+")
_SYSTEM_ECHO = re.compile(r"\s*\[System Message\]", re.IGNORECASE)
_SILENT = re.compile(r"[\s`*_\"'.]*NO_REPLY[\s`*_\"'.]*")


def _remove_paired(text: str, spans: Sequence[tuple[int, int, str, bool]]) -> str:
    """Remove each outermost closed open/close pair with its inside, and every unpaired tag.

    ``spans`` are (start, end, kind, is_closer) in text order.
    """
    cut: list[tuple[int, int]] = []
    stack: list[tuple[int, int, str]] = []
    for start, end, kind, closer in spans:
        if not closer:
            stack.append((start, end, kind))
            continue
        if stack and stack[-1][2] == kind:
            open_start = stack.pop()[0]
            if not stack:
                while cut and cut[-1][0] >= open_start:
                    cut.pop()  # inner spans are covered by this outer pair
                cut.append((open_start, end))
        else:
            cut.append((start, end))
    cut.extend((s, e) for s, e, _ in stack)  # unclosed openers: drop the tag only
    cut.sort()
    out, pos = [], 0
    for s, e in cut:
        if s >= pos:
            out.append(text[pos:s])
            pos = e
        elif e > pos:
            pos = e
    out.append(text[pos:])
    return "".join(out)


def strip_garbled_tool_xml(text: str) -> str:
    """1. Tool-call XML a model wrote as prose (DeepSeek, GLM, Minimax) goes, contents too."""
    spans = [(m.start(), m.end(), _tag_kind(m.group()), m.group().startswith("</"))
             for m in _GARBLED.finditer(text)]
    if not spans:
        return text
    cleaned = _remove_paired(text, spans)
    return "" if not cleaned.strip() else cleaned


def _tag_kind(tag: str) -> str:
    return re.split(r"[\s>/=]", tag.lstrip("</"), maxsplit=1)[0].lower()


def _drop_blocks(text: str, starts_block: re.Pattern[str], needles: Sequence[str]) -> str:
    """Drop each line that ``starts_block`` matches and the lines after it up to a blank line.

    Every match holds one of ``needles`` (lower case): a text without any is returned as it
    is, with no Python step per line (half a million short lines took 0.15 s). Only an ASCII
    text is searched for them (ignoring case, re also matches a few other letters to ASCII
    ones: K for k); any other one is searched for the opening bracket they all start with."""
    if "[" not in text or (text.isascii() and not any(n in text.lower() for n in needles)):
        return text
    out: list[str] = []
    skipping = False
    for line in text.split("\n"):
        if starts_block.match(line):
            skipping = True
            continue
        if skipping and line.strip():
            continue
        if skipping and (not out or not out[-1].strip()):
            skipping = False
            continue  # the blank line that ended the block would double an existing one
        skipping = False
        out.append(line)
    return "\n".join(out)


def strip_downgraded_tool_call_text(text: str) -> str:
    """2. ``[Tool Call: ...]`` / ``[Tool Result ...]`` text and the JSON that follows it."""
    return _drop_blocks(text, _DOWNGRADED, ("[tool ", "[historical context:"))


def strip_thinking_tags(text: str) -> str:
    """3. Reasoning blocks: think, thinking, thought, antThinking and ``<<THINK>>``."""
    first = _THINKING.search(text)
    if first is None:
        return text
    if first.group(1) or first.group(3):
        # A closer before any opener: the opener was in the chat template (DeepSeek-R1), so
        # everything before it is reasoning.
        text = text[first.end():]
    spans = [(m.start(), m.end(), (m.group(2) or "<<think>>").lower(),
              bool(m.group(1) or m.group(3))) for m in _THINKING.finditer(text)]
    return _remove_paired(text, spans)


def strip_final_tags(text: str) -> str:
    """4. ``<final>`` wrappers go; what they wrapped stays."""
    return _FINAL.sub("", text)


def strip_echoed_system_messages(text: str) -> str:
    """5. ``[System Message]`` blocks the model echoed or invented."""
    return _drop_blocks(text, _SYSTEM_ECHO, ("[system message]",))


def collapse_consecutive_duplicate_blocks(text: str) -> str:
    """6. A paragraph, or a sentence within one, repeated right after itself (model stutter)
    is kept once."""
    blocks = text.split("\n\n")
    out: list[str] = []
    previous: str | None = None
    for block in blocks:
        key = block.strip()
        if key and key == previous:
            continue
        out.append(_collapse_sentences(block))
        if key:
            previous = key
    return "\n\n".join(out)


def _collapse_sentences(block: str) -> str:
    """A sentence of three words or more said again right after itself is kept once (a small
    model caught in a loop: "I'm glad to hear that. I'm glad to hear that. I'm glad to");
    a cut-off copy of it that ends the paragraph (the token limit struck) goes too."""
    parts = _SENTENCE_GAP.split(block)
    kept: list[str] = []
    for part in parts:
        if kept and part == kept[-1] and len(part.split()) >= 3:
            continue
        kept.append(part)
    if len(kept) == len(parts):
        return block  # nothing repeated: the paragraph stays exactly as written
    if len(kept) >= 2 and kept[-2].startswith(kept[-1]) and len(kept[-2]) > len(kept[-1]):
        kept.pop()
    return " ".join(kept)


def strip_leading_blank_lines(text: str) -> str:
    """7. Whitespace-only lines at the start go; the first real line keeps its indentation."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    return "\n".join(lines[i:])


CLEANERS: tuple[Cleaner, ...] = (
    strip_garbled_tool_xml,
    strip_downgraded_tool_call_text,
    strip_thinking_tags,
    strip_final_tags,
    strip_echoed_system_messages,
    collapse_consecutive_duplicate_blocks,
    strip_leading_blank_lines,
)


def sanitize_output(text: str, cleaners: Sequence[Cleaner] = CLEANERS) -> str:
    """Run ``cleaners`` over a final answer, then drop trailing whitespace."""
    for clean in cleaners:
        text = clean(text)
    return text.rstrip()


def is_silent(text: str) -> bool:
    """True when the whole answer is ``NO_REPLY``: the run chose to say nothing."""
    return _SILENT.fullmatch(text) is not None
