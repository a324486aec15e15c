"""TER: paraeval's compiled edit-rate search against sacrebleu's TER, in the same run.

Pairs: ParaBank-Eval's distinct (candidate, source) pairs from ``../shared/data`` (the source as
the reference), else the synthetic varied sets of the tests. For each TER setting both sides
compute per-segment statistics, every segment score and the corpus score, tokenization included:

- ours: ``paraeval.metrics.sacre.TER(**setting).score(cands, refs)``, a fresh object each time;
- anchor: one ``sacrebleu.metrics.TER(**setting)`` object: ``_extract_corpus_statistics`` once,
  then its ``_compute_score_from_stats`` per segment and on the summed statistics (the least
  work sacrebleu needs for both levels; ``sentence_ter`` + ``corpus_ter`` would do the search
  twice).

Each side gets a fresh metric object (sacrebleu memoises tokenization per tokenizer object); the
compiled kernels are loaded once beforehand. Every segment score and the corpus score are checked
for exact equality. Speed-up = anchor time / ours.

Usage: ``python benchmarks/bench_ter.py [--n 1000] [--repeat 1] [--settings all|default]
[--json PATH]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from results import row, write_rows  # noqa: E402  (found through the path set above)

SETTINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "normalized": {"normalized": True},
    "no_punct": {"no_punct": True},
    "case_sensitive": {"case_sensitive": True},
    "norm+asian": {"normalized": True, "asian_support": True},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1, help="best of this many runs")
    parser.add_argument("--settings", choices=("all", "default"), default="all")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)

    import numpy as np
    from bench_syntactic import parabank_pairs, synthetic_pairs
    from sacrebleu.metrics.ter import TER as SacreTER

    from paraeval.metrics import sacre

    pairs = parabank_pairs(args.n)
    source = "ParaBank-Eval (distinct candidate vs source pairs)"
    if pairs is None:
        pairs = synthetic_pairs(args.n)
        source = "synthetic varied sets"
    cands, refs = pairs
    width = max(len(r) for r in refs)
    streams: list[list[Any]] = [
        [rs[k] if k < len(rs) else None for rs in refs] for k in range(width)
    ]
    sacre.TER().score(["a b c"], [["c a b"]])  # load the compiled kernels

    print(f"{len(cands)} pairs from {source}; best of {args.repeat}; segment + corpus scores")
    print(f"{'setting':<15} {'ours s':>8} {'sacrebleu s':>12} {'speed-up':>9}  equal")
    names = list(SETTINGS) if args.settings == "all" else ["default"]
    worst = float("inf")
    rows = []
    for name in names:
        opts = SETTINGS[name]
        t_ours = t_ref = float("inf")
        for _ in range(args.repeat):
            metric = sacre.TER(**opts)
            t0 = time.perf_counter()
            result = metric.score(cands, refs)
            t_ours = min(t_ours, time.perf_counter() - t0)

            anchor = SacreTER(**opts)
            t0 = time.perf_counter()
            stats = anchor._extract_corpus_statistics(cands, streams)
            seg = [anchor._compute_score_from_stats(s).score for s in stats]
            total = [sum(col) for col in zip(*stats, strict=True)]
            corpus = anchor._compute_score_from_stats(total).score
            t_ref = min(t_ref, time.perf_counter() - t0)
        equal = bool(
            np.array_equal(result.segment["ter"], np.asarray(seg, dtype=float))
            and result.corpus["ter"] == corpus
        )
        worst = min(worst, t_ref / t_ours)
        print(f"{name:<15} {t_ours:>8.3f} {t_ref:>12.3f} {t_ref / t_ours:>8.1f}x  {equal}")
        if not equal:
            return 1
        what = f"TER ({name}), segment and corpus scores, {len(cands):,} pairs from {source}"
        side = "sacrebleu's TER: statistics once, then scores from them"
        rows.append(row("bench_ter", what, t_ours, "s", side, t_ref))
    print(f"smallest speed-up: {worst:.1f}x")
    write_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
