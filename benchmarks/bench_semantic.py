"""Benchmark: paraeval's semantic suite (BERTScore + cosine) against the anchors, same run.

Naive (what a script would do): per system, ``bert_score.score(cands, refs, model_type=<path>,
num_layers=6)`` plus ``SentenceTransformer(<path>).encode`` of the candidates and references and
their cosine. paraeval: ``prepare`` every text once (one encoder pass over the unique sentences of
the run, shared by both metrics), then ``score`` per system. A second paraeval run with fresh
objects reads the warm disk cache. The default model is the packaged all-MiniLM-L6-v2. Each side
runs in a fresh process of its own (nothing one side loaded serves another), its libraries
imported and the device started before its clock starts; loading the models is timed.

    python benchmarks/bench_semantic.py                      # 5 systems x 2,000 generated items
    python benchmarks/bench_semantic.py --items 500          # smaller
    python benchmarks/bench_semantic.py --parabank ../shared/data/parabank_eval   # real data
    python benchmarks/bench_semantic.py --json PATH          # the figures for docs/performance.md

The generated data: benchmarks/semantic_texts.py. ParaBank-Eval: the five systems with most
candidates, each candidate scored against its source sentence. Where the encoder pass goes:
benchmarks/bench_encoder.py.

Then each precision (``--precisions``): the encoder pass's seconds and the largest difference of
P, R, F1 and cosine from fp32's. The run fails (exit 1) when fp32's scores differ from bert_score's
or sentence-transformers' by more than 1e-6.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from results import row, write_rows
from semantic_texts import System, generated

from paraeval.metrics.bertscore import COLUMNS, BERTScore
from paraeval.metrics.cosine import Cosine
from paraeval.metrics.encoder import Encoders
from paraeval.metrics.encoder_model import resolve_model_path

AGREEMENT = 1e-6  # fp32 scores against the reference implementations: more fails the run


def parabank(folder: Path, n_systems: int) -> list[System]:
    import pandas as pd

    ref = pd.read_csv(folder / "ref.tsv", sep="\t", quoting=3)
    cand = pd.read_csv(folder / "candidates.tsv", sep="\t", quoting=3)
    source = dict(zip(ref["ref_id"], ref["ref_sent"], strict=True))
    rows = []
    for r in cand.drop_duplicates(["ref_id", "sys_id", "candidate"]).itertuples():
        for sys_id in str(r.sys_id).split():
            rows.append((sys_id, int(str(r.ref_id)), str(r.candidate)))
    table = pd.DataFrame(rows, columns=["system", "ref_id", "candidate"]).drop_duplicates(
        ["system", "ref_id"]
    )
    top = table["system"].value_counts().index[:n_systems]
    systems = []
    for name in top:
        part = table[table["system"] == name].sort_values("ref_id")
        systems.append(
            (f"sys{name}", list(part["candidate"]), [[source[i]] for i in part["ref_id"]])
        )
    return systems


def naive(systems: list[System], path: str, batch_size: int, device: str) -> dict[str, np.ndarray]:
    import bert_score
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(path, device=device)
    out: dict[str, np.ndarray] = {}
    for name, cands, refs in systems:
        p, r, f = bert_score.score(
            cands, refs, model_type=path, num_layers=6, batch_size=batch_size, device=device
        )
        c = st.encode(cands, batch_size=batch_size)
        flat = st.encode([r for g in refs for r in g], batch_size=batch_size)
        owner = np.repeat(np.arange(len(cands)), [len(g) for g in refs])
        sims = (c[owner] * flat).sum(1) / np.linalg.norm(c[owner], axis=1)
        sims /= np.linalg.norm(flat, axis=1)
        cos = np.full(len(cands), -np.inf)
        np.maximum.at(cos, owner, sims)  # best reference, like the metric's multi_ref: max
        out[name + "/p"], out[name + "/r"], out[name + "/f1"] = p.numpy(), r.numpy(), f.numpy()
        out[name + "/cos"] = cos
    return out


def ours(
    systems: list[System], cache_dir: str, batch_size: int, device: str
) -> dict[str, np.ndarray]:
    bert = BERTScore(batch_size=batch_size, cache_dir=cache_dir, device=device)
    cos = Cosine(batch_size=batch_size, cache_dir=cache_dir, device=device)
    every = [t for _, cands, refs in systems for t in cands + [r for g in refs for r in g]]
    bert.prepare(every)
    cos.prepare(every)
    out: dict[str, np.ndarray] = {}
    for name, cands, refs in systems:
        segment = bert.score(cands, refs).segment
        for key, column in zip(("p", "r", "f1"), COLUMNS, strict=True):
            out[f"{name}/{key}"] = segment[column]
        out[name + "/cos"] = cos.score(cands, refs).segment["cosine"]
    return out


def _start_device(device: str) -> None:
    """The libraries both sides use, imported, and the device's context made: not timed."""
    import bert_score  # noqa: F401
    import sentence_transformers  # noqa: F401
    import torch

    if device.startswith("cuda"):
        torch.zeros(1, device=device)
        torch.cuda.synchronize()


