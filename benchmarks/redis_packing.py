"""What packing a Redis command costs: redis-py 5's asyncio connection against the fleet's
(``thinkloop.workers.connect``: hiredis packs, as redis-py's synchronous connections do).

The commands are the fleet's own: an outbox write (EVALSHA of the events of R runs, each run
its stream key, id, first number and its events joined by lines; an event is 350 bytes of
JSON, about the median of the scale benchmark's), arq's job transaction (five short
commands) and a take. Times are medians of 7 repeats, microseconds per command, in one run.

Usage: python benchmarks/redis_packing.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import timeit
from collections.abc import Callable
from typing import Any

from redis.asyncio.connection import Connection

from thinkloop.core.settings import load_settings
from thinkloop.workers.connect import redis_pool

EVENT = b'{"id":7,"type":"tool.finished","run_id":"r","step":2,"ts":1.5,"payload":{' + (
    b'"x":"' + b"y" * 290 + b'"}}')


def outbox(runs: int, events: int) -> tuple[Any, ...]:
    keys = [f"tl:ev:{i:032x}" for i in range(runs)]
    args: list[Any] = []
    for i in range(runs):
        args += [f"{i:032x}", 3, b"\n".join([EVENT] * events)]
    return ("EVALSHA", "a" * 40, len(keys) + 1, "tl:news", *keys, 10_000, *args)


COMMANDS: dict[str, tuple[Any, ...] | list[tuple[Any, ...]]] = {
    "outbox write, 1 run x 3 events": outbox(1, 3),
    "outbox write, 8 runs x 3 events": outbox(8, 3),
    "outbox write, 40 runs x 3 events": outbox(40, 3),
    "arq's job transaction (5 commands)": [
        ("MULTI",), ("GET", "arq:job:" + "j" * 32), ("INCR", "arq:retry:" + "j" * 32),
        ("EXPIRE", "arq:retry:" + "j" * 32, 88400), ("EXEC",)],
    "take (EVALSHA, 5 arguments)": ("EVALSHA", "b" * 40, 1, "tl:queue", 1764280000000, 500,
                                    4, "arq:in-progress:", 30000),
}


def timed(pack: Callable[..., Any], command: tuple[Any, ...] | list[tuple[Any, ...]],
          repeat: int) -> float:
    commands = command if isinstance(command, list) else [command]

    def once() -> None:
        for c in commands:
            pack(*c)

    number = 2000
    return statistics.median(t / number * 1e6 for t in timeit.repeat(once, number=number,
                                                                     repeat=repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    theirs = Connection()
    pool: Any = redis_pool(load_settings(env={
        "THINKLOOP_QUEUE_URL": "redis://127.0.0.1:6379/0",
        "THINKLOOP_DATABASE_URL": "postgresql://127.0.0.1/x"})).connection_pool
    ours = pool.make_connection()
    print(f"{'command':38}{'redis-py us':>13}{'fleet us':>10}{'ratio':>8}")
    for name, command in COMMANDS.items():
        a = timed(theirs.pack_command, command, args.repeat)
        b = timed(ours.pack_command, command, args.repeat)
        print(f"{name:38}{a:>13.1f}{b:>10.1f}{b / a:>8.2f}")


if __name__ == "__main__":
    main()
