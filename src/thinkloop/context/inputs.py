"""Context inputs: what a caller hands a run besides the task (UrchinLoop's "Build Context").

``agent.run(task, context={...})`` takes page context (URL, title, visible text, selection),
files and key/value metadata. They become the run's first user message: text inside tagged
blocks before the task, images (and PDFs, for models that read documents) as content parts.
Text files and PDF text are inlined; a model that cannot take an image gets a note saying so.
Everything textual shares one character budget; what is cut says so, nothing is dropped silently.
"""

from __future__ import annotations

import io
import mimetypes
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from thinkloop.context.tokens import model_window
from thinkloop.core.errors import ConfigError
from thinkloop.core.model import input_kinds
from thinkloop.core.types import ContentPart, Message
from thinkloop.text import validation_summary

DEFAULT_BUDGET_CHARS = 60_000
MAX_IMAGE_BYTES = 5 * 1024 * 1024
_FIELD_MAX = 2_000  # url and title
TEXT_EXTENSIONS = frozenset({
    ".md", ".markdown", ".txt", ".rst", ".py", ".js", ".ts", ".json", ".yaml", ".yml", ".toml",
    ".csv", ".tsv", ".html", ".htm", ".xml", ".css", ".sh", ".sql", ".ini", ".cfg", ".log",
    ".java", ".go", ".rs", ".c", ".h", ".cpp", ".rb", ".php", ".tex",
})
_SNIFF = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
          (b"GIF8", "image/gif"), (b"%PDF-", "application/pdf"))
_CLOSERS = re.compile(r"</(context|page|file|metadata|selection|visible_text)", re.IGNORECASE)


