"""What the container-mode tests share (``run --stdio`` and ``thinkloop host`` as real
processes): the loopback model server, an environment without the developer's keys, the
seed's payload, and a process whose marker blocks are read as a host reads them."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from typing import IO, Any

import pytest

from thinkloop.testing.openai_server import OpenAIServer

START, END = "---NANOCLAW_OUTPUT_START---", "---NANOCLAW_OUTPUT_END---"
OURS = ("---THINKLOOP_OUTPUT_START---", "---THINKLOOP_OUTPUT_END---")


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as srv:
        yield srv


def clean_env(**more: str) -> dict[str, str]:
    """This environment without a model key or default model of the developer's."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "THINKLOOP_MODEL")}
    return {**base, **more}


def seed_payload(base_url: str, prompt: str, secret: str, **more: Any) -> dict[str, Any]:
    """The seed's container input, its model behind ``base_url``."""
    return {"group": "family", "groupFolder": "family", "chatJid": "123@g.us", "isMain": True,
            "assistantName": "Andy", "prompt": prompt,
            "secrets": {"OPENROUTER_API_KEY": secret, "MODEL_NAME": "fake-model",
                        "OPENROUTER_BASE_URL": base_url}, **more}


def read_blocks(lines: list[str], markers: tuple[str, str] = (START, END)
                ) -> list[dict[str, Any]]:
    """What a host reads: the JSON between each pair of markers, line by line."""
    out: list[dict[str, Any]] = []
    buf: list[str] | None = None
    for line in lines:
        if line == markers[0]:
            buf = []
        elif line == markers[1]:
            assert buf is not None, "\n".join(lines)
            out.append(json.loads("\n".join(buf)))
            buf = None
        elif buf is not None:
            buf.append(line)
    assert buf is None, "unterminated block"
    return out


class Piped:
    """A container-mode process (``run --stdio`` or ``host``) given ``payload`` on stdin,
    its stdin kept open for follow-ups unless ``keep_open`` is false, its blocks read one
    by one."""

    def __init__(self, argv: list[str], payload: dict[str, Any], environ: dict[str, str],
                 markers: tuple[str, str] = (START, END), keep_open: bool = True) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=environ)
        self.markers = markers
        self.lines: list[str] = []
        self.blocks: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.drain = threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True)
        self.drain.start()
        self.send(payload)
        if not keep_open:
            self.proc.stdin.close()

    def __enter__(self) -> Piped:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=60)
        self.drain.join(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def _drain(self, stream: IO[str]) -> None:
        self.stderr.extend(stream)

    def send(self, doc: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(doc) + "\n")
        self.proc.stdin.flush()

    def next_block(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        buf: list[str] = []
        while True:
            line = self.proc.stdout.readline()
            assert line, f"stdout ended; stderr: {''.join(self.stderr)}"
            line = line.rstrip("\n")
            self.lines.append(line)
            if line == self.markers[0]:
                buf = []
            elif line == self.markers[1]:
                self.blocks.append(json.loads("\n".join(buf)))
                return self.blocks[-1]
            else:
                buf.append(line)

    def finish(self) -> int:
        """Close stdin, read the blocks still to come; the exit code."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        rest = self.proc.stdout.read().splitlines()
        self.lines += rest
        self.blocks += read_blocks(rest, self.markers)
        return self.proc.wait(timeout=60)
