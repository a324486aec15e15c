"""A WMT-sized mt-metrics-eval test set meta-evaluated with ``correlation=wmt24``: paraeval's
whole run against mt-metrics-eval's own computations for the same work, measured in this run.

1. The set (``mtme_set.py``): en-de, 15 systems x 2,000 segments, MQM scores with unrated
   segments, 40 precomputed metrics (36 ``-refA``, 4 ``-src``), in a temporary folder.
2. paraeval: ``paraeval data=mtme data.path=<set> data.lp=en-de correlation=wmt24
   'metrics=[bleu,chrf]' tracking=none cache.enabled=false`` in a fresh process: wall time and
   the peak memory of its processes together (PSS, ``bench_memory.peak_of``). Target: at most
   2.5 GB, and no slower than the anchor.
3. The anchor (``mtme_anchor.py``, mt-metrics-eval's code re-expressed): reading the set, BLEU and
   chrF with sacrebleu (``sentence_bleu``/``corpus_bleu``, ``sentence_chrf``/``corpus_chrf``, as a
   user adds them with ``AddMetric``), ``GetCorrelations``, each metric's pce (system level) and
   calibrated acc23 averaged by item (segment level), both tasks' pairwise permutation tests
   (k=1,000, early stopping 100/0.02/0.5) and ``AverageCorrMatrix``. The tests of every pair would
   take hours, so they are extrapolated linearly: the time of one permutation is measured on
   ``--time-permutations`` permutations of one pair; the permutations each pair runs before its
   early stop are counted with a faster computation of the same statistic (acc23: every pair, the
   swaps drawn per group of equal terms; pce: ``--pce-pairs`` sampled pairs, its sign matrix and
   human p-values computed once, which is what each call recomputes); acc23's test also
   recalibrates both metrics' thresholds, timed per metric above. ``AverageCorrMatrix`` is timed
   on those counted draws (pce's sampled draws stand in for the other pairs').
4. Agreement: each metric's per-task value (``correlations.csv``: system soft_pairwise_accuracy,
   item acc23) against the anchor's, to 1e-9; a metric paraeval's run lacks is named, not failed
   (until ``data=mtme`` reads metric scores, it has BLEU and chrF only).

    .venv/bin/python benchmarks/bench_mtme.py [--systems 15] [--segments 2000] [--metrics 40]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mtme_anchor as A
import numpy as np
import pandas as pd
import sacrebleu
from bench_memory import peak_of
from bench_run import load_average
from mtme_set import GOLD, LP, REF, generate
from results import row, write_rows

TARGET_GB = 2.5
TOLERANCE = 1e-9
# paraeval's names of its own metrics -> the names an mt-metrics-eval user gives them
OWN = {"bleu": f"BLEU-{REF}", "chrf": f"chrF-{REF}"}
TASKS = (("system", "soft_pairwise_accuracy", "pce"), ("item", "acc23", "acc23"))


def paraeval_run(root: Path, out: Path) -> dict[str, Any] | None:
    args = [
        sys.executable,
        "-m",
        "paraeval",
        "data=mtme",
        f"data.path={root}",
        f"data.lp={LP}",
        "correlation=wmt24",
        "metrics=[bleu,chrf]",
        "tracking=none",
        "cache.enabled=false",
        "report.progress=false",
        "report.print_tables=false",
        f"hydra.run.dir={out}",
    ]
    try:
        wall, rss, pss = peak_of(args)
    except subprocess.CalledProcessError as exc:
        print(f"paraeval's run failed (exit {exc.returncode}; its error is above)")
        return None
    return {"wall": wall, "rss": rss, "pss": pss}


def sacrebleu_metrics(evs: A.EvalSet) -> None:
    """BLEU and chrF of every system against the reference, segments and corpus."""
    ref = [t or "" for t in evs.refs[REF]]
    seg: dict[str, A.Scores] = {OWN["bleu"]: {}, OWN["chrf"]: {}}
    corpus: dict[str, A.Scores] = {OWN["bleu"]: {}, OWN["chrf"]: {}}
    for system, texts in evs.sys_outputs.items():
        hyps = [t or "" for t in texts]
        pairs = list(zip(hyps, ref, strict=True))
        seg[OWN["bleu"]][system] = [sacrebleu.sentence_bleu(h, [r]).score for h, r in pairs]
        seg[OWN["chrf"]][system] = [sacrebleu.sentence_chrf(h, [r]).score for h, r in pairs]
        corpus[OWN["bleu"]][system] = [sacrebleu.corpus_bleu(hyps, [ref]).score]
        corpus[OWN["chrf"]][system] = [sacrebleu.corpus_chrf(hyps, [ref]).score]
    for name in seg:
        evs.add_metric(name, "seg", seg[name])
        evs.add_metric(name, "sys", corpus[name])


class FastPce:
    """``pairwise_confidence_error`` for one human vector: the sign matrix and the human
    p-values, the same in every call (seed 4), made once. Same values, to count permutations."""

    def __init__(self, num_sys: int) -> None:
        self.num_sys = num_sys
        self.signs: np.ndarray | None = None
        self.gold_p: np.ndarray | None = None
        self.upper = np.triu_indices(num_sys, 1)

    def p_values(self, scores: np.ndarray) -> np.ndarray:
        if self.signs is None:
            rng = np.random.default_rng(4)
            signs = rng.random(size=(1000, scores.shape[1]), dtype=np.float32)
            np.rint(signs, out=signs, casting="same_kind")
            signs *= 2.0
            signs -= 1.0
            self.signs = signs
        s = scores.astype(np.float32)
        partial = np.matmul(self.signs, s.T)
        sums = np.sum(s, axis=1)
        i, j = self.upper
        return np.sum(partial[:, i] - partial[:, j] >= sums[i] - sums[j], axis=0) / 1000

    def __call__(self, gold: Any, metric: Any) -> tuple[float]:
        if self.gold_p is None:
            self.gold_p = self.p_values(A.reshape(gold, self.num_sys, "sys"))
        m = self.p_values(A.reshape(np.asarray(metric), self.num_sys, "sys"))
        return (1.0 - float(np.mean(np.abs(self.gold_p - m))),)


def acc23_terms(c: A.Correlation, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """Each rated item's system pairs: 1 where acc23 counts the pair (signs agree under the
    threshold), and the item's share of the average (1 / (pairs x items))."""
    h = np.asarray(A.reshape(c.gold_scores, c.num_sys, "item"))
    m = np.asarray(A.reshape(c.metric_scores, c.num_sys, "item"), dtype=float)
    rated = np.array([all(v is not None for v in r) for r in h])
    h, m = h[rated].astype(float), m[rated]
    i, j = np.triu_indices(c.num_sys, 1)
    dm = m[:, i] - m[:, j]
    dm[np.abs(dm) <= epsilon] = 0.0
    agree = np.sign(dm) == np.sign(h[:, i] - h[:, j])
    return agree.astype(float).ravel(), np.full(agree.size, 1.0 / agree.size)


