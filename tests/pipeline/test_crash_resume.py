"""Crash and resume: a run killed (SIGKILL) in the middle of scoring leaves its finished metric
results in the score cache; the same command run again reuses them and writes output files
identical to those of an uninterrupted run. Output files appear under their final name only when
complete, whatever moment the process dies.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tests.pipeline.helpers import REPO, cli_env, run_cli

N_ITEMS = 3000
SYSTEMS = ("a", "b", "c")
METRICS = "[bleu,chrf,ter]"
JOBS = len(SYSTEMS) * 3  # one cache entry per (metric, system)
KILL_AT = JOBS // 2  # BLEU done, chrF under way; TER (the slowest) still to come
FAST = [
    "tracking=none",
    "report.print_tables=false",
    "correlation.ci=false",
    "compare.enabled=false",
    "alpha_curve.enabled=false",
]
# results, compared file by file; run_info.json (a fresh run id), the log and .hydra/ (the command
# line) differ between any two runs by design
RESULT_CSVS = (
    "system_scores.csv",
    "correlations.csv",
    "significance.csv",
    "normalization.csv",
    "signatures.csv",
    "human_report.csv",
)


def _table(path: Path) -> Path:
    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(300)]

    def sentence() -> str:
        return " ".join(rng.choice(vocab, size=int(rng.integers(6, 14))))

    with path.open("w", encoding="utf-8") as fh:
        for i in range(N_ITEMS):
            source, refs = sentence(), [sentence()]
            for s in SYSTEMS:
                row = {
                    "item_id": f"{i:05d}",
                    "system": s,
                    "source": source,
                    "references": refs,
                    "candidate": sentence(),
                    "human_meaning": float(rng.integers(1, 6)),
                }
                fh.write(json.dumps(row) + "\n")
    return path


def _args(data: Path, cache: Path, out: Path) -> list[str]:
    return [
        "data=table",
        f"data.path={data}",
        f"metrics={METRICS}",
        f"cache.dir={cache}",
        f"hydra.run.dir={out}",
        *FAST,
    ]


def _entries(cache: Path) -> list[Path]:
    return list((cache / "scores" / "v1").glob("*/*.npz"))


def _cache_line(text: str) -> tuple[int, int]:
    m = re.search(r"score cache .*?: (\d+) hits, (\d+) misses", text)
    assert m, text[-3000:]
    return int(m.group(1)), int(m.group(2))


def test_killed_run_resumes_from_cache_with_identical_outputs(tmp_path: Path) -> None:
    data = _table(tmp_path / "big.jsonl")
    cache, out = tmp_path / "cache", tmp_path / "out"
    args = _args(data, cache, out)

    # 1. start, wait until about half of the metric results are cached, kill without warning
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "paraeval", *args],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while (
            len(_entries(cache)) < KILL_AT and proc.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    killed_after = time.perf_counter() - start
    assert proc.returncode == -signal.SIGKILL
    cached = len(_entries(cache))
    assert KILL_AT <= cached < JOBS, (
        f"killed with {cached} of {JOBS} results cached: not mid-scoring"
    )
    assert not (out / "segment_scores.parquet").exists()

    # 2. the same command again: finished results come from the cache
    start = time.perf_counter()
    resumed = run_cli(args, tmp_path)
    resumed_s = time.perf_counter() - start
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    hits, misses = _cache_line(resumed.stdout + resumed.stderr)
    assert hits >= cached and hits + misses == JOBS

    # 3. an uninterrupted run with a cache of its own
    ref_out = tmp_path / "ref_out"
    start = time.perf_counter()
    fresh = run_cli(_args(data, tmp_path / "ref_cache", ref_out), tmp_path)
    fresh_s = time.perf_counter() - start
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert _cache_line(fresh.stdout + fresh.stderr) == (0, JOBS)

    print(
        f"\n{len(SYSTEMS)} systems x {N_ITEMS} items, metrics {METRICS}: killed after "
        f"{killed_after:.1f} s with {cached}/{JOBS} results cached; resumed run {resumed_s:.1f} s "
        f"({hits} hits, {misses} misses); uninterrupted run {fresh_s:.1f} s"
    )

    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "segment_scores.parquet"),
        pd.read_parquet(ref_out / "segment_scores.parquet"),
    )
    for name in RESULT_CSVS:
        assert (out / name).is_file() == (ref_out / name).is_file(), name
        if (out / name).is_file():
            assert (out / name).read_bytes() == (ref_out / name).read_bytes(), name
    plots = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert plots and plots == sorted(p.name for p in (ref_out / "plots").glob("*.png"))
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import pandas as pd
    from paraeval.pipeline.files import write_parquet

    def slow(df, path, index=False):
        with open(path, "wb") as fh:
            fh.write(b"PAR1" + b"x" * 100_000)
            fh.flush()
            print("half written", flush=True)
            time.sleep(60)

    pd.DataFrame.to_parquet = slow
    write_parquet(pd.DataFrame({"a": [1]}), Path(sys.argv[1]))
    """
)


