"""The whole default run on ParaBank-Eval, cold and warm, against the plain script a user writes.

All sides run in fresh processes one after the other in this run, on the same rows:

- paraeval, cold: ``paraeval data=parabank`` with the default metric set, correlation, comparison,
  α curve, figures, report.html and MLflow logging, an empty score cache and a new SQLite MLflow
  store in a temporary folder; then warm: the same command again on the cache the cold run
  filled (a rerun after a crash, another run on the same outputs). Each is timed from the start
  of the process to its end, with the stage times the command prints.
- with ``--baseline-python PY``: the same two runs by another installation of paraeval (for
  example the code before a change, installed in another virtual environment), interleaved with
  this one's, and the ratios. Warm runs are repeated (``--repeat``, 3) and interleaved, and each
  side's median run is reported: they take half a minute, within this machine's noise.
- paraeval, warm, with every figure drawn in the run's process (``report.parallel_figures=false``):
  what drawing each figure aside, as soon as its tables exist, saves.
- the plain script (:func:`plain_script`): per system, sacrebleu (BLEU and self-BLEU, sentence and
  corpus, against the references and the source, iBLEU combined from the two, chrF, TER), nltk
  (NIST, METEOR), rouge-score (ROUGE-1/2/L/Lsum), rouge-metric (ROUGE-W/S/SU, which rouge-score
  lacks), pycocoevalcap (CIDEr), ``bert_score.score``, sentence-transformers (cosine), gensim's
  ``wmdistance`` on the model's word-piece input embeddings (WMD), then scipy's Pearson, Spearman
  and Kendall at the segment, item and system level. It computes point correlations only: no
  bootstrap intervals, significance tests, system comparison, α curve, figures or MLflow logging,
  all of which the paraeval run does besides; the ratio understates paraeval's lead.

Targets: the cold paraeval run at most 100 s on this machine, and at least 3x faster than the
script. The summary gives the load average at the start and the end (the machine may be shared:
wall times are only as good as the load allows) and the CPU time of each side, which load
changes less. ``--json PATH`` writes the figures for docs/performance.md.

    .venv/bin/python benchmarks/bench_run.py
    .venv/bin/python benchmarks/bench_run.py --skip-script --baseline-python ../old/.venv/bin/python
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results import row, write_rows

REPO = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 100.0
TARGET_RATIO = 3.0


# --------------------------------------------------------------------------- shared
def run_env(work: Path, data: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PARAEVAL_CACHE_DIR=str(work / "cache"),
        PARAEVAL_SHARED_DATA=str(data),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MLFLOW_DISABLE_TELEMETRY="true",
        TOKENIZERS_PARALLELISM="false",
        PYTHONWARNINGS="ignore",
    )
    return env


def _keep_systems(table: Any, n: int | None) -> Any:
    if not n:
        return table
    keep = sorted(table["system"].unique())[:n]
    return table[table["system"].isin(keep)].reset_index(drop=True)


# --------------------------------------------------------------------------- paraeval (CLI)
STAGE_LINE = re.compile(r"^(?P<stage>[a-zA-Z][^:]{0,60}): (?P<seconds>[0-9]+\.[0-9]+) s$")


def paraeval_cli(
    python: str, work: Path, data: Path, tag: str, cache: Path, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One ``paraeval data=parabank`` command in a fresh process: wall and CPU seconds, and the
    stage times it printed."""
    out = work / f"out-{tag}"
    args = [
        python,
        "-m",
        "paraeval",
        "data=parabank",
        "report.print_tables=false",
        f"tracking.store_dir={work / f'mlflow-{tag}'}",
        f"hydra.run.dir={out}",
        *extra,
    ]
    env = run_env(work, data)
    env["PARAEVAL_CACHE_DIR"] = str(cache)
    print(f"  {tag} starts: {load_average()}", flush=True)
    cpu = _cpu_children()
    start = time.perf_counter()
    proc = subprocess.run(args, env=env, cwd=work, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    cpu = _cpu_children() - cpu
    print(f"  {tag} ends:   {load_average()}", flush=True)
    if proc.returncode != 0:
        sys.exit(f"{tag} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    stages: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        m = STAGE_LINE.match(line.strip())
        if m:
            stages[m["stage"]] = stages.get(m["stage"], 0.0) + float(m["seconds"])
    return {"wall": wall, "cpu": cpu, "stages": stages}


# --------------------------------------------------------------------------- the plain script
def plain_script(out: Path, n_systems: int | None) -> None:
    """What a user would write: each library called per system, then scipy's correlations."""
    t_start, c_start = time.perf_counter(), time.process_time()
    timings: dict[str, float] = {}
    cpu: dict[str, float] = {}

    @contextlib.contextmanager
    def timer(name: str) -> Any:
        start, c0 = time.perf_counter(), time.process_time()
        yield
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
        cpu[name] = cpu.get(name, 0.0) + time.process_time() - c0

    with timer("import and start"):
        import bert_score
        import numpy as np
        import pandas as pd
        import sacrebleu
        from gensim.models import KeyedVectors
        from nltk.corpus.reader.wordnet import WordNetCorpusReader
        from nltk.translate.meteor_score import meteor_score
        from nltk.translate.nist_score import corpus_nist, sentence_nist
        from pycocoevalcap.cider.cider import Cider
        from rouge_metric import PyRouge
        from rouge_score import tokenizers
        from rouge_score.rouge_scorer import RougeScorer
        from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
        from scipy import stats
        from sentence_transformers import SentenceTransformer

        from paraeval.metrics.encoder_model import resolve_model_path
        from paraeval.metrics.wordnet import find_wordnet
        from paraeval.pipeline.data.load import load_parabank
    timings["import and start"] = time.perf_counter() - t_start
    cpu["import and start"] = time.process_time() - c_start

    with timer("load"):
        data = os.environ.get("PARAEVAL_SHARED_DATA", str(REPO.parent / "shared" / "data"))
        table = _keep_systems(load_parabank(str(Path(data) / "parabank_eval")), n_systems)
    model_path, _ = resolve_model_path("default")
    with timer("load models and WordNet"):
        wordnet = WordNetCorpusReader(find_wordnet(), None)
        st_model = SentenceTransformer(model_path, device="cpu")
        tokenizer = st_model.tokenizer
        weights = st_model[0].auto_model.get_input_embeddings().weight.detach().numpy()
        vocab = tokenizer.convert_ids_to_tokens(list(range(weights.shape[0])))
        kv = KeyedVectors(weights.shape[1])
        kv.add_vectors(vocab, weights)
        tok13a = Tokenizer13a()
        rouge_tok = tokenizers.DefaultTokenizer(False)
        scorer = RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"])
        pyrouge = PyRouge(
            rouge_n=(), rouge_l=False, rouge_w=True, rouge_s=True, rouge_su=True, mode="individual"
        )

    def words(text: str, lower: bool = False) -> list[str]:
        return tok13a(text.lower() if lower else text).split()

    alpha = 0.8
    segment_rows: list[dict[str, Any]] = []
    system_rows: list[dict[str, Any]] = []
    for system, sub in table.groupby("system", sort=True):
        cands = sub["candidate"].tolist()
        refs = [list(r) for r in sub["references"]]
        srcs = sub["source"].tolist()
        width = max(len(r) for r in refs)
        streams = [[rs[k] if k < len(rs) else None for rs in refs] for k in range(width)]
        pairs = list(zip(cands, refs, strict=True))
        src_pairs = list(zip(cands, srcs, strict=True))
        seg: dict[str, list[float]] = {}
        corpus: dict[str, float] = {}
        with timer("metric bleu"):
            seg["bleu"] = [sacrebleu.sentence_bleu(c, r).score for c, r in pairs]
            corpus["bleu"] = sacrebleu.corpus_bleu(cands, streams).score
        with timer("metric self_bleu"):
            seg["self_bleu"] = [sacrebleu.sentence_bleu(c, [s]).score for c, s in src_pairs]
            corpus["self_bleu"] = sacrebleu.corpus_bleu(cands, [srcs]).score
        with timer("metric ibleu"):
            # from the BLEU and self-BLEU just computed, as a user would combine them
            seg["ibleu"] = [
                alpha * a - (1 - alpha) * b
                for a, b in zip(seg["bleu"], seg["self_bleu"], strict=True)
            ]
            corpus["ibleu"] = alpha * corpus["bleu"] - (1 - alpha) * corpus["self_bleu"]
        with timer("metric chrf"):
            seg["chrf"] = [sacrebleu.sentence_chrf(c, r).score for c, r in pairs]
            corpus["chrf"] = sacrebleu.corpus_chrf(cands, streams).score
        with timer("metric ter"):
            seg["ter"] = [sacrebleu.sentence_ter(c, r).score for c, r in pairs]
            corpus["ter"] = sacrebleu.corpus_ter(cands, streams).score
        with timer("metric nist"):
            hyps = [words(c) for c in cands]
            rss = [[words(r) for r in rs] for rs in refs]
            nist = []
            for h, rs in zip(hyps, rss, strict=True):
                try:
                    nist.append(sentence_nist(rs, h))
                except ZeroDivisionError:  # NLTK's short-hypothesis case
                    nist.append(0.0)
            seg["nist"] = nist
            corpus["nist"] = corpus_nist(rss, hyps)
        with timer("metric meteor"):
            seg["meteor"] = [
                meteor_score([words(r) for r in rs], words(c), wordnet=wordnet) for c, rs in pairs
            ]
        with timer("metric rouge (rouge-score)"):
            scores = [scorer.score_multi(rs, c) for c, rs in pairs]
            for key in ("rouge1", "rouge2", "rougeL", "rougeLsum"):
                seg[key] = [s[key].fmeasure for s in scores]
        with timer("metric rougeW/S/SU (rouge-metric)"):
            result = pyrouge.evaluate_tokenized(
                [[rouge_tok.tokenize(c)] for c in cands],
                [[[rouge_tok.tokenize(r)] for r in rs] for rs in refs],
            )
            for key, name in (("rouge-w-1.2", "rougeW"), ("rouge-s*", "rougeS")):
                seg[name] = [r[key]["f"] for r in result]
            seg["rougeSU"] = [r["rouge-su*"]["f"] for r in result]
        with timer("metric cider"):
            gts = {i: [" ".join(words(r, True)) for r in rs] for i, rs in enumerate(refs)}
            res = {i: [" ".join(words(c, True))] for i, c in enumerate(cands)}
            corpus["cider"], per = Cider().compute_score(gts, res)
            seg["cider"] = list(per)
        with timer("metric bertscore"):
            p, r, f = bert_score.score(cands, refs, model_type=model_path, num_layers=6)
            seg["bertscore_precision"], seg["bertscore_recall"] = p.tolist(), r.tolist()
            seg["bertscore_f1"] = f.tolist()
        with timer("metric cosine"):
            c_emb = st_model.encode(cands, batch_size=64)
            flat = [x for rs in refs for x in rs]
            r_emb = st_model.encode(flat, batch_size=64)
            owner = np.repeat(np.arange(len(cands)), [len(rs) for rs in refs])
            sims = (c_emb[owner] * r_emb).sum(1)
            sims /= np.linalg.norm(c_emb[owner], axis=1) * np.linalg.norm(r_emb, axis=1)
            best = np.full(len(cands), -np.inf)
            np.maximum.at(best, owner, sims)
            seg["cosine"] = best.tolist()
        with timer("metric wmd"):
            seg["wmd"] = [
                min(
                    kv.wmdistance(tokenizer.tokenize(c), tokenizer.tokenize(x), norm=True)
                    for x in rs
                )
                for c, rs in pairs
            ]
        frame = pd.DataFrame(seg)
        frame["system"] = system
        frame["item_id"] = sub["item_id"].to_numpy()
        for aspect in [c for c in sub.columns if c.startswith("human_")]:
            frame[aspect] = sub[aspect].to_numpy()
        segment_rows.append(frame)
        system_rows.append({"system": system, **{k: np.mean(v) for k, v in seg.items()}, **corpus})

    with timer("correlation (scipy)"):
        segments = pd.concat(segment_rows, ignore_index=True)
        systems = pd.DataFrame(system_rows).set_index("system")
        aspects = [c for c in segments.columns if c.startswith("human_")]
        metrics = [c for c in segments.columns if c not in ("system", "item_id", *aspects)]
        coefficients = {"pearson": stats.pearsonr, "spearman": stats.spearmanr}
        coefficients["kendall_b"] = stats.kendalltau
        human_means = segments.groupby("system")[aspects].mean()
        records = []
        for metric in metrics:
            for aspect in aspects:
                for name, fn in coefficients.items():
                    ok = segments[[metric, aspect]].dropna()
                    records.append((metric, aspect, "segment", name, fn(ok[metric], ok[aspect])[0]))
                    per_item = [
                        fn(g[metric], g[aspect])[0]
                        for _, g in ok.join(segments["item_id"]).groupby("item_id")
                        if len(g) > 1
                    ]
                    records.append((metric, aspect, "item", name, float(np.nanmean(per_item))))
                    if len(systems) >= 2:  # scipy needs two systems at least
                        value = fn(systems[metric], human_means.loc[systems.index, aspect])[0]
                        records.append((metric, aspect, "system", name, value))
    timings["total"] = time.perf_counter() - t_start
    cpu["total"] = time.process_time() - c_start
    result = {"timings": timings, "stage_cpu": cpu, "rows": len(segments)}
    out.write_text(json.dumps({**result, "correlations": len(records)}), encoding="utf-8")


# --------------------------------------------------------------------------- parent
def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _child(role: str, work: Path, data: Path, n_systems: int | None) -> tuple[float, dict]:
    """Runs the plain script in a fresh process; returns its wall time and its JSON, with the
    CPU time of the process under ``cpu``."""
    out = work / f"{role}.json"
    args = [sys.executable, __file__, "--child", role, "--work", str(work)]
    if n_systems:
        args += ["--systems", str(n_systems)]
    print(f"  {role} starts: {load_average()}", flush=True)
    cpu = _cpu_children()
    start = time.perf_counter()
    proc = subprocess.run(
        args, env=run_env(work, data), cwd=work, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    cpu = _cpu_children() - cpu
    print(f"  {role} ends:   {load_average()}", flush=True)
    if proc.returncode != 0:
        sys.exit(f"{role} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    result = json.loads(out.read_text(encoding="utf-8"))
    result["cpu"] = cpu
    return wall, result


def _stage_table(title: str, run: dict[str, Any]) -> None:
    print(f"\n{title}: {run['wall']:.1f} s wall (process start to end), {run['cpu']:.1f} s CPU")
    for name, seconds in sorted(run["stages"].items(), key=lambda kv: -kv[1]):
        print(f"  {name:48s} {seconds:8.1f} s  {100 * seconds / run['wall']:5.1f}%")


def _script_table(title: str, wall: float, result: dict[str, Any]) -> None:
    timings, cpu = result["timings"], result.get("stage_cpu", {})
    print(f"\n{title}: {wall:.1f} s wall (process start to end), {result['cpu']:.1f} s CPU")
    for name, seconds in sorted(timings.items(), key=lambda kv: -kv[1]):
        if name == "total" or seconds < 0.05:
            continue
        used = f"{cpu[name]:8.1f}" if name in cpu else f"{'':8s}"
        print(f"  {name:48s} {seconds:8.1f} s  {100 * seconds / wall:5.1f}%  {used}")


WHAT = {
    "cold": "ParaBank-Eval, the whole default run, cold (empty cache, new MLflow store)",
    "warm": "ParaBank-Eval, the whole default run, warm (the cold run's cache), the median run",
}
SCRIPT = "the plain script: the libraries per system, scipy's point correlations"
INLINE = "warm, figures in the run's process"
BASELINE = "the code before (--baseline-python), interleaved"


def table_rows(
    runs: dict[str, dict[str, Any]], script: float | None, plain: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The figures for docs/performance.md: wall and CPU time of each paraeval run against each
    anchor this run measured (none: the figures alone)."""
    rows = []
    for state in ("cold", "warm"):
        run = runs[state]
        anchors: list[tuple[str | None, float | None, float | None]] = []
        if script is not None and plain is not None:
            anchors.append((SCRIPT, script, plain["cpu"]))
        if f"baseline {state}" in runs:
            old = runs[f"baseline {state}"]
            anchors.append((BASELINE, old["wall"], old["cpu"]))
        for name, wall, cpu in anchors or [(None, None, None)]:
            rows.append(row("bench_run", f"{WHAT[state]}, wall", run["wall"], "s", name, wall))
            rows.append(row("bench_run", f"{WHAT[state]}, CPU", run["cpu"], "CPU-s", name, cpu))
    if INLINE in runs:
        what = f"{WHAT['warm']}, wall, each figure drawn aside as soon as its tables exist"
        anchor = (
            "the same run drawing every figure in its own process (report.parallel_figures=false)"
        )
        rows.append(row("bench_run", what, runs["warm"]["wall"], "s", anchor, runs[INLINE]["wall"]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("PARAEVAL_SHARED_DATA", REPO.parent / "shared" / "data")),
    )
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: temp)")
    parser.add_argument("--skip-script", action="store_true", help="time paraeval only")
    parser.add_argument(
        "--baseline-python",
        default=None,
        help="a Python whose paraeval is the code to compare against (another virtual environment)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--repeat", type=int, default=3, help="warm runs per side (median)")
    parser.add_argument("--child", choices=["script"], help=argparse.SUPPRESS)
    parser.add_argument("--systems", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "script":
        plain_script(args.work / "script.json", args.systems)
        return
    if not (args.data_dir / "parabank_eval").is_dir():
        sys.exit(f"ParaBank-Eval not found under {args.data_dir} (set PARAEVAL_SHARED_DATA)")
    work = (args.work or Path(tempfile.mkdtemp(prefix="bench-run-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    data = args.data_dir.resolve()
    print("ParaBank-Eval, all systems, default run: cold (empty cache, new MLflow store), warm")
    start_load = load_average()
    print(f"start: {start_load}")
    runs: dict[str, dict[str, Any]] = {}
    sides = [("", sys.executable)]
    if args.baseline_python:
        sides.insert(0, ("baseline ", args.baseline_python))
    for label, python in sides:
        tag = f"{label}cold".replace(" ", "-")
        runs[f"{label}cold"] = paraeval_cli(python, work, data, tag, work / f"cache{label}")
    # warm runs take half a minute, within this machine's noise of each other: each side is
    # run --repeat times, interleaved, and its median run is reported. The last side draws
    # every figure in the run's process: what drawing them aside as their tables exist saves
    inline = ("report.parallel_figures=false",)
    warm_sides = [(f"{label}warm", python, ()) for label, python in sides]
    warm_sides.append((INLINE, sys.executable, inline))
    repeats: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in warm_sides}
    for i in range(args.repeat):
        for name, python, extra in warm_sides:
            label = "baseline " if name.startswith("baseline") else ""
            tag = f"{name}-{i}".replace(" ", "-").replace(",", "").replace("'", "")
            run = paraeval_cli(python, work, data, tag, work / f"cache{label}", extra)
            repeats[name].append(run)
    for name, done in repeats.items():
        runs[name] = sorted(done, key=lambda r: r["wall"])[len(done) // 2]
        runs[name]["walls"] = [round(r["wall"], 1) for r in done]
    for name, run in runs.items():
        _stage_table(f"paraeval {name}", run)
    script = plain = None
    if not args.skip_script:
        script, plain = _child("script", work, data, None)
        _script_table(
            f"plain script ({plain['rows']} rows, {plain['correlations']} point correlations)",
            script,
            plain,
        )
    # the verdict last, where it is read
    print("\nsummary")
    print(f"  start: {start_load}")
    print(f"  end:   {load_average()}")
    for name, run in runs.items():
        walls = f"  (median of {run['walls']})" if "walls" in run else ""
        print(f"  paraeval {name:24s} {run['wall']:7.1f} s wall, {run['cpu']:7.1f} s CPU{walls}")
    if args.baseline_python:
        for state in ("cold", "warm"):
            new, old = runs[state], runs[f"baseline {state}"]
            wall, cpu = new["wall"] / old["wall"], new["cpu"] / old["cpu"]
            print(f"  {state} / baseline {state}: {wall:5.2f}x wall, {cpu:5.2f}x CPU")
    aside = runs["warm"]["wall"] / runs[INLINE]["wall"]
    print(f"  warm, figures drawn aside / in the run's process: {aside:5.2f}x wall")
    cold = runs["cold"]["wall"]
    verdict = "MET" if cold <= TARGET_SECONDS else "NOT MET"
    print(f"  target paraeval cold <= {TARGET_SECONDS:g} s: {verdict} ({cold:.1f} s)")
    if script is not None and plain is not None:
        ratio = script / cold
        print(f"  script total: {script:7.1f} s wall, {plain['cpu']:7.1f} s CPU")
        verdict = "MET" if ratio >= TARGET_RATIO else "NOT MET"
        print(f"  target script / paraeval cold >= {TARGET_RATIO:g}x: {verdict} ({ratio:.2f}x)")
    rows = table_rows(runs, script, plain)
    write_rows(args.json, rows)
    print(f"scratch folder: {work}")


if __name__ == "__main__":
    main()