def count_pairs_test(
    va: np.ndarray, vb: np.ndarray, share: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The null differences mt-metrics-eval's ``PairwisePermutationSigDiff`` draws for A (the
    better) against B until its early stop: each pair's term flips sign with probability 1/2,
    drawn as one binomial per group of equal terms."""
    term = share * (va - vb)
    delta = float(term.sum())
    values, counts = np.unique(term[term != 0], return_counts=True)
    diffs = (2 * rng.binomial(counts, 0.5, size=(1000, counts.size)) - counts) @ values
    count = 0
    for i in range(1, 1001):
        if diffs[i - 1] >= delta:
            count += 1
            if i % 100 == 0 and not 0.02 <= count / i <= 0.5:
                break
    return diffs[:i]


def task_result(values: dict[str, float], draws: dict[tuple[str, str], np.ndarray]) -> A.TaskResult:
    """A task's result with the counted draws, as (better + difference, better) pairs."""

    def test(a: str, b: str) -> tuple[float, list]:
        d = draws[(a, b)] if (a, b) in draws else draws[next(iter(draws))]
        return float(np.mean(d >= values[a] - values[b])), [(values[b] + x, values[b]) for x in d]

    return A.compare_metrics(values, test)


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def note(secs: dict[str, float], step: str, fn: Any, *args: Any) -> Any:
    """Runs ``fn(*args)`` and keeps its seconds as ``step`` (without ``fn``: ``args[0]`` are
    the seconds), and prints them: the anchor takes minutes."""
    out, secs[step] = timed(fn, *args) if fn is not None else (None, args[0])
    print(f"  anchor {step}: {secs[step]:,.1f} s", flush=True)
    return out


