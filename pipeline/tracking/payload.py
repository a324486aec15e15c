"""What a tracker logs for one run: the run record, the result tables and the output folder. A run
builds it from its tables in memory, ``paraeval-log`` from a finished output directory (the one
place where output files are read back); one function logs both, so both log the same run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from paraeval.pipeline.context import RunContext
from paraeval.pipeline.files import PARAPHRASE_FILE
from paraeval.pipeline.tracking.run_record import Evaluated, RunRecord, read_run_info, run_record

# the input's own columns: what the MLflow dataset of a run holds (computed scores are results)
DATASET_COLUMNS = ("item_id", "system", "source", "references", "candidate")
DATASET_PREFIXES = ("human_", "metric_")


@dataclass
class RunPayload:
    """One run as a tracker receives it: each table as its output file holds it (``dataset`` is
    :func:`dataset_frame` of the segments; ``alpha_systems`` is empty where the run has none)."""

    out_dir: Path
    record: RunRecord
    dataset: pd.DataFrame = field(default_factory=pd.DataFrame)
    systems: pd.DataFrame = field(default_factory=pd.DataFrame)
    correlations: pd.DataFrame = field(default_factory=pd.DataFrame)
    comparison: pd.DataFrame = field(default_factory=pd.DataFrame)
    paraphrase: pd.DataFrame = field(default_factory=pd.DataFrame)
    alpha_curve: pd.DataFrame = field(default_factory=pd.DataFrame)
    alpha_systems: pd.DataFrame = field(default_factory=pd.DataFrame)
    # one row per output column: column, metric, group, higher_is_better, signature
    signatures: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the figures and report.html may still be drawn until this returns: a tracker calls it
    # before it reads or logs the folder's files
    finish_outputs: Callable[[], None] = field(default=lambda: None)
    # the command's: its deferred interrupts are raised between the store's requests, and a
    # run that is not logged is reported to it
    context: RunContext = field(default_factory=RunContext)

    @classmethod
    def from_evaluation(
        cls,
        ev: Evaluated,
        out_dir: Path,
        overrides: Sequence[str],
        tracking: dict[str, Any],
        run_name: str | None = None,
    ) -> RunPayload:
        """``tracking`` and ``run_name`` as for :func:`run_record`."""
        curve = ev.alpha_curve
        return cls(
            out_dir=Path(out_dir),
            record=run_record(ev, Path(out_dir), overrides, tracking, run_name),
            dataset=dataset_frame(ev.segments),
            systems=ev.systems.reset_index(),
            correlations=ev.correlations,
            comparison=ev.comparison if ev.compared is not None else pd.DataFrame(),
            paraphrase=ev.paraphrase.table if ev.paraphrase is not None else pd.DataFrame(),
            alpha_curve=curve.curve if curve is not None else pd.DataFrame(),
            alpha_systems=curve.system_scores if curve is not None else pd.DataFrame(),
            signatures=ev.signature_table(),
        )

    @classmethod
    def from_dir(cls, out_dir: Path, record: RunRecord | None = None) -> RunPayload:
        """The payload the run itself would have sent (the files ``write_tables`` wrote)."""
        out = Path(out_dir)
        record = read_run_info(out) if record is None else record
        return cls(
            out_dir=out,
            record=record,
            dataset=_read_dataset(out / "segment_scores.parquet"),
            systems=_read_csv(out / "system_scores.csv"),
            correlations=_read_csv(out / "correlations.csv"),
            comparison=_read_csv(
                out / "system_comparison.csv", keep_default_na=False, na_values=[""]
            ),
            paraphrase=_read_csv(out / PARAPHRASE_FILE, keep_default_na=False, na_values=[""]),
            alpha_curve=_read_csv(out / "alpha_curve.csv"),
            alpha_systems=_read_csv(out / "alpha_systems.csv"),
            signatures=_read_csv(out / "signatures.csv", keep_default_na=False, na_values=[""]),
        )


def _read_csv(path: Path, **kwargs: Any) -> pd.DataFrame:
    """A table as written, floats to the very value (a missing or empty file: an empty table)."""
    if not path.is_file() or path.stat().st_size <= 1:
        return pd.DataFrame()
    return pd.read_csv(path, float_precision="round_trip", **kwargs)


def dataset_columns(columns: Iterable[Any]) -> list[Any]:
    return [c for c in columns if c in DATASET_COLUMNS or str(c).startswith(DATASET_PREFIXES)]


def dataset_frame(segments: pd.DataFrame) -> pd.DataFrame:
    """The evaluated input with references as JSON, alike from memory or from the parquet file."""
    keep = dataset_columns(segments.columns)
    frame = segments[keep].reset_index(drop=True).copy()
    if "references" in frame:
        frame["references"] = [
            json.dumps([str(r) for r in refs], ensure_ascii=False) for refs in frame["references"]
        ]
    return frame


def _read_dataset(path: Path) -> pd.DataFrame:
    import pyarrow.parquet as pq

    columns = dataset_columns(pq.read_schema(path).names)
    return dataset_frame(pd.read_parquet(path, columns=columns))


def frame_digest(frame: pd.DataFrame) -> str:
    """A digest of the whole table's content (MLflow's own digest looks at a prefix of rows)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(",".join(map(str, frame.columns)).encode("utf-8"))
    h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return h.hexdigest()
