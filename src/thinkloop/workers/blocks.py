"""The container protocol's output blocks: one JSON object between two marker lines.

``thinkloop run --stdio`` writes them and ``thinkloop host`` reads them. Two marker pairs are
spoken: thinkloop's own, and the ``NANOCLAW`` pair hosts of the Stingyclaw/NanoClaw family
read (chosen by the payload's shape). A host reads stdout line by line and keeps only what is
between a start and an end marker, so anything else a library prints never passes for a
block.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import orjson


@dataclass(frozen=True, slots=True)
class Markers:
    start: str
    end: str


THINKLOOP = Markers("---THINKLOOP_OUTPUT_START---", "---THINKLOOP_OUTPUT_END---")
NANOCLAW = Markers("---NANOCLAW_OUTPUT_START---", "---NANOCLAW_OUTPUT_END---")
# A block bigger than this is dropped by a reader (a runaway child cannot fill the host).
MAX_BLOCK_CHARS = 4 * 1024 * 1024


def render(data: dict[str, Any], markers: Markers = THINKLOOP) -> str:
    """One block as text: start marker, the JSON on one line, end marker."""
    body = orjson.dumps(data, default=str).decode()
    return f"{markers.start}\n{body}\n{markers.end}\n"


def write(out: TextIO, data: dict[str, Any], markers: Markers = THINKLOOP) -> None:
    out.write(render(data, markers))
    out.flush()


class BlockReader:
    """Feeds stdout lines in, yields the blocks they complete. Either marker pair is read;
    a block that is not a JSON object is reported as ``{"status": "invalid", ...}``."""

    def __init__(self) -> None:
        self._buf: list[str] | None = None
        self._size = 0
        self._end = ""

    def feed(self, line: str) -> Iterator[dict[str, Any]]:
        line = line.rstrip("\r\n")
        if self._buf is None:
            for pair in (THINKLOOP, NANOCLAW):
                if line == pair.start:
                    self._buf, self._size, self._end = [], 0, pair.end
            return
        if line != self._end:
            self._size += len(line)
            if self._size > MAX_BLOCK_CHARS:
                self._buf = None
                yield {"status": "invalid", "error": "output block too large; dropped"}
                return
            self._buf.append(line)
            return
        text, self._buf = "\n".join(self._buf), None
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            yield data
        else:
            yield {"status": "invalid", "error": "output block is not a JSON object"}
