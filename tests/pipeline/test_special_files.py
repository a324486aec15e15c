"""``data.path`` that is not a regular file: a directory, a device, a socket are one error line
saying what the path is; a FIFO and a shell's process substitution (``<(zcat data.gz)``) are
read like a file, once, from start to end."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from paraeval.pipeline.data.load import load_table
from paraeval.pipeline.errors import DataError
from tests.pipeline.helpers import cli_env, run_cli

ROWS = [
    {
        "item_id": f"i{i}",
        "system": s,
        "source": f"the source sentence {i}",
        "references": [f"a reference sentence {i}"],
        "candidate": f"candidate {s} sentence {i}",
        "human_meaning": float((i + len(s)) % 4),
    }
    for i in range(6)
    for s in ("a", "bb", "ccc")
]
TEXT = "".join(json.dumps(r) + "\n" for r in ROWS)
FAST = ["tracking=none", "report.print_tables=false", "correlation.ci=false", "metrics=[bleu,chrf]"]


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A named pipe with a writer thread that writes the table once and closes its end."""
    path = tmp_path / "data.fifo"
    os.mkfifo(path)

    def write() -> None:
        with open(path, "w", encoding="utf-8") as f:  # blocks until the loader opens it
            f.write(TEXT)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    yield path
    writer.join(timeout=10)
    assert not writer.is_alive(), "nobody read the pipe"


def _load_in_time(path: Path) -> pd.DataFrame:
    """``load_table`` on ``path``, failing (rather than hanging) if it opens a pipe twice."""
    result: list[pd.DataFrame] = []
    reader = threading.Thread(
        target=lambda: result.append(load_table(str(path), format="jsonl")), daemon=True
    )
    reader.start()
    reader.join(timeout=30)
    assert result, "the loader blocked: it opened the pipe a second time"
    return result[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_is_read_like_a_file_once(fifo: Path, tmp_path: Path) -> None:
    table = _load_in_time(fifo)
    plain = tmp_path / "data.jsonl"
    plain.write_text(TEXT, encoding="utf-8")
    expected = load_table(str(plain))
    # the same table; each row's origin names the pipe
    assert table["origin"].iloc[0] == f"{fifo}:1"
    pd.testing.assert_frame_equal(table.drop(columns="origin"), expected.drop(columns="origin"))
    # a sweep's later job in this process gets the same bytes; the pipe has no writer left
    pd.testing.assert_frame_equal(_load_in_time(fifo), table)


def _error(path: Path) -> str:
    with pytest.raises(DataError) as caught:
        load_table(str(path), format="jsonl")
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "file not found" not in message
    return message


def test_a_directory_is_named_as_one(tmp_path: Path) -> None:
    assert "data.path is a directory; expected a file" in _error(tmp_path)


def test_a_device_is_named_as_one() -> None:
    # reading /dev/zero would never end
    assert "data.path is a character device; expected a file" in _error(Path("/dev/zero"))


def test_a_socket_is_named_as_one(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert "data.path is a socket; expected a file" in _error(path)


def test_a_missing_file_is_still_not_found(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file not found"):
        load_table(str(tmp_path / "x.jsonl"))


@pytest.mark.slow
def test_a_directory_on_the_command_line_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = run_cli(
        ["data=table", f"data.path={tmp_path}", f"hydra.run.dir={tmp_path}/o", *FAST], tmp_path
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paraeval: error: "), proc.stderr[-2000:]
    assert f"{tmp_path}: data.path is a directory; expected a file" in lines[0]


@pytest.mark.slow
def test_a_process_substitution_is_read(tmp_path: Path) -> None:
    plain = tmp_path / "data.jsonl"
    plain.write_text(TEXT, encoding="utf-8")
    command = " ".join(
        [
            shlex.quote(sys.executable),
            "-m paraeval data=table data.format=jsonl",
            f"data.path=<(cat {shlex.quote(str(plain))})",
            f"hydra.run.dir={shlex.quote(str(tmp_path / 'out'))}",
            *FAST,
        ]
    )
    proc = subprocess.run(
        ["bash", "-c", command.replace("metrics=[bleu,chrf]", "'metrics=[bleu,chrf]'")],
        cwd=tmp_path,
        env=cli_env(PARAEVAL_CACHE_DIR=str(tmp_path / "cache")),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    scores = pd.read_parquet(tmp_path / "out" / "segment_scores.parquet")
    assert len(scores) == len(ROWS) and {"bleu", "chrf"} <= set(scores.columns)


@pytest.mark.slow
def test_a_sweep_job_with_a_bad_path_says_which_and_the_sweep_goes_on(tmp_path: Path) -> None:
    plain = tmp_path / "data.jsonl"
    plain.write_text(TEXT, encoding="utf-8")
    sweep = tmp_path / "sweep"
    proc = run_cli(
        ["-m", "data=table", f"data.path={tmp_path},{plain}", f"hydra.sweep.dir={sweep}", *FAST],
        tmp_path,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("paraeval: error:")]
    assert len(errors) == 1 and errors[0].startswith(f"paraeval: error: sweep job 0 ({sweep}/0)")
    assert "data.path is a directory" in errors[0]
    assert (sweep / "1" / "segment_scores.parquet").is_file()  # the later job ran
