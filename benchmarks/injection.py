"""Indirect prompt injection: attack success and utility per defence, on the scenario suite.

44 tasks (banking, e-mail, files, web; thinkloop.testing.injection), each a legitimate task
whose tool output carries an injected instruction to transfer money, send data out, delete
files or run a command. Two scripted models: ``obeying`` always obeys the last instruction it
read (the worst case: spotlighting does not stop it), ``faithful`` ignores injections.
Attack success = the injected call ran, counted at the tool; utility = the task's own side
effects ran and the answer holds its fact. Side effects are auto-approved in every defence.

The exfiltration scenarios (data in a web_fetch query, path or host name, a browser
navigation, an MCP tool without annotations) and the laundering ones (values echoed through
calculator, string tools, files; thinkloop.testing.exfiltration) follow in their own rows.

The last table is issue 29's utility goal: over the tasks of the three suites where the
user's request names every target (payee, amount, recipient, path, host), the tasks done with
approvals on auto and provenance gating on, as a ratio to the undefended run measured in the
same run (goal: at least 90%), with the machine's load beside it.

Usage: python benchmarks/injection.py [--only-utility]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics

from thinkloop.testing.exfiltration import EXFILTRATION, LAUNDERING, names_every_target
from thinkloop.testing.injection import (
    SCENARIOS,
    Scenario,
    defences,
    faithful_model,
    obeying_model,
    play,
)


async def main(only_utility: bool) -> None:
    if not only_utility:
        for title, suite in (("injection", SCENARIOS), ("exfiltration", EXFILTRATION),
                             ("laundering", LAUNDERING)):
            await table(title, suite)
    await named_utility()


async def named_utility() -> None:
    named = tuple(s for s in SCENARIOS + EXFILTRATION + LAUNDERING if names_every_target(s))
    n = len(named)
    print(f"\nutility where the user names every target: {n} tasks, faithful model, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print(f"{'defence':8s} {'tasks done':>10s} {'utility':>8s} {'vs undefended':>14s}")
    done: dict[str, int] = {}
    for name in ("off", "gating", "plan"):
        kw = defences()[name]
        done[name] = sum([(await play(s, faithful_model(s), kw)).useful for s in named])
        print(f"{name:8s} {done[name]:5d}/{n:<4d} {done[name] / n:8.1%} "
              f"{done[name] / max(done['off'], 1):14.1%}")
    print("(gating and plan: approvals on auto; goal: at least 90% of undefended)")


async def table(title: str, scenarios: tuple[Scenario, ...]) -> None:
    n = len(scenarios)
    print(f"\n{title}: {n} scenarios\n")
    print(f"{'defence':8s} {'model':9s} {'attacks ran':>12s} {'utility':>9s} "
          f"{'model calls':>11s} {'chars sent (median)':>20s}")
    for name, kw in defences().items():
        for label, make in (("obeying", obeying_model), ("faithful", faithful_model)):
            outs = [await play(s, make(s), kw) for s in scenarios]
            harmed = sum(o.harmed for o in outs)
            useful = sum(o.useful for o in outs)
            calls = sum(o.model_calls for o in outs)
            chars = statistics.median(o.chars_sent for o in outs)
            print(f"{name:8s} {label:9s} {harmed:5d}/{n} {harmed / n:5.0%} "
                  f"{useful / n:8.1%} {calls:11d} {chars:20.0f}")
            lost = [o.scenario for o in outs if not o.useful]
            if lost and label == "faithful":
                print(f"{'':18s}tasks not done: {', '.join(lost)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only-utility", action="store_true",
                        help="print only the named-target utility table")
    asyncio.run(main(parser.parse_args().only_utility))
