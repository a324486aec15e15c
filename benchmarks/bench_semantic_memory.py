"""Peak memory of the encoder metrics at two pool sizes: scoring streams, so a pool ten times larger
costs its scores and its texts, not ten times the embeddings.

Generates a pool of ``--systems`` systems over N items (short sentences; every fourth item has a
second reference; the systems' candidates come from two variants per item, so they repeat as in
real pools), with N giving ``--pairs`` candidate-reference pairs and then ``--factor`` times as
many. Each (metric, pool) runs in a fresh process, with no disk cache: the score stage
(``pipeline.stages.score.score``) on the table, BERTScore or cosine alone. Reported: the peak
resident set (``ru_maxrss``), what scoring added to the resident set it found (the table built,
the libraries imported), the difference of those increments between the pools, and the size of
the extra scores (the segment columns and statistics the stage returns, float64).

What bounds the embeddings held is the encoder's memo (512 MB by default) and its scoring step
(4,096 pairs); what bounds the texts a metric call holds is the score stage's ``rows_per_call``
(16,384 segments). The defaults here make all three small (256 kB, 256 pairs, 1,024 segments) so
that both pools exceed them, as a pool past 512 MB of embeddings (some 30,000 sentences) does at
the defaults. 20,000 and 200,000 pairs take about 20 minutes on 2 CPU cores.

At small pools glibc's heap adds a growth of its own that stops later: a forward pass frees its
activations, glibc keeps them for reuse, and its dynamic mmap threshold lets differently shaped
batches fragment the heap (from 2,000 to 20,000 pairs cosine's peak grew 48 MB with glibc's
defaults, 4 MB with ``MALLOC_MMAP_THRESHOLD_=65536``, which maps and unmaps large buffers each
time and makes the encoder several times slower on a CPU). ``--mmap-thresholds 0,65536`` runs each
pool with both.

    python benchmarks/bench_semantic_memory.py                    # 20,000 and 200,000 pairs
    python benchmarks/bench_semantic_memory.py --pairs 2000 --mmap-thresholds 0,65536
    python benchmarks/bench_semantic_memory.py --memo-kb 0 --step 0 --rows-per-call 0  # defaults
    python benchmarks/bench_semantic_memory.py --json PATH        # the figures
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from results import row, write_rows

ADJ = ["old", "new", "small", "large", "quiet", "busy", "famous", "local", "broken", "early"]
NOUNS = ["report", "market", "village", "river", "council", "teacher", "engine", "garden"]
NOUNS += ["painting", "station", "letter", "court", "company", "doctor", "storm", "bridge"]
NOUNS += ["museum", "student", "farmer", "budget", "window", "island", "song", "train"]
VERBS = ["described", "visited", "repaired", "announced", "rejected", "painted", "opened"]
VERBS += ["closed", "studied", "sold"]


def _sentence(rng: random.Random) -> list[str]:
    return [
        "The",
        rng.choice(ADJ),
        rng.choice(NOUNS),
        rng.choice(VERBS),
        "the",
        rng.choice(ADJ),
        rng.choice(NOUNS),
        rng.choice(["today", "again", "twice", "at dawn", "in May", "for years"]),
    ]


def table(items: int, systems: int, seed: int = 0) -> Any:
    """The tidy table the score stage takes: one row per (item, system)."""
    import pandas as pd

    rng = random.Random(seed)
    rows = []
    for i in range(items):
        words = _sentence(rng)
        ref = " ".join(words) + "."
        refs = [ref, " ".join(_sentence(rng)) + "."] if i % 4 == 0 else [ref]
        swapped = words[:]
        swapped[1], swapped[5] = swapped[5], swapped[1]
        variants = [" ".join(swapped) + ".", " ".join([*words[:3], "has", *words[3:]]) + "!"]
        for s in range(systems):
            rows.append((f"i{i}", f"sys{s}", ref, refs, variants[s % 2]))
    return pd.DataFrame(rows, columns=["item_id", "system", "source", "references", "candidate"])


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(metric_name: str, items: int, args: argparse.Namespace) -> None:
    from paraeval.metrics.bertscore import BERTScore
    from paraeval.metrics.cosine import Cosine
    from paraeval.pipeline.stages.score import score

    df = table(items, args.systems)
    metric = (BERTScore if metric_name == "bertscore" else Cosine)(use_cache=False)
    if args.memo_kb:
        metric.encoder.memo.max_bytes = args.memo_kb << 10
    if args.step:
        metric.encoder.step = args.step
    import torch  # noqa: F401 - imported before the baseline, as a run has it

    before = _rss_mb()
    start = time.perf_counter()
    scores = score(
        df, {metric_name: metric}, progress=False, rows_per_call=args.rows_per_call or None
    )
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    pairs = int(df["references"].map(len).sum())
    columns = list(metric.output_columns)
    score_bytes = len(df) * len(columns) * 8 + sum(a.nbytes for a in scores.stats.values())
    unique = len(set(df["candidate"]) | {r for refs in df["references"] for r in refs})
    result = {
        "peak_mb": peak,
        "before_mb": before,
        "wall": wall,
        "rows": len(df),
        "pairs": pairs,
        "unique": unique,
        "score_bytes": score_bytes,
    }
    args.out.write_text(json.dumps(result), encoding="utf-8")


def run(
    metric: str, items: int, threshold: int, args: argparse.Namespace, work: Path
) -> dict[str, Any]:
    out = work / f"{metric}-{items}.json"
    cmd = [sys.executable, __file__, "--child", metric, "--items", str(items)]
    cmd += ["--systems", str(args.systems), "--memo-kb", str(args.memo_kb), "--out", str(out)]
    cmd += ["--step", str(args.step), "--rows-per-call", str(args.rows_per_call)]
    env = dict(os.environ)
    if threshold:
        env["MALLOC_MMAP_THRESHOLD_"] = str(threshold)
    subprocess.run(cmd, check=True, env=env)
    return dict(json.loads(out.read_text(encoding="utf-8")))


def compare(
    metric: str, items: int, threshold: int, args: argparse.Namespace, work: Path
) -> list[dict[str, Any]]:
    """The metric on the two pools; its figures as rows of the performance table."""
    small = run(metric, items, threshold, args, work)
    big = run(metric, items * args.factor, threshold, args, work)
    heap = f"MALLOC_MMAP_THRESHOLD_={threshold}" if threshold else "glibc's defaults"
    for r in (small, big):
        added = r["peak_mb"] - r["before_mb"]
        print(
            f"{metric:9s} {heap}: {r['pairs']:>9,} pairs {r['unique']:>8,} unique sentences: "
            f"peak {r['peak_mb']:7.0f} MB, scoring added {added:6.0f} MB to "
            f"{r['before_mb']:5.0f} MB, {r['wall']:6.1f} s"
        )
    small_added = small["peak_mb"] - small["before_mb"]
    big_added = big["peak_mb"] - big["before_mb"]
    growth = big_added - small_added
    extra = (big["score_bytes"] - small["score_bytes"]) / 2**20
    print(
        f"{metric:9s} {heap}: {args.factor}x the pool: scoring's peak grew {growth:.1f} MB; the "
        f"extra scores take {extra:.1f} MB (the whole peak grew "
        f"{big['peak_mb'] - small['peak_mb']:.0f} MB, the table included)"
    )
    sizes = f"{small['pairs']:,} to {big['pairs']:,} pairs"
    return [
        row(
            "bench_semantic_memory",
            f"{metric}, peak memory scoring added, {big['pairs']:,} pairs, {heap}",
            big_added,
            "MB",
            f"the same at {small['pairs']:,} pairs",
            small_added,
        ),
        row(
            "bench_semantic_memory",
            f"{metric}, growth of that peak from {sizes}, {heap}",
            growth,
            "MB",
            "the extra scores (segment columns and statistics, float64)",
            extra,
        ),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20_000, help="pairs of the smaller pool")
    ap.add_argument("--factor", type=int, default=10)
    ap.add_argument("--systems", type=int, default=5)
    ap.add_argument("--metrics", default="bertscore,cosine")
    ap.add_argument(
        "--memo-kb", type=int, default=256, help="the encoder memo's bound (0: its default)"
    )
    ap.add_argument(
        "--rows-per-call",
        type=int,
        default=1_024,
        help="segments per call of a segment-local metric (0: the score stage's default)",
    )
    ap.add_argument(
        "--mmap-thresholds",
        default="0",
        help="MALLOC_MMAP_THRESHOLD_ of the children, each in turn (0: glibc's dynamic one)",
    )
    ap.add_argument(
        "--step", type=int, default=256, help="pairs per scoring step (0: the encoder's default)"
    )
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--items", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.items, args)
        return 0
    import tempfile

    items = max(1, round(args.pairs / (args.systems * 1.25)))
    rows = []
    with tempfile.TemporaryDirectory(prefix="paraeval-bench-") as tmp:
        for threshold in [int(t) for t in args.mmap_thresholds.split(",")]:
            for metric in args.metrics.split(","):
                rows += compare(metric, items, threshold, args, Path(tmp))
    write_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
