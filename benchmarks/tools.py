"""Built-in tools: shell spawn overhead and search_tools ranking quality and latency.

1. ``shell``: median wall time of a trivial command through ``run_process`` (own process group,
   capped reader, timeout) against ``subprocess.run(shell=True)`` measured in the same run.
2. ``search_tools``: top-1 accuracy on paraphrased queries (written without the workflows'
   wording) for the shipped fusion (cosine + 0.1 x scaled BM25) against dense only, BM25
   only and reciprocal rank fusion; and median query latency with a warm index.

Usage: python benchmarks/tools.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from thinkloop.tools.builtin.embeddings import MiniLMEmbedder
from thinkloop.tools.builtin.process import run_process
from thinkloop.tools.builtin.toolsearch import Entry, ToolIndex
from thinkloop.tools.builtin.workflows import Skill, Workflow

WORKFLOWS = {
    "db_backup": "Dump a PostgreSQL database to a compressed SQL file",
    "resize_images": "Scale every JPEG and PNG picture in a folder down to a maximum width",
    "check_disk_space": "Report how full each mounted filesystem is",
    "deploy_site": "Build the static website and upload it to the production web server",
    "send_sales_report": "Email the weekly sales figures spreadsheet to the management team",
    "rotate_logs": "Compress application log files older than a week and delete ancient ones",
    "weather_forecast": "Get tomorrow's weather forecast for a city",
    "translate_doc": "Translate a text document into another language",
    "renew_certs": "Renew the TLS certificates of the web server before they expire",
    "user_signup_stats": "Count new user registrations per day for the last month",
}
SKILLS = {
    "incident": "Handling a production outage: page the on-call engineer, open a status page.",
    "code-review": "How to review a pull request: read the diff twice, check tests first.",
}
QUERIES = [
    ("make a copy of my postgres data", "db_backup"),
    ("back up the shop database", "db_backup"),
    ("shrink the photos so they are smaller", "resize_images"),
    ("make these pictures 800 pixels wide", "resize_images"),
    ("how much free storage is left on the machine", "check_disk_space"),
    ("is the hard drive almost full", "check_disk_space"),
    ("publish the web site to prod", "deploy_site"),
    ("push the new version of the homepage live", "deploy_site"),
    ("mail the revenue numbers to the bosses", "send_sales_report"),
    ("will it rain in Paris tomorrow", "weather_forecast"),
    ("clean up old logs", "rotate_logs"),
    ("put this letter into Spanish", "translate_doc"),
    ("our https certificate expires next week", "renew_certs"),
    ("how many people joined recently", "user_signup_stats"),
    ("the site is down, what do I do", "incident"),
    ("the app is broken in production, who do I call", "incident"),
    ("someone asked me to look over their pull request", "code-review"),
    ("give feedback on a colleague's code change", "code-review"),
]


def entries() -> list[Entry]:
    out = [Entry("workflow", n, f"{n.replace('_', ' ')}: {d}",
                 Workflow(name=n, description=d, run="true")) for n, d in WORKFLOWS.items()]
    out += [Entry("skill", n, f"{n.replace('-', ' ')}: {d}", Skill(n, d, d))
            for n, d in SKILLS.items()]
    return out


def ranked(index: ToolIndex, query: str, how: str) -> str:
    import bm25s

    index.search(query)  # builds the index
    assert index._vectors is not None
    qvec = [float(x) for x in index.embedder.embed([query])[0]]
    sims = [sum(a * b for a, b in zip(qvec, v, strict=True)) for v in index._vectors]
    toks = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
    lex = [float(s) for s in index._bm25.get_scores(toks)] if toks else [0.0] * len(sims)
    if how == "dense":
        score = sims
    elif how == "bm25":
        score = lex
    elif how == "rrf":
        score = [0.0] * len(sims)
        for scores in (sims, lex):
            for rank, i in enumerate(sorted(range(len(scores)), key=lambda i: -scores[i])):
                score[i] += 1 / (61 + rank) if scores[i] > 0 else 0
    else:
        hits = index.search(query, 1)
        return hits[0].entry.name if hits else "-"
    best = max(range(len(score)), key=lambda i: score[i])
    return index.entries[best].name


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def shell_overhead(repeat: int) -> tuple[float, float]:
    cwd = Path(tempfile.mkdtemp())
    ours, base = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        await run_process("echo hi", cwd=cwd, timeout_s=10, cap=1 << 20)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run("echo hi", shell=True, cwd=cwd, capture_output=True, check=True)  # noqa: ASYNC221
        base.append(time.perf_counter() - t)
    return median_ms(ours), median_ms(base)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()

    ours, base = asyncio.run(shell_overhead(args.repeat))
    print("shell: 'echo hi', median of", args.repeat)
    print(f"| runner | ms | ratio |\n|---|---|---|\n| subprocess.run (baseline) | {base:.2f} | "
          f"1.00 |\n| thinkloop run_process | {ours:.2f} | {ours / base:.2f} |\n")

    index = ToolIndex(entries(), MiniLMEmbedder())
    print(f"search_tools: top-1 accuracy on {len(QUERIES)} paraphrased queries, "
          f"{len(index.entries)} items")
    print("| ranking | top-1 |\n|---|---|")
    for how in ("bm25", "dense", "rrf", "shipped"):
        right = sum(ranked(index, q, how) == want for q, want in QUERIES)
        print(f"| {how} | {right}/{len(QUERIES)} |")
    lat = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        index.search("how much free storage is left")
        lat.append(time.perf_counter() - t)
    print(f"\nwarm search latency: median {median_ms(lat):.2f} ms over {args.repeat}")


if __name__ == "__main__":
    main()