class PageContext(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = ""
    title: str = ""
    text: str = Field("", description="the page's visible text")
    selection: str = ""


class FileInput(BaseModel):
    """A file given as bytes (an upload) rather than a path."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    data: bytes
    media_type: str = ""


class RunContext(BaseModel):
    """The ``context=`` argument of a run (a dict of these fields is accepted too)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    page: PageContext | None = None
    files: tuple[Path | FileInput, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    budget_chars: int = Field(DEFAULT_BUDGET_CHARS, gt=0)
    max_image_bytes: int = Field(MAX_IMAGE_BYTES, gt=0)

    @property
    def is_empty(self) -> bool:
        return self.page is None and not self.files and not self.metadata


ContextArg = RunContext | Mapping[str, Any] | None
# How a task message given with context inputs starts (the provenance gate looks for it).
CONTEXT_OPEN = "<context>\n"


def parse_context(value: ContextArg) -> RunContext | None:
    """Validate a run's ``context=`` up front: one clear error, before anything starts."""
    if value is None:
        return None
    try:
        ctx = value if isinstance(value, RunContext) else RunContext.model_validate(value)
    except ValidationError as exc:
        raise ConfigError(f"invalid run context: {validation_summary(exc)}") from None
    missing = [str(f) for f in ctx.files if isinstance(f, Path) and not f.is_file()]
    if missing:
        raise ConfigError(f"context file not found: {', '.join(missing)}")
    return None if ctx.is_empty else ctx




def accepts(model: Any, kind: Literal["image", "document"]) -> bool:
    """Whether ``model`` reads ``kind`` content parts (see ``models.base.input_kinds``)."""
    return kind in input_kinds(model)


@dataclass(frozen=True, slots=True)
class Loaded:
    name: str
    media_type: str
    data: bytes
    kind: Literal["text", "pdf", "image", "binary"]
    text: str = ""  # decoded text, or the PDF's extracted text
    note: str = ""  # why there is no text (unreadable PDF, scanned pages)


def load_file(item: Path | FileInput) -> Loaded:
    if isinstance(item, Path):
        try:
            name, data, media_type = item.name, item.read_bytes(), ""
        except OSError as exc:
            raise ConfigError(f"cannot read context file {item}: {exc.strerror or exc}") from None
    else:
        name, data, media_type = item.name, item.data, item.media_type
    media_type = media_type or _sniff(data) or mimetypes.guess_type(name)[0] or ""
    if media_type == "application/pdf":
        text, note = pdf_text(data)
        return Loaded(name, media_type, data, "pdf", text, note)
    if media_type.startswith("image/"):
        return Loaded(name, media_type, data, "image")
    if (media_type.startswith("text/") or Path(name).suffix.lower() in TEXT_EXTENSIONS
            or _looks_textual(data)):
        return Loaded(name, media_type or "text/plain", data, "text",
                      data.decode("utf-8", errors="replace"))
    return Loaded(name, media_type or "application/octet-stream", data, "binary")


def _sniff(data: bytes) -> str:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((mt for magic, mt in _SNIFF if data.startswith(magic)), "")


def _looks_textual(data: bytes) -> bool:
    head = data[:4096]
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3  # a character cut at the sample's end
    return True


def pdf_text(data: bytes) -> tuple[str, str]:
    """(text, note): the PDF's text page by page, or why there is none."""
    try:
        from pypdf import PdfReader
    except ImportError:
        return "", "reading PDFs needs the pypdf package (pip install pypdf)"
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return "", "the PDF is encrypted"
        pages = [(p.extract_text() or "").strip() for p in reader.pages]
    except Exception as exc:  # pypdf raises many types on broken files; a note, not a crash
        return "", f"the PDF could not be read ({type(exc).__name__}: {exc})"
    text = "\n\n".join(f"[page {i}]\n{t}" for i, t in enumerate(pages, 1) if t)
    if not text:
        return "", f"no text could be extracted from its {len(pages)} page(s); it may be scanned"
    return text, ""


def allot(sizes: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` fairly: small inputs keep everything, big ones share what is left."""
    shares = [0] * len(sizes)
    left = budget
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    for k, i in enumerate(order):
        shares[i] = min(sizes[i], left // (len(sizes) - k))
        left -= shares[i]
    return shares


def cut(text: str, limit: int, what: str) -> str:
    if len(text) <= limit:
        return text
    return (f"{text[:limit]}\n[... {what} cut to fit the context budget: showing the first "
            f"{limit} of {len(text)} characters]")


def _escape(text: str) -> str:
    # Input text must not close the tags around it and speak outside them.
    return _CLOSERS.sub(r"<\\/\1", text)


def _attr(value: str) -> str:
    value = value.replace('"', "'").replace("\n", " ")
    return value if len(value) <= _FIELD_MAX else value[:_FIELD_MAX] + "...[cut]"


def user_message(task: str, ctx: RunContext | None, model: Any) -> Message:
    """The run's first user message: the context blocks, then the task (always last)."""
    if ctx is None:
        return Message.user(task)
    files = [load_file(f) for f in ctx.files]
    docs_ok = accepts(model, "document")
    meta = _metadata_text(ctx.metadata)
    page = ctx.page
    # Texts that share the budget, in a fixed order: selection, visible text, files, metadata.
    budgeted = [page.selection if page else "", page.text if page else ""]
    budgeted += [f.text if f.kind == "text" or (f.kind == "pdf" and not docs_ok) else ""
                 for f in files]
    budgeted.append(meta)
    # Half the model's window, at about 4 characters a token: a 4K model gets 8,000 chars.
    shares = allot([len(t) for t in budgeted], min(ctx.budget_chars, 2 * model_window(model)))
    blocks: list[str] = []
    if page is not None:
        blocks.append(_page_block(page, cut(page.selection, shares[0], "selection"),
                                  cut(page.text, shares[1], "page text")))
    parts: list[ContentPart] = []
    for f, share in zip(files, shares[2:-1], strict=True):
        body, part = _file_body(f, share, ctx, model, docs_ok, len(parts) + 1)
        if part is not None:
            parts.append(part)
        blocks.append(f'<file name="{_attr(f.name)}" media_type="{f.media_type}">\n'
                      f"{body}\n</file>")
    if meta:
        blocks.append(f"<metadata>\n{_escape(cut(meta, shares[-1], 'metadata'))}\n</metadata>")
    text = CONTEXT_OPEN + "\n".join(blocks) + "\n</context>\n\n" + task
    return Message.user(text, tuple(parts))


def _page_block(page: PageContext, selection: str, visible: str) -> str:
    lines = [f'<page url="{_attr(page.url)}" title="{_attr(page.title)}">']
    if selection:
        lines.append(f"<selection>\n{_escape(selection)}\n</selection>")
    if visible:
        lines.append(f"<visible_text>\n{_escape(visible)}\n</visible_text>")
    lines.append("</page>")
    return "\n".join(lines)


def _file_body(
    f: Loaded, share: int, ctx: RunContext, model: Any, docs_ok: bool, n: int
) -> tuple[str, ContentPart | None]:
    """The text shown inside a file's block, and the content part it attaches, if any."""
    size = _size(len(f.data))
    if f.kind == "text" or (f.kind == "pdf" and not docs_ok and f.text):
        return _escape(cut(f.text, share, f"file {f.name}")), None
    if f.kind == "pdf" and docs_ok:
        return (f"[attached below as content part {n}: PDF document, {size}]",
                ContentPart("document", f.media_type, f.data))
    if f.kind == "pdf":
        return f"[not shown: {f.note}]", None
    if f.kind == "image":
        if not accepts(model, "image"):
            return (f"[not shown: an image ({size}) was attached, but this model cannot read "
                    "images; tell the user if you need its content]"), None
        if len(f.data) > ctx.max_image_bytes:
            return (f"[not shown: the image is {size}, over the "
                    f"{_size(ctx.max_image_bytes)} limit for images]"), None
        return (f"[attached below as content part {n}: image, {size}]",
                ContentPart("image", f.media_type, f.data))
    return f"[not shown: a binary file ({size}) that cannot be read as text]", None


def _metadata_text(metadata: Mapping[str, Any]) -> str:
    import orjson

    lines = []
    for key, value in metadata.items():
        shown = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        lines.append(f"{key}: {shown}")
    return "\n".join(lines)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"
