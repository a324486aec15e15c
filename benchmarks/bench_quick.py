"""paraeval-score against sacrebleu's command line: ``-m bleu chrf`` on the same files, wall time.

Two sizes: the demo's 48 lines (the start-up cost a user feels on a small file) and a ~10,000-line
file (the demo's lines repeated with their line number appended, so that no two are equal). Both
commands run as a user runs them, a new process each time (``python -m``, so that neither side
depends on an installed console script), interleaved, best of ``--repeat`` runs; the scores are
checked to agree to sacrebleu's printed decimals. Ratio = paraeval-score / sacrebleu.

Usage: ``python benchmarks/bench_quick.py [--lines 10000] [--repeat 5] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from results import row, write_rows  # noqa: E402  (found through the path set above)

METRICS = ("bleu", "chrf")


def write_files(folder: Path, lines: int | None) -> tuple[Path, Path]:
    """(reference file, hypothesis file): the demo's first reference and its 'medium' system;
    with ``lines``, repeated to that many lines."""
    demo = REPO / "pipeline" / "data" / "demo" / "demo.jsonl"
    rows = [json.loads(line) for line in demo.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if r["system"] == "medium"]
    pairs = [(r["references"][0], r["candidate"]) for r in rows]
    if lines is not None:
        pairs = [(f"{r} {k}", f"{c} {k}") for k in range(lines) for r, c in [pairs[k % len(pairs)]]]
    ref, hyp = folder / f"ref{len(pairs)}.txt", folder / f"hyp{len(pairs)}.txt"
    ref.write_text("".join(r + "\n" for r, _ in pairs), encoding="utf-8")
    hyp.write_text("".join(c + "\n" for _, c in pairs), encoding="utf-8")
    return ref, hyp


def timed(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, proc.stdout


def compare(ref: Path, hyp: Path, repeat: int) -> tuple[float, float, int]:
    """Best wall times of (paraeval-score, sacrebleu) and the file's line count."""
    ours = [sys.executable, "-m", "paraeval.pipeline.cli.score", "-r", str(ref), "-i", str(hyp)]
    ours += ["-m", *METRICS, "-f", "json"]
    theirs = [sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp), "-m", *METRICS]
    theirs += ["-f", "json", "-w", "4"]
    timed(ours)  # a first run compiles and caches what later runs load (numba, .pyc)
    best_ours = best_theirs = float("inf")
    for _ in range(repeat):
        t_ours, out_ours = timed(ours)
        t_theirs, out_theirs = timed(theirs)
        best_ours, best_theirs = min(best_ours, t_ours), min(best_theirs, t_theirs)
    for mine, their in zip(json.loads(out_ours), json.loads(out_theirs), strict=True):
        if round(mine["score"], 4) != their["score"]:
            raise SystemExit(f"scores differ: {mine} vs {their}")
    return best_ours, best_theirs, len(ref.read_text(encoding="utf-8").splitlines())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000, help="lines of the large file")
    parser.add_argument("--repeat", type=int, default=5, help="best of this many runs")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (None, args.lines):
            ours, theirs, n = compare(*write_files(Path(tmp), size), args.repeat)
            what = f"`paraeval-score -m bleu chrf`, {n:,} lines, wall (a new process)"
            print(
                f"{n:>6,} lines: paraeval-score {ours:.2f} s, sacrebleu {theirs:.2f} s, "
                f"ratio {ours / theirs:.2f}"
            )
            figures.append(row("bench_quick", what, ours, "s", "`sacrebleu -m bleu chrf`", theirs))
    write_rows(args.json, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
