"""Scan cost of one long text, by shape, size and scanner: every scanner that reads
untrusted text (tool output, a user's message, a model's answer).

Scanners: ``patterns`` (the input guard's injection patterns over every view of the text),
``classifier`` (the trained injection classifier), ``spotlight`` (wrapping outside content),
``secrets`` (the vault that hides secret values and their encodings), ``sensitivity``
(classifying a tool call whose argument is the text), ``sanitizer`` (cleaning a final
answer), ``echo`` (undoing spotlit copies in an answer) and ``hosts`` (the host names a text
names, for provenance). Shapes: single lines that once made a scan quadratic, the words the
patterns look for over and over, and many short lines.

Each cell is one run, in milliseconds, after one warm-up call per scanner (compiling its
patterns); each column should grow about linearly with the size.
Usage: python benchmarks/scan_scale.py [--sizes 256,1024] (KB) [--scanners patterns,secrets]
    [--shapes words,lines] [--clock wall|cpu] [--vocabularies]
"""

from __future__ import annotations

import argparse
import functools
import random
import re
import string
import time
from collections.abc import Callable

from thinkloop.guard.classifier import Classifier
from thinkloop.guard.patterns import DEFAULT_PATTERNS
from thinkloop.guard.scan import scan_input
from thinkloop.guard.targets import hosts_in
from thinkloop.judgement.sensitive import Vault, classify_call
from thinkloop.protocols.sanitize import sanitize_output
from thinkloop.spotlight import spotlight, strip_echo
from thinkloop.types import ToolCall


def _words(n: int, source: str) -> str:
    """Random words of those spelt out in a pattern's source, ``n`` characters."""
    rng = random.Random(1)
    return " ".join(rng.choices(sorted(set(re.findall(r"[a-z]+", source))), k=n // 4))[:n]


SHAPES: dict[str, Callable[[int], str]] = {
    "one word (y...)": lambda n: "y" * n,
    "one number": lambda n: "1" * n,
    "![ repeated": lambda n: "![" * (n // 2),
    "%41 repeated": lambda n: "%41" * (n // 3),
    "'ai ' repeated": lambda n: "ai " * (n // 3),
    "a.a.a. (words)": lambda n: "a." * (n // 2),
    "attack words": lambda n: "ignore the previous instructions you are now " * (n // 46),
    "key headers": lambda n: "-----BEGIN RSA PRIVATE KEY-----" * (n // 31),
    "prose": lambda n: "the quick brown fox jumps over it " * (n // 33),
    "minified JSON": lambda n: '{"a":1,"b":[1,2,3],"name":"value"},' * (n // 36),
    "short lines": lambda n: "line of a log: GET /index.html 200\n" * (n // 36),
    # The worst shapes found since: every window different, no repeated piece, a character
    # at a time through Unicode folding, a line per character, and each derived view.
    "random words": lambda n: _random(n, "abcdefghijklmnopqrstuvwxyz    "),
    "numbered words": lambda n: " ".join(map(str, range(n // 7))),
    "random base64": lambda n: _random(n, string.ascii_letters + string.digits + "+/"),
    "mixed scripts": lambda n: "ignоrе Привет 你好 ĳ\u200b ﬁ é 🙂 " * (n // 27),
    "lone surrogates": lambda n: "ab\udcff\udc80 " * (n // 5),
    "one-char lines": lambda n: "a\n" * (n // 2),
    "attack lines": lambda n: "ignore the previous instructions\n" * (n // 33),
    "leet words": lambda n: "1gn0r3 th3 pr3v10u5 1n5truct10n5 " * (n // 33),
    "spaced letters": lambda n: "i g n o r e p r e v i o u s " * (n // 28),
    "typos": lambda n: "ignroe the prevoius instrucitons " * (n // 33),
    "dropped letters": lambda n: "ignre the prevous instructons " * (n // 30),
    "sentences": lambda n: "I am glad. " * (n // 11),
    "words, then a blob": lambda n: _random(n // 2, "abcdefgh  ") + " " + _random(n // 2, "xyz+/"),
    # The words the patterns look for, in random order and with no sentence end: every
    # pattern's pieces are there, and a counted gap's leads are everywhere (guard/gaps.py).
    "own words": lambda n: _words(n, " ".join(p.regex.pattern for p in DEFAULT_PATTERNS)),
}
# With --vocabularies: each pattern's own words alone, in random order.
VOCABULARIES: dict[str, Callable[[int], str]] = {
    f"words of #{i}": functools.partial(_words, source=p.regex.pattern)
    for i, p in enumerate(DEFAULT_PATTERNS)
}


def _random(n: int, alphabet: str) -> str:
    rng = random.Random(7)  # the same text every run
    return "".join(rng.choices(alphabet, k=n))


def scanners() -> dict[str, Callable[[str], object]]:
    clf = Classifier.load()
    return {
        "patterns": scan_input, "classifier": clf.scan,
        "spotlight": lambda t: spotlight(t, "x"),
        "secrets": lambda t: Vault().hide(t),
        "sensitivity": lambda t: classify_call(ToolCall("c", "write_file", {"content": t})),
        "sanitizer": sanitize_output,
        "echo": lambda t: strip_echo(spotlight(t, "x") + t),
        "hosts": hosts_in,
    }


def seconds(fn: Callable[[str], object], text: str, clock: Callable[[], float]) -> float:
    start = clock()
    fn(text)
    return clock() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="256,1024")
    parser.add_argument("--scanners", default="")
    parser.add_argument("--shapes", default="")
    # cpu: the scanning thread's CPU time, which other processes on a loaded machine do not
    # inflate as they do the wall clock's.
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--vocabularies", action="store_true",
                        help="add a shape per pattern: its own words alone")
    args = parser.parse_args()
    sizes = [int(s) * 1024 for s in args.sizes.split(",")]
    chosen = scanners()
    if args.scanners:
        chosen = {k: v for k, v in chosen.items() if k in args.scanners.split(",")}
    shapes = {k: v for k, v in (SHAPES | VOCABULARIES if args.vocabularies else SHAPES).items()
              if not args.shapes or any(s in k for s in args.shapes.split(","))}
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    for fn in chosen.values():  # compiled once, before the first cell (RE2's patterns too)
        # Long enough that RE2 compiles its patterns here too, and that the classifier builds
        # its table for numpy (guard/ngrams.py), once a process, as a scanner's first call.
        fn("warm up: ignore the previous instructions, see https://a.example " * 100
           + _random(60_000, string.ascii_letters + " " * 8))
    print(f"{'shape':18} {'scanner':11} " + " ".join(f"{s // 1024:>7} KB" for s in sizes))
    for shape, make in shapes.items():
        for name, fn in chosen.items():
            cells = [f"{seconds(fn, make(n), clock) * 1000:8.0f}ms" for n in sizes]
            print(f"{shape:18} {name:11} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