def anchor(root: Path, args: argparse.Namespace) -> tuple[dict[str, float], dict[str, dict]]:
    """The anchor's seconds per step (measured or extrapolated) and each task's values."""
    secs: dict[str, float] = {}
    evs = note(secs, "read the set", A.read_eval_set, str(root), LP)
    note(secs, "BLEU and chrF (sacrebleu)", sacrebleu_metrics, evs)
    corrs = note(secs, "GetCorrelations", A.get_correlations, evs, "seg", {REF}, GOLD)
    names = sorted(corrs)
    pce = A.pce_wrapper(corrs)
    t = time.perf_counter()
    values = {"pce": {m: float(pce(c.gold_scores, c.metric_scores)[0]) for m, c in corrs.items()}}
    note(secs, "pce values", None, time.perf_counter() - t)
    values["acc23"], eps, cal = {}, {}, {}
    for m in names:
        c = corrs[m]
        (values["acc23"][m], eps[m]), cal[m] = timed(
            A.kendall_with_ties_opt, c.gold_scores, c.metric_scores, c.num_sys
        )
    note(secs, "acc23 values (KendallWithTiesOpt)", None, sum(cal.values()))
    pairs = list(itertools.combinations(names, 2))
    rs, k = np.random.RandomState(0), args.time_permutations
    once = A.EarlyStop(block_size=k + 1)  # no early stop while timing
    a, b = names[0], names[-1]
    _, t_pce0 = timed(A.permutation_sig_diff, corrs[b], corrs[a], pce, rs, 0, once)
    _, t_pce = timed(A.permutation_sig_diff, corrs[b], corrs[a], pce, rs, k, once)
    t_pce = (t_pce - t_pce0) / k
    rng = np.random.default_rng(1)
    sample = [pairs[i] for i in rng.choice(len(pairs), min(args.pce_pairs, len(pairs)), False)]
    fast = FastPce(corrs[a].num_sys)
    pce_draws: dict[tuple[str, str], np.ndarray] = {}
    t = time.perf_counter()
    for x, y in sample:
        hi, lo = (x, y) if values["pce"][x] >= values["pce"][y] else (y, x)
        out = A.permutation_sig_diff(corrs[lo], corrs[hi], fast, rs)
        pce_draws[(hi, lo)] = np.asarray([d[0] - d[1] for d in out[3]])
    t_count_pce = time.perf_counter() - t
    mean_pce = float(np.mean([len(d) for d in pce_draws.values()]))
    pce_tests = len(pairs) * (t_pce0 + mean_pce * t_pce)
    note(secs, "pce permutation tests (extrapolated)", None, pce_tests)
    ca, cb = corrs[b], corrs[a]
    _, t_setup = timed(A.pairwise_permutation_sig_diff, ca, cb, rs, 0, once, eps[b], eps[a])
    _, t_acc = timed(A.pairwise_permutation_sig_diff, ca, cb, rs, k, once, eps[b], eps[a])
    t_perm = (t_acc - t_setup) / k
    acc_draws: dict[tuple[str, str], np.ndarray] = {}
    terms = {m: acc23_terms(corrs[m], eps[m]) for m in names}
    t = time.perf_counter()
    for x, y in pairs:
        hi, lo = (x, y) if values["acc23"][x] >= values["acc23"][y] else (y, x)
        acc_draws[(hi, lo)] = count_pairs_test(terms[hi][0], terms[lo][0], terms[hi][1], rng)
    t_count_acc = time.perf_counter() - t
    n_acc = sum(len(d) for d in acc_draws.values())
    recalibrate = sum(cal[x] + cal[y] for x, y in pairs)
    acc_tests = recalibrate + len(pairs) * t_setup + n_acc * t_perm
    note(secs, "acc23 pairwise permutation tests (extrapolated)", None, acc_tests)
    stand_in = itertools.cycle(pce_draws.values())
    full_pce = {
        (hi, lo): pce_draws.get((hi, lo), next(stand_in))
        for hi, lo in itertools.permutations(names, 2)
    }
    results = [task_result(values["pce"], full_pce), task_result(values["acc23"], acc_draws)]
    note(secs, "AverageCorrMatrix", A.average_corr_matrix, results)
    print(
        f"  anchor: one pce permutation {t_pce:.3f} s (+ {t_pce0:.2f} s a pair), one acc23 "
        f"permutation {t_perm:.3f} s (+ {t_setup:.2f} s a pair), mean calibration "
        f"{np.mean(list(cal.values())):.2f} s; "
        f"permutations before the early stop: pce {mean_pce:.0f} on average over {len(sample)} "
        f"sampled pairs ({t_count_pce:.0f} s to count), acc23 {n_acc / len(pairs):.0f} on "
        f"average over all {len(pairs)} pairs ({t_count_acc:.1f} s to count)"
    )
    return secs, values


