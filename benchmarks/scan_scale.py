"""Scan cost of one long single-line text, by shape and size (issue 30).

Before issue 30 some shapes were quadratic (a 96 KB line took 44 s); each column should now
grow about linearly with the size. The issue's goal, 1 MB under 200 ms, is not met: the
patterns run over several views of the text with Python's ``re``.

Usage: python benchmarks/scan_scale.py [--sizes 64,256,1024] (KB)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from thinkloop.guard.classifier import Classifier
from thinkloop.guard.scan import scan_input
from thinkloop.spotlight import spotlight

SHAPES: dict[str, Callable[[int], str]] = {
    "one word (y...)": lambda n: "y" * n,
    "one number": lambda n: "1" * n,
    "![ repeated": lambda n: "![" * (n // 2),
    "%41 repeated": lambda n: "%41" * (n // 3),
    "'ai ' repeated": lambda n: "ai " * (n // 3),
    "prose": lambda n: "the quick brown fox jumps over it " * (n // 33),
    "minified JSON": lambda n: '{"a":1,"b":[1,2,3],"name":"value"},' * (n // 36),
}


def seconds(fn: Callable[[str], object], text: str) -> float:
    start = time.perf_counter()
    fn(text)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="64,256,1024")
    sizes = [int(s) * 1024 for s in parser.parse_args().sizes.split(",")]
    clf = Classifier.load()
    scanners: dict[str, Callable[[str], object]] = {
        "patterns": scan_input, "classifier": clf.scan,
        "spotlight": lambda t: spotlight(t, "x")}
    print(f"{'shape':18} {'scanner':11} " + " ".join(f"{s // 1024:>7} KB" for s in sizes))
    for shape, make in SHAPES.items():
        for name, fn in scanners.items():
            cells = [f"{seconds(fn, make(n)) * 1000:8.0f}ms" for n in sizes]
            print(f"{shape:18} {name:11} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