def test_kill_during_write_never_leaves_a_partial_file_under_the_final_name(
    tmp_path: Path,
) -> None:
    target = tmp_path / "segment_scores.parquet"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(target)],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "half written"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert not target.exists()
    partial = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(partial) == 1 and partial[0].name.startswith(".segment_scores.parquet.")
    assert partial[0].stat().st_size > 100_000  # the half-written bytes went there, not to target


# --------------------------------------------------------------------------- a full disk
def _big_table(path: Path, n_items: int = 200) -> Path:
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(3000)]

    def sentence() -> str:
        return " ".join(rng.choice(words, size=40))

    rows = []
    for i in range(n_items):
        source, ref = sentence(), sentence()
        for system in "abc":
            rows.append(
                {
                    "item_id": f"i{i}",
                    "system": system,
                    "source": source,
                    "references": [ref],
                    "candidate": sentence(),
                    "human_meaning": float(rng.random()),
                }
            )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


FULL_DISK_SCRIPT = r"""
set -u
mkdir -p "$MNT/out"
echo OLD-RESULT > "$MNT/out/segment_scores.parquet"
"$PY" -m paraeval data=table "data.path=$DATA" "metrics=[bleu]" tracking=none \
    "hydra.run.dir=$MNT/out" "cache.dir=$CACHE" correlation.ci=false compare.enabled=false \
    report.print_tables=false report.plot_process=false > "$REPORT/stdout" 2> "$REPORT/stderr"
echo $? > "$REPORT/rc"
cp "$MNT/out/segment_scores.parquet" "$REPORT/kept"
ls -a "$MNT/out" > "$REPORT/listing"
"""


def test_full_disk_while_writing_tables_is_one_line_and_loses_nothing(tmp_path: Path) -> None:
    """A real ENOSPC: the output folder is a 128 KiB tmpfs (mounted in a user namespace, so no
    privileges are needed), too small for the segment table. Where user namespaces are not
    available, the file size limit (RLIMIT_FSIZE) makes the same write fail with EFBIG."""
    data = _big_table(tmp_path / "big.jsonl")
    report = tmp_path / "report"
    report.mkdir()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "PY": sys.executable,
        "DATA": str(data),
        "MNT": str(mnt),
        "CACHE": str(tmp_path / "cache"),
        "REPORT": str(report),
    }
    namespace = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size=128k tmpfs "{mnt}" || exit 99'],
        capture_output=True,
        check=False,
    )
    if namespace.returncode == 0:
        cmd = [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f'mount -t tmpfs -o size=128k tmpfs "{mnt}" && {FULL_DISK_SCRIPT}',
        ]
        expected = "No space left on device"
    else:
        cmd = ["sh", "-c", f"trap '' XFSZ; ulimit -f 64; {FULL_DISK_SCRIPT}"]
        expected = "File too large"
    subprocess.run(cmd, env=env, timeout=300, check=True)
    stderr = (report / "stderr").read_text()
    assert (report / "rc").read_text().strip() == "2", stderr[-3000:]
    assert "Traceback" not in stderr and "Logging error" not in stderr, stderr[-3000:]
    lines = [ln for ln in stderr.splitlines() if ln.startswith("paraeval: error:")]
    assert len(lines) == 1, stderr[-3000:]
    assert f"cannot write {mnt}/out/segment_scores.parquet" in lines[0]
    assert expected in lines[0] and f"kept in {mnt}/out" in lines[0]
    # the earlier file of that name is intact, and no partial file is left anywhere
    assert (report / "kept").read_text() == "OLD-RESULT\n"
    listing = (report / "listing").read_text().split()
    assert not [n for n in listing if n.endswith(".tmp")], listing
    assert ".hydra" in listing  # what was written before stays
