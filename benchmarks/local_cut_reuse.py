"""How much of a long task the local model evaluates again at each step, by how a cut turn
keeps its end.

A task longer than the local model's window is cut in its middle (``models.local_fit.fit_turns``);
as the run's history grows, every step cuts again. The runtime reuses the KV cache of the
longest common prefix with the last request, so what a step evaluates again starts where
that request first differs: right after the kept start of the cut turn. Two ways to keep
the turn, same model, same task, same steps, in one process:

* ``halves``     (the baseline, before): the start and the end keep half each, so the end
  moves every step and half the kept turn is evaluated again;
* ``short end``  (now): the end keeps at most ``FIT_TAIL_CHARS``; further cuts come out of the
  start's far end, which stays a prefix of the last request's.

Token counts come from the runtime (``timings.cache_n`` / ``prompt_n``), so they do not depend
on the machine's load; the seconds do and are shown with the load average.

    python benchmarks/local_cut_reuse.py [--steps 5] [--chars 32768]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import thinkloop.models.local_fit as local_fit
from thinkloop.models.base import ModelSettings
from thinkloop.models.local import default_model_path
from thinkloop.models.local_wheel import WheelModel
from thinkloop.types import Message


async def run(model: WheelModel, task: str, steps: int) -> list[tuple[int, int, float]]:
    """(prompt tokens, reused tokens, seconds) of each step after the first."""
    history = [Message.system("Be brief."), Message.user(task)]
    out = []
    settings = ModelSettings(max_tokens=8, temperature=0)
    for step in range(steps):
        started = time.perf_counter()
        reply = await model.complete(history, [], settings)
        took = time.perf_counter() - started
        stats = model.last_stats
        assert stats is not None and reply.cut_chars > 0
        if step:
            out.append((stats.prompt_tokens, stats.reused_tokens, took))
        history += [Message.assistant(f"Step {step}: " + "I read on. " * 30),
                    Message.user("Go on.")]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--chars", type=int, default=32_768)  # the input guard's default cap
    args = parser.parse_args()
    task = "Summarise this text. " + " ".join(
        f"Line {i}: the river ran past the mill and the miller counted sacks." for i in
        range(args.chars // 60))[: args.chars]
    model = WheelModel(default_model_path(), n_ctx=4096)
    rows = []
    for name, tail in (("halves (before)", 10**9), ("short end (now)", local_fit.FIT_TAIL_CHARS)):
        local_fit.FIT_TAIL_CHARS = tail  # fit_turns reads it at each call
        asyncio.run(model.complete([Message.user(f"reset {name}")], [],
                                   ModelSettings(max_tokens=2)))  # a cache of neither case
        steps = asyncio.run(run(model, task, args.steps))
        rows.append((name, steps, os.getloadavg()[0]))
    print("| keeps | steps | prompt tokens | evaluated again | reused | seconds | load |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, steps, load in rows:
        prompt = sum(p for p, _, _ in steps)
        reused = sum(r for _, r, _ in steps)
        secs = sum(t for _, _, t in steps)
        print(f"| {name} | 2-{args.steps} | {prompt} | {prompt - reused} | "
              f"{reused / prompt:.0%} | {secs:.1f} | {load:.1f} |")


if __name__ == "__main__":
    main()