def _sync(device: str) -> None:
    """CUDA kernels run asynchronously: a timer must wait for them."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def child(role: str, args: argparse.Namespace) -> None:
    """One side, timed in this fresh process; its scores and times go to ``args.out``."""
    systems = load_systems(args)
    _start_device(args.device)
    path, _ = resolve_model_path("default")
    wall, cpu = time.perf_counter(), time.process_time()
    if role == "naive":
        scores = naive(systems, path, args.batch_size, args.device)
    else:
        scores = ours(systems, str(args.cache_dir), args.batch_size, args.device)
    _sync(args.device)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    arrays: dict[str, Any] = {k.replace("/", "__"): v for k, v in scores.items()}
    np.savez(args.out.with_suffix(".npz"), **arrays)
    args.out.write_text(json.dumps({"wall": wall, "cpu": cpu}), encoding="utf-8")


def run_side(role: str, args: argparse.Namespace, cache: Path, work: Path) -> tuple[dict, dict]:
    """Runs ``role`` in a child process: (its scores, its wall and CPU seconds)."""
    out = work / f"{role}.json"
    command = [sys.executable, __file__, "--child", role, "--out", str(out)]
    command += ["--systems", str(args.systems), "--items", str(args.items)]
    command += ["--batch-size", str(args.batch_size), "--device", args.device]
    command += ["--cache-dir", str(cache)]
    if args.parabank:
        command += ["--parabank", str(args.parabank)]
    subprocess.run(command, check=True)
    with np.load(out.with_suffix(".npz")) as saved:
        scores = {k.replace("__", "/"): saved[k] for k in saved.files}
    return scores, json.loads(out.read_text(encoding="utf-8"))


def precisions(systems: list[System], args: argparse.Namespace) -> list[tuple[str, float, float]]:
    """Per precision: seconds of the encoder pass over the run's texts (``prepare``, no disk
    cache) and the largest difference of P, R, F1 and cosine from fp32's."""
    every = [t for _, cands, refs in systems for t in cands + [r for g in refs for r in g]]
    out: list[tuple[str, float, float]] = []
    base: list[np.ndarray] = []
    for name in args.precisions.split(","):
        settings = {"batch_size": args.batch_size, "device": args.device, "use_cache": False}
        encoders = Encoders()
        bert = BERTScore(precision=name, encoders=encoders, **settings)
        cos = Cosine(precision=name, encoders=encoders, **settings)
        bert.encoder.model  # noqa: B018 - loading the weights is not part of the pass
        _sync(args.device)
        start = time.perf_counter()
        bert.prepare(every)
        _sync(args.device)
        seconds = time.perf_counter() - start
        scores: list[np.ndarray] = []
        for _, cands, refs in systems:
            segment = bert.score(cands, refs).segment
            scores += [segment[column] for column in COLUMNS]
            scores.append(cos.score(cands, refs).segment["cosine"])
        base = base or scores
        diff = max(float(np.abs(a - b).max()) for a, b in zip(scores, base, strict=True))
        out.append((name, seconds, diff))
    return out