def agreement(out: Path, values: dict[str, dict[str, float]]) -> tuple[int, int, list[str]]:
    """(values compared, values within TOLERANCE, metrics paraeval's run lacks)."""
    table = pd.read_csv(out / "correlations.csv")
    compared = agreed = 0
    lacking: set[str] = set()
    for level, coefficient, task in TASKS:
        rows = table[(table["level"] == level) & (table["coefficient"] == coefficient)]
        ours = {}
        for metric, value in zip(rows["metric"], rows["value"], strict=True):
            name = OWN.get(metric, metric.removeprefix("metric_"))
            ours[name] = float(value)
        for name, expected in values[task].items():
            if name not in ours:
                lacking.add(name)
                continue
            compared += 1
            ok = abs(ours[name] - expected) <= TOLERANCE
            agreed += ok
            if not ok:
                print(f"  DIFFERS: {name} {level} {coefficient}: {ours[name]!r} vs {expected!r}")
    return compared, agreed, sorted(lacking)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", type=int, default=15)
    parser.add_argument("--segments", type=int, default=2000)
    parser.add_argument("--metrics", type=int, default=40)
    parser.add_argument("--time-permutations", type=int, default=5)
    parser.add_argument("--pce-pairs", type=int, default=12)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    size = f"{args.systems} systems x {args.segments:,} segments x {args.metrics} metrics"
    with tempfile.TemporaryDirectory(prefix="paraeval-bench-mtme-") as tmp:
        root = Path(tmp) / "set"
        _, t_gen = timed(generate, root, args.systems, args.segments, args.metrics)
        print(f"test set ({size} + BLEU, chrF) generated in {t_gen:.1f} s; {load_average()}")
        run = paraeval_run(root, Path(tmp) / "out")
        if run is not None:
            print(
                f"paraeval: {run['wall']:.1f} s wall, peak PSS {run['pss'] / 1e9:.2f} GB",
                flush=True,
            )
        secs, values = anchor(root, args)
        checked = agreement(Path(tmp) / "out", values) if run else None
    total = sum(secs.values())
    print(f"anchor, mt-metrics-eval's computations: {total:,.0f} s ({total / 3600:.1f} h)")
    print(f"at the end: {load_average()} (wall times are only as good as the load allows)")
    what = f"`paraeval data=mtme correlation=wmt24 metrics=[bleu,chrf]`, generated WMT set ({size})"
    anchor_text = (
        "mt-metrics-eval's computations re-expressed (tasks.WMT24, AverageCorrMatrix); the "
        "permutation tests extrapolated from timed permutations x counted early stops"
    )
    if run is None or checked is None:
        print("no paraeval figures: its run failed")
        return 1
    verdict = "OK" if run["pss"] <= TARGET_GB * 1e9 else "OVER"
    print(
        f"paraeval: {run['wall']:.1f} s wall ({run['wall'] / total:.4f} of the anchor's time, "
        f"{total / run['wall']:,.0f}x faster), peak PSS {run['pss'] / 1e9:.2f} GB, "
        f"peak RSS {run['rss'] / 1e9:.2f} GB: target <= {TARGET_GB:g} GB {verdict}"
    )
    compared, agreed, lacking = checked
    print(f"agreement: {agreed} of {compared} per-task values within {TOLERANCE:g}")
    precomputed = [m for m in values["acc23"] if m not in OWN.values()]
    without = bool(lacking) and set(lacking) == set(precomputed)
    if without:
        what += ", without its precomputed metrics (this data=mtme does not read them)"
        print(
            f"  paraeval's run has none of the {len(lacking)} precomputed metrics "
            "(data=mtme does not read metric-scores/ in this version): only its own metrics "
            "were compared"
        )
    elif lacking:
        print(f"  paraeval's run lacks {len(lacking)} metrics: {', '.join(lacking)}")
    write_rows(
        args.json,
        [
            row("bench_mtme", f"whole run {what}", run["wall"], "s", anchor_text, total),
            row(
                "bench_mtme",
                f"peak memory of the run's processes (PSS), {what}",
                run["pss"] / 1e9,
                "GB",
            ),
        ],
    )
    if agreed < compared or (lacking and not without):
        print("paraeval and the anchor disagree")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
