"""Local provider speed: tokens/s and time to first token, with and without the grammar.

Runs the in-process SmolLM2 model (``local``) through ``LocalModel.stream`` on one task:

* ``free text``: plain generation, the tool instructions in the prompt but no grammar (the
  baseline: same prompt length, so the difference is the grammar's cost);
* ``grammar``: one calculator tool, so decoding is constrained to the decision grammar.

Each case is warmed up once (weights load, grammar compiles), then run ``--runs`` times; the
table shows medians. Time to first token is measured to the first streamed chunk; with the
grammar a chunk appears only once the reply's kind is known (after ``{"tool"`` or
``{"answer": "``), which is what a user of the stream sees.

First, the README main command (issue 19's goal: under 5 s wall when run a second time, the
model installed and the process cold) in fresh processes, each ``thinkloop run "What is 12*7?
Use the calculator."`` exactly as a user types it, in a fresh ``THINKLOOP_HOME``:

* ``first run``       the home is new: no KV cache file yet (the baseline);
* ``second run``      the same home again: the system prompt's KV state comes from the file;
* ``no KV cache``     ``THINKLOOP_LOCAL_KV_CACHE=0``: every run evaluates the whole prompt.

With ``--baseline SRC`` the three rows are measured for another source folder too (e.g. a
copy of main's ``src``), interleaved with this checkout's runs, so both see the same load;
``cpu s`` (user + system seconds of the process) shows the work done whatever the load.

    python benchmarks/local_model.py --runs 5 --max-tokens 64 [--skip-main-command]
        [--baseline /tmp/base/src] [--only-main-command]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from thinkloop.models.base import ModelSettings
from thinkloop.models.decision import tools_prompt
from thinkloop.models.llama_state import CallStats
from thinkloop.models.local import LocalModel, default_model_path
from thinkloop.types import Message, ModelResponse, TextDelta, ToolSpec

CALC = ToolSpec(
    "calculator",
    "Evaluate an arithmetic expression.",
    {"type": "object", "properties": {"expression": {"type": "string"}},
     "required": ["expression"]},
)
TASK = "What is 12*7? Use the calculator, then explain multiplication."


def prompt(run: int, tools: list[ToolSpec]) -> list[Message]:
    # A different first line each run defeats llama.cpp's prompt-prefix cache, so time to
    # first token includes evaluating the whole prompt, as for a new conversation. The free
    # text case gets the same tool instructions in its prompt, so only the grammar differs.
    system = f"Session {run}. You are a helpful assistant."
    if not tools:
        system += "\n\n" + tools_prompt([CALC])
    return [Message.system(system), Message.user(TASK)]


@dataclass
class Sample:
    ttft_s: float
    total_s: float
    tokens: int

    @property
    def tokens_per_s(self) -> float:
        """End to end: prompt evaluation included."""
        return self.tokens / self.total_s if self.total_s else 0.0

    @property
    def decode_per_s(self) -> float:
        """After the first chunk: the sampling rate alone."""
        span = self.total_s - self.ttft_s
        return (self.tokens - 1) / span if span > 0 and self.tokens > 1 else 0.0


async def one(
    model: LocalModel, tools: list[ToolSpec], settings: ModelSettings, run: int
) -> Sample:
    started = time.perf_counter()
    first: float | None = None
    final: ModelResponse | None = None
    async for item in model.stream(prompt(run, tools), tools, settings):
        if isinstance(item, TextDelta) and first is None:
            first = time.perf_counter() - started
        elif isinstance(item, ModelResponse):
            final = item
    total = time.perf_counter() - started
    assert final is not None
    return Sample(first if first is not None else total, total, final.usage.output_tokens)


async def case(model: LocalModel, tools: list[ToolSpec], settings: ModelSettings,
               runs: int) -> list[Sample]:
    await one(model, tools, settings, -1)  # warm-up: load weights, compile the grammar
    return [await one(model, tools, settings, run) for run in range(runs)]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--skip-main-command", action="store_true")
    parser.add_argument("--baseline", metavar="SRC", help="another checkout's src folder, "
                        "run side by side for the main command's rows (e.g. main's)")
    parser.add_argument("--only-main-command", action="store_true")
    args = parser.parse_args()
    if not args.skip_main_command:
        main_command(args.runs, args.baseline)
    if args.only_main_command:
        return
    model = LocalModel(default_model_path())
    # A fixed budget makes the token counts comparable; temperature 0 makes runs repeatable.
    settings = ModelSettings(max_tokens=args.max_tokens, temperature=0)
    rows = [("free text", await case(model, [], settings, args.runs)),
            ("grammar", await case(model, [CALC], settings, args.runs))]
    # The ratio compares decode rates: end-to-end rates mostly reflect how long each reply is.
    base = statistics.median(s.decode_per_s for s in rows[0][1])
    print(f"local model {model.path.name}, {args.runs} runs each, medians, "
          f"max_tokens={args.max_tokens}, uncached prompt")
    print(f"{'case':<10} {'tokens':>7} {'tok/s':>8} {'decode/s':>9} {'ttft ms':>9} "
          f"{'total ms':>9} {'decode vs free':>15}")
    for label, samples in rows:
        tps = statistics.median(s.tokens_per_s for s in samples)
        decode = statistics.median(s.decode_per_s for s in samples)
        print(f"{label:<10} {statistics.median(s.tokens for s in samples):>7.0f} {tps:>8.1f} "
              f"{decode:>9.1f} "
              f"{statistics.median(s.ttft_s for s in samples) * 1000:>9.1f} "
              f"{statistics.median(s.total_s for s in samples) * 1000:>9.1f} "
              f"{decode / base if base else 0:>14.2f}x")
    await prefix_reuse(model, args.runs)


MAIN_TASK = "What is 12*7? Use the calculator."
GOAL_SECOND_RUN_S = 5.0


@dataclass
class Timed:
    wall_s: float
    cpu_s: float  # user + system of the process and its children: robust to other load


def main_command_s(home: str, src: str | None = None, **env: str) -> Timed:
    """One ``thinkloop run`` in a fresh process (``src``: the package's source folder to
    run instead, on PYTHONPATH); it must answer 84."""
    argv = [shutil.which("thinkloop") or "thinkloop", "run", MAIN_TASK]
    extra = {"PYTHONPATH": src} if src else {}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "THINKLOOP_HOME": home, **extra, **env})
    took = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or "84" not in done.stdout:
        raise SystemExit(f"the main command did not answer 84 (exit {done.returncode}):\n"
                         f"{done.stdout}{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(took, cpu)


def main_command(runs: int, baseline: str | None) -> None:
    """The rows for this checkout, and with ``baseline`` (another source folder, e.g. main's)
    the same rows for it, interleaved run by run so that both see the same load."""
    sources = {"": None, **({" (base)": baseline} if baseline else {})}
    rows: dict[str, list[Timed]] = {}
    loads = []
    for _ in range(runs):
        for tag, src in sources.items():
            with tempfile.TemporaryDirectory() as home:
                rows.setdefault(f"first run{tag}", []).append(main_command_s(home, src))
                rows.setdefault(f"second run{tag}", []).append(main_command_s(home, src))
            with tempfile.TemporaryDirectory() as home:
                rows.setdefault(f"no KV cache{tag}", []).append(
                    main_command_s(home, src, THINKLOOP_LOCAL_KV_CACHE="0"))
            loads.append(os.getloadavg()[0])
    first = statistics.median(t.wall_s for t in rows["first run"])
    print(f"README main command, {runs} fresh processes each, medians, {os.cpu_count()} "
          f"cores, load average {min(loads):.2f}-{max(loads):.2f}"
          + (f"; (base): {baseline}" if baseline else ""))
    print(f"{'run':<19} {'wall s':>7} {'cpu s':>6} {'x first':>8} {'goal s':>7} {'holds':>6}")
    for label in sorted(rows, key=lambda k: (k.endswith("(base)"), list(rows).index(k))):
        wall = statistics.median(t.wall_s for t in rows[label])
        cpu = statistics.median(t.cpu_s for t in rows[label])
        goal = GOAL_SECOND_RUN_S if label == "second run" else None
        holds = "-" if goal is None else ("yes" if wall < goal else "no")
        print(f"{label:<19} {wall:>7.2f} {cpu:>6.2f} {wall / first:>8.2f} "
              f"{'-' if goal is None else f'{goal:g}':>7} {holds:>6}")
    print()


async def prefix_reuse(model: LocalModel, runs: int) -> None:
    """The KV cache at work: the same system prompt and tools, a new task each run (between
    runs), and a run's second step (between steps), against a cold prompt."""
    settings = ModelSettings(max_tokens=16, temperature=0)
    system = Message.system("You are a helpful assistant. " * 20 + "\n\n" + tools_prompt([CALC]))
    rows: dict[str, list[CallStats]] = {"cold prompt": [], "next run": [], "next step": []}
    for run in range(runs):
        cold = [Message.system(f"Session {run}. " + system.content), Message.user(TASK)]
        await model.complete(cold, [CALC], settings)
        assert model.last_stats is not None
        rows["cold prompt"].append(model.last_stats)
        task = [system, Message.user(f"What is {run + 2}*7? Use the calculator.")]
        await model.complete([system, Message.user("warm up")], [CALC], settings)
        reply = await model.complete(task, [CALC], settings)
        assert model.last_stats is not None
        rows["next run"].append(model.last_stats)
        step = [*task, reply.message, *(Message.tool(c.id, c.name, "14")
                                         for c in reply.message.tool_calls)]
        await model.complete(step, [CALC], settings)
        assert model.last_stats is not None
        rows["next step"].append(model.last_stats)
    print(f"\nKV cache reuse ({runs} runs, medians; reused = prompt tokens not evaluated again)")
    print(f"{'call':<12} {'prompt':>7} {'processed':>10} {'reused':>7} {'total ms':>9}")
    for label, stats in rows.items():
        def med(f: Any, stats: list[CallStats] = stats) -> float:
            return float(statistics.median(f(s) for s in stats))
        print(f"{label:<12} {med(lambda s: s.prompt_tokens):>7.0f} "
              f"{med(lambda s: s.processed_tokens):>10.0f} {med(lambda s: s.reused_tokens):>7.0f} "
              f"{med(lambda s: s.total_s) * 1000:>9.0f}")


if __name__ == "__main__":
    asyncio.run(main())