def load_systems(args: argparse.Namespace) -> list[System]:
    if args.parabank:
        return parabank(args.parabank, args.systems)
    return generated(args.systems, args.items)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--systems", type=int, default=5)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--parabank", type=Path, default=None, help="ParaBank-Eval folder")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument(
        "--cache-dir", type=Path, default=None, help="default: a fresh temporary folder"
    )
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1; both sides use it")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument(
        "--precisions",
        default=None,
        help="precisions to time, fp32 first (default: fp32,bf16 on the CPU, all four on CUDA)",
    )
    ap.add_argument("--child", choices=["naive", "ours"], help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args)
        return 0
    device = args.device
    if args.precisions is None:
        args.precisions = "fp32,tf32,bf16,fp16" if device.startswith("cuda") else "fp32,bf16"
    if device.startswith("cuda"):
        import torch

        print(f"device: {torch.cuda.get_device_name(device)}, torch {torch.__version__}")

    systems = load_systems(args)
    texts = [t for _, c, r in systems for t in c + [x for g in r for x in g]]
    n_items = sum(len(c) for _, c, _ in systems)
    data = f"{len(systems)} systems, {n_items:,} candidates"
    data += " (ParaBank-Eval)" if args.parabank else " (generated)"
    print(f"{data}, {len(texts)} texts, {len(set(texts))} unique sentences")
    work = Path(tempfile.mkdtemp(prefix="paraeval-bench-"))
    cache = args.cache_dir or work / "cache"
    shutil.rmtree(cache / "embeddings", ignore_errors=True)

    reference, t_naive = run_side("naive", args, cache, work)
    cold, t_cold = run_side("ours", args, cache, work)
    warm, t_warm = run_side("ours", args, cache, work)

    diffs = {
        key: max(float(np.abs(cold[k] - reference[k]).max()) for k in cold if k.endswith(key))
        for key in ("/p", "/r", "/f1", "/cos")
    }
    warm_diff = max(float(np.abs(warm[k] - cold[k]).max()) for k in cold)
    print(
        "max |difference| against bert_score: P {:.2e}, R {:.2e}, F1 {:.2e}; cosine against "
        "sentence-transformers {:.2e}; warm vs cold {:.1e}".format(*diffs.values(), warm_diff)
    )
    agrees = max(diffs.values()) <= AGREEMENT
    naive_name = "`bert_score.score` + sentence-transformers per system"
    sides = [
        (f"naive ({naive_name})", t_naive),
        ("paraeval, cold cache", t_cold),
        ("paraeval, warm embedding cache (BERTScore encodes again)", t_warm),
    ]
    print(f"{'':62s} {'wall s':>9s} {'speed-up':>9s} {'CPU s':>9s} {'speed-up':>9s}")
    for label, t in sides:
        wall, cpu = t["wall"], t["cpu"]
        print(
            f"{label:62s} {wall:9.1f} {t_naive['wall'] / wall:8.2f}x {cpu:9.1f} "
            f"{t_naive['cpu'] / cpu:8.2f}x"
        )
    n = len(set(texts))
    for name, seconds, diff in precisions(systems, args):
        print(
            f"  precision {name:5s}: encoder pass {seconds:7.2f} s "
            f"{n / seconds:8.0f} sentences/s; max |difference| from fp32 (P, R, F1, cosine) "
            f"{diff:.1e}"
        )
    rows = []
    on = f"{data}, {device}"
    for state, t in (("cold", t_cold), ("warm", t_warm)):
        what = f"BERTScore + cosine, {state} embedding cache, {on}"
        if state == "warm":  # token embeddings are not cached: reruns are the score cache's
            what += " (BERTScore encodes again)"
        rows.append(row("bench_semantic", what, t["wall"], "s", naive_name, t_naive["wall"]))
    write_rows(args.json, rows)
    if not args.cache_dir:
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    if not agrees:
        print(f"FAILED: scores differ from the reference implementations by more than {AGREEMENT}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
