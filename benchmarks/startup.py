"""Start-up cost: ``import thinkloop`` and ``thinkloop --help`` in fresh processes.

Each figure is the median of N fresh interpreters, measured side by side with the bare
interpreter (``python -c pass``) in the same run, so that load from other processes shows as
a ratio rather than hiding in the absolute time:

* import thinkloop     ``-X importtime`` cumulative time of the ``thinkloop`` package (goal
                       150 ms) and how many modules the process holds after it
* from thinkloop       ``from thinkloop import Agent``: what a program using the engine pays
  import Agent         (information; the public names load on first use)
* thinkloop --help     wall time of the whole process (goal 300 ms): plain click help, the
                       command modules import neither rich, asyncio, the store nor pydantic
* thinkloop run        the same for a command's help (information: typer 0.29 builds its
  --help               parameter converters with pydantic, so a command's help loads it)

``--against PYTHON`` measures another install (e.g. an interpreter with the previous release)
in the same run, interleaved, for a before/after ratio robust to load.

Usage: python benchmarks/startup.py [--runs 15] [--against /path/to/python]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

GOAL_IMPORT_MS = 150.0
GOAL_HELP_MS = 300.0
_IMPORTTIME = re.compile(r"import time:\s+\d+ \|\s+(\d+) \|\s+(\S+)$")
_COUNT = "import sys, {what}; print(len(sys.modules))"
_CLI = "from thinkloop.cli.app import main; main()"
_CLI_COUNT = ("import sys; sys.argv = ['thinkloop', {args}]\n"
              "from thinkloop.cli.app import main\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              "print(len(sys.modules), file=sys.stderr)")


def _env() -> dict[str, str]:
    # No bytecode writes or user site in the way; the same environment for every row.
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "100"}


def wall_ms(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=_env(), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def import_ms(python: str, statement: str, module: str) -> float:
    """Cumulative import time of ``module`` reported by ``-X importtime``, in ms."""
    out = subprocess.run([python, "-X", "importtime", "-c", statement], env=_env(),
                         check=True, capture_output=True, text=True).stderr
    for line in out.splitlines():
        m = _IMPORTTIME.match(line.strip())
        if m and m.group(2) == module:
            return int(m.group(1)) / 1000
    raise RuntimeError(f"{module} not in the -X importtime output of {statement!r}")


def timed_ms(python: str, statement: str) -> float:
    """``statement`` timed inside a fresh interpreter (-X importtime misses the imports a
    module ``__getattr__`` makes through importlib)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    out = subprocess.run([python, "-c", code], env=_env(), check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip()) * 1000


def module_count(python: str, what: str) -> int:
    out = subprocess.run([python, "-c", _COUNT.format(what=what)], env=_env(),
                         check=True, capture_output=True, text=True).stdout
    return int(out.strip())


def cli_module_count(python: str, *args: str) -> int:
    """Modules a CLI invocation holds when it exits (printed on stderr, after the help)."""
    code = _CLI_COUNT.format(args=", ".join(repr(a) for a in args))
    out = subprocess.run([python, "-c", code], env=_env(), check=True,
                         capture_output=True, text=True).stderr
    return int(out.strip().splitlines()[-1])


def measure(pythons: list[str], runs: int) -> list[dict[str, float]]:
    samples: list[dict[str, list[float]]] = [
        {k: [] for k in ("bare", "import", "agent", "help", "run_help")} for _ in pythons]
    for _ in range(runs):  # interleaved, so every row sees the same load
        for python, s in zip(pythons, samples, strict=True):
            s["bare"].append(wall_ms([python, "-c", "pass"]))
            s["import"].append(import_ms(python, "import thinkloop", "thinkloop"))
            s["agent"].append(timed_ms(python, "from thinkloop import Agent"))
            s["help"].append(wall_ms([python, "-c", _CLI, "--help"]))
            s["run_help"].append(wall_ms([python, "-c", _CLI, "run", "--help"]))
    return [{k: statistics.median(v) for k, v in s.items()} for s in samples]


def table(python: str, r: dict[str, float], title: str) -> None:
    print(f"\n{title}\n")
    print(f"{'what':<28} {'median ms':>10} {'goal ms':>8} {'holds':>6} {'modules':>8}")
    rows = [
        ("python -c pass (baseline)", r["bare"], None, module_count(python, "os")),
        ("import thinkloop", r["import"], GOAL_IMPORT_MS, module_count(python, "thinkloop")),
        ("from thinkloop import Agent", r["agent"], None,
         module_count(python, "thinkloop; from thinkloop import Agent")),
        ("thinkloop --help (wall)", r["help"], GOAL_HELP_MS, cli_module_count(python, "--help")),
        ("thinkloop run --help (wall)", r["run_help"], None,
         cli_module_count(python, "run", "--help")),
    ]
    for name, ms, goal, mods in rows:
        holds = "-" if goal is None else ("yes" if ms < goal else "no")
        print(f"{name:<28} {ms:>10.1f} {'-' if goal is None else f'{goal:.0f}':>8} {holds:>6} "
              f"{mods if mods is not None else '-':>8}")
    print(f"--help over the bare interpreter: {r['help'] - r['bare']:.1f} ms "
          f"({r['help'] / r['bare']:.1f}x its start-up)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--against", help="another interpreter to measure in the same run")
    args = parser.parse_args()
    pythons = [sys.executable, *([args.against] if args.against else [])]
    results = measure(pythons, args.runs)
    print(f"start-up, median of {args.runs} fresh processes, load average "
          f"{os.getloadavg()[0]:.2f}")
    for python, r in zip(pythons, results, strict=True):
        table(python, r, python)
    if args.against:
        this, other = results
        print("\nthis install / the other: " + ", ".join(
            f"{k} {this[k] / other[k]:.2f}x" for k in ("import", "agent", "help", "run_help")))


if __name__ == "__main__":
    main()
