"""``send_voice``: text spoken by a local engine (piper if installed, else espeak-ng), sent to
the run's chat as a voice note (OGG/Opus when ffmpeg is there to encode it, else WAV). With
no engine installed the model gets a clear error result, never a crash."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from thinkloop.channels.base import Address, ChatAdapter
from thinkloop.core.tool import Tool, ToolContext, make_tool
from thinkloop.errors import ToolExecutionError

NO_ENGINE = ("send_voice is unavailable: no text-to-speech engine is installed on this host "
             "(install espeak-ng, or piper and set channels.NAME.piper_voice). Send text instead.")
MAX_CHARS = 2000
Home = Callable[[str], tuple[ChatAdapter, Address] | None]  # run id -> where it answers
Count = Callable[[str], None]  # run id -> counted, or a ChannelError past the cap


async def _run(cmd: list[str], stdin: bytes | None = None) -> bytes:
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.PIPE if stdin is not None else None,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout=60)
    if proc.returncode != 0:
        why = err.decode(errors="replace")[:300]
        raise ToolExecutionError(f"{Path(cmd[0]).name} failed: {why}")
    return out


async def speak(text: str, voice: Path | None = None) -> bytes:
    """``text`` as audio: WAV from the engine, OGG/Opus if ffmpeg can encode it. Piper speaks
    when it is installed and ``voice`` (its .onnx model) is given; else espeak-ng."""
    piper = shutil.which("piper")
    espeak = shutil.which("espeak-ng") or shutil.which("espeak")
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "voice.wav"
        if piper and voice:
            await _run([piper, "--model", str(voice), "--output_file", str(wav)],
                       text.encode())
        elif espeak:
            await _run([espeak, "-w", str(wav), "--stdin"], text.encode())
        else:
            raise ToolExecutionError(NO_ENGINE)
        ffmpeg = shutil.which("ffmpeg")
        if ffmpeg is None:
            return wav.read_bytes()
        ogg = Path(tmp) / "voice.ogg"
        await _run([ffmpeg, "-loglevel", "error", "-i", str(wav), "-c:a", "libopus", str(ogg)])
        return ogg.read_bytes()


def send_voice_tool(home: Home, voice: Path | None = None, count: Count | None = None) -> Tool:
    async def send_voice(ctx: ToolContext, text: str) -> str:
        """Say something to the person as a voice note in their chat.

        Args:
            text: what to say (at most 2000 characters)
        """
        target = home(ctx.run_id or "")
        if target is None:
            raise ToolExecutionError("send_voice: this run was not started from a chat")
        if len(text) > MAX_CHARS:
            raise ToolExecutionError(f"send_voice: at most {MAX_CHARS} characters")
        if count is not None:
            count(ctx.run_id or "")
        audio = await speak(text, voice)
        adapter, where = target
        await adapter.send_voice(where, audio)
        return f"voice note sent to {where.key} ({len(audio)} bytes)"

    return make_tool(send_voice, idempotent=False)
