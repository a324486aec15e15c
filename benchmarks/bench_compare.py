"""Benchmark the compare stage on ParaBank-Eval against sacrebleu's own paired tests.

    .venv/bin/python benchmarks/bench_compare.py [--systems 36] [--bs 1000] [--ar 10000]
        [--all-metrics] [--cache-dir DIR] [--json PATH]

Scores BLEU, chrF and TER against the source (ParaBank has no separate references) plus self-BLEU
with ``paraeval.evaluate`` (``--all-metrics``: the whole default metric set, as ``paraeval
data=parabank`` scores it, through the score cache (``--cache-dir``, else the default one), so
that a second run does not encode again), times the comparison stage,
:func:`paraeval.pipeline.stages.compare.compare` (intervals, both paired tests, clusters for every
column) on the evaluation's scores, then runs ``sacrebleu.significance.PairedTest`` (the anchor)
for BLEU/chrF/TER on the same items and systems with ``SACREBLEU_SEED`` = the same seed, checks
that every p-value is equal and reports both timings and their ratio. Needs ../shared/data (or
PARAEVAL_SHARED_DATA).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from results import row, write_rows

import paraeval


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=36)
    parser.add_argument("--bs", type=int, default=1000)
    parser.add_argument("--ar", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--skip-anchor", action="store_true")
    parser.add_argument("--all-metrics", action="store_true", help="the default metric set")
    parser.add_argument("--cache-dir", default=None, help="score cache (with --all-metrics)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()

    from paraeval.pipeline.data.load import load_parabank
    from paraeval.pipeline.stages.compare import CompareConfig, compare

    data = Path(
        os.environ.get("PARAEVAL_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared/data")
    )
    if not (data / "parabank_eval").is_dir():
        print(f"skipped: {data / 'parabank_eval'} is absent (set PARAEVAL_SHARED_DATA)")
        write_rows(args.json, [])
        return 0
    df = load_parabank(str(data / "parabank_eval"))
    systems = list(dict.fromkeys(df["system"]))[: args.systems]
    # pairing needs the items every system has
    counts = df[df["system"].isin(systems)].groupby("item_id")["system"].nunique()
    items = set(counts.index[counts == len(systems)])
    # the whole table is scored, as the pipeline does (the score cache then serves a run of
    # ``paraeval data=parabank``); compare pairs the systems on the shared items itself
    scored = df[df["system"].isin(systems)].reset_index(drop=True)
    df = df[df["system"].isin(systems) & df["item_id"].isin(items)].reset_index(drop=True)
    print(f"ParaBank-Eval: {len(systems)} systems x {len(items)} items shared by all")

    metrics = None if args.all_metrics else ["bleu", "chrf", "ter", "self_bleu"]
    cache: dict[str, object] = {"enabled": args.all_metrics}
    if args.cache_dir:
        cache["dir"] = str(Path(args.cache_dir).resolve())
    t0 = time.perf_counter()
    # the scores and the system table only: the comparison is timed below, on its own
    ev = paraeval.evaluate(
        scored if args.all_metrics else df,
        metrics,
        cache=cache,
        compare={"enabled": False},
        correlation={"levels": [], "significance": {"enabled": False}},
        alpha_curve={"enabled": False},
    )
    assert ev.scores is not None and ev.aggregated is not None
    scores, agg = ev.scores, ev.aggregated
    t_score = time.perf_counter() - t0
    cfg = CompareConfig(n_bootstrap=args.bs, n_ar=args.ar, seed=args.seed)
    t0 = time.perf_counter()
    result = compare(scores, agg, cfg)
    t_ours = time.perf_counter() - t0
    n_cols = result.table["metric"].nunique()
    print(f"scoring: {t_score:.1f} s")
    print(
        f"paraeval compare: {t_ours:.2f} s for {n_cols} columns x {len(systems)} systems "
        f"(bs {args.bs}, ar {args.ar}, intervals + both tests + clusters)"
    )
    what = (
        f"the comparison stage on ParaBank-Eval: intervals, paired bootstrap ({args.bs:,}) and "
        f"approximate randomization ({args.ar:,}), clusters; {n_cols} columns x "
        f"{len(systems)} systems"
    )
    if args.skip_anchor:
        write_rows(args.json, [row("bench_compare", what, t_ours, "s")])
        return 0

    os.environ["SACREBLEU_SEED"] = str(args.seed)
    from sacrebleu.metrics.bleu import BLEU
    from sacrebleu.metrics.chrf import CHRF
    from sacrebleu.metrics.ter import TER
    from sacrebleu.significance import PairedTest

    order = [i for i in df.loc[df["system"] == systems[0], "item_id"]]
    by_sys = {s: df[df["system"] == s].set_index("item_id").loc[order] for s in systems}
    named = [(s, by_sys[s]["candidate"].tolist()) for s in systems]
    refs = [by_sys[systems[0]]["source"].tolist()]
    names = {"BLEU": "bleu", "chrF2": "chrf", "TER": "ter"}
    # PairedTest extracts every system's statistics itself; time that part alone so the test
    # time can be compared with paraeval's (which works on the statistics the score stage kept)
    t0 = time.perf_counter()
    for m in (BLEU(), CHRF(), TER()):
        for _, hyps in named:
            m._extract_corpus_statistics(hyps, refs)
    t_extract = time.perf_counter() - t0
    print(f"sacrebleu statistics extraction alone (3 metrics, all systems): {t_extract:.2f} s")
    mismatches = 0
    t_anchor = 0.0
    for test, n, column in (("bs", args.bs, "p_bootstrap"), ("ar", args.ar, "p_ar")):
        t0 = time.perf_counter()
        pt = PairedTest(
            named,
            {"BLEU": BLEU(), "CHRF": CHRF(), "TER": TER()},
            refs,
            test_type=test,
            n_samples=n,
            n_jobs=1,
        )
        _, res = pt()
        elapsed = time.perf_counter() - t0
        t_anchor += elapsed
        print(f"sacrebleu PairedTest {test} (3 metrics): {elapsed:.2f} s")
        for key, metric in names.items():
            mine = result.table[result.table["metric"] == metric].set_index("system")[column]
            for s, r in zip(res["System"][1:], res[key][1:], strict=True):
                ours = float(mine.to_dict()[str(s)])
                theirs = getattr(r, "p_value", None)
                if ours != theirs:
                    mismatches += 1
                    print(f"  MISMATCH {test} {metric} {s}: ours {ours} sacrebleu {theirs}")
    n_pairs = 2 * 3 * (len(systems) - 1)
    print(f"p-values equal to sacrebleu: {n_pairs - mismatches}/{n_pairs}")
    sub = result.table[result.table["metric"].isin(list(names.values()))]
    sub_time = t_ours * sub["metric"].nunique() / n_cols
    tests_only = t_anchor - 2 * t_extract
    print(
        f"anchor {t_anchor:.2f} s for 3 metrics, ~{tests_only:.2f} s without its two statistics "
        f"extractions; paraeval {t_ours:.2f} s for {n_cols} columns (~{sub_time:.2f} s pro rata "
        f"for 3): ratio ~{tests_only / sub_time:.1f}x on the tests alone"
    )
    print(
        f"comparison stage {t_ours:.2f} s ({n_cols} columns x {len(systems)} systems) vs "
        f"sacrebleu's paired tests {tests_only:.2f} s (3 columns): ratio stage / anchor "
        f"{t_ours / tests_only:.3f}"
    )
    print(
        "cluster sizes (bleu):",
        np.bincount(result.table[result.table["metric"] == "bleu"]["cluster"].dropna().astype(int))[
            1:
        ].tolist(),
    )
    anchor = "sacrebleu's `PairedTest` bs + ar, 3 columns, its statistics extraction left out"
    write_rows(args.json, [row("bench_compare", what, t_ours, "s", anchor, tests_only)])
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
