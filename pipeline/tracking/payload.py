"""One run as logged, alike from memory or a finished output directory (``paraeval-log``)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from paraeval.pipeline.errors import ConfigError, RunContext
from paraeval.pipeline.files import PARAPHRASE_FILE, RUN_INFO, atomic_write
from paraeval.pipeline.secrets import redact, redact_values
from paraeval.pipeline.stages.correlate import headline_coefficient
from paraeval.pipeline.tracking.run_view import COEFFICIENT_TAG, REFERENCE_FREE_TAG

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

RUN_INFO_FORMAT = "paraeval-run/1"
# the installed libraries that decide the numbers, tagged ``paraeval.versions``
LIBRARIES = (
    "paraeval sacrebleu bert-score transformers torch scipy numpy pandas hydra-core mlflow nltk"
)


@dataclass
class RunRecord:
    tracking: dict[str, Any]
    params: dict[str, str]
    tags: dict[str, str]
    run_name: str
    metrics: dict[str, float] = field(default_factory=dict)
    data_name: str = "data"
    data_source: str = ""  # the input file's absolute path ("" for a DataFrame)
    started_ms: int = 0  # epoch milliseconds: the run's start, and when its outputs were written
    ended_ms: int = 0
    run_uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    format: str = RUN_INFO_FORMAT


def write_run_info(out_dir: Path, record: RunRecord) -> None:
    text = json.dumps(asdict(record), indent=1, sort_keys=True, allow_nan=True)
    atomic_write(Path(out_dir) / RUN_INFO, lambda path: path.write_text(text, encoding="utf-8"))


def read_run_info(out_dir: Path) -> RunRecord:
    path = Path(out_dir) / RUN_INFO
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"'{out_dir}' is not a finished paraeval output directory (no {RUN_INFO})"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    if not isinstance(raw, dict) or raw.get("format") != RUN_INFO_FORMAT:
        raise ConfigError(f"{path} is not a {RUN_INFO_FORMAT} file")
    return RunRecord(**{k: v for k, v in raw.items() if k in RunRecord.__dataclass_fields__})


def hydra_tags() -> dict[str, str]:
    """A multirun job's: the sweep directory all jobs share, whatever launcher ran them."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode
    except ImportError:
        return {}
    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return {}
    hc = HydraConfig.get()
    return {
        "paraeval.sweep": str(Path(str(hc.sweep.dir)).resolve()),
        "paraeval.sweep_job": str(hc.job.num),
        "paraeval.hydra.launcher": str(hc.launcher.get("_target_", "")).rsplit(".", 1)[-1],
    }


def sweep_run_name(name: str, tags: Mapping[str, str]) -> str:
    if "paraeval.sweep" not in tags:
        return name
    sweep = Path(tags["paraeval.sweep"])
    return f"{name} [sweep {sweep.parent.name}/{sweep.name} #{tags['paraeval.sweep_job']}]"


def run_record(
    ev: Evaluation,
    out: Path,
    overrides: Sequence[str],
    tracking: dict[str, Any],
    run_name: str | None = None,
) -> RunRecord:
    s = ev.settings
    versions = []
    for pkg in LIBRARIES.split():
        with suppress(metadata.PackageNotFoundError):
            versions.append(f"{pkg}={metadata.version(pkg)}")
    params = {**s.params, "metrics.selected": ",".join(ev.metrics)}
    tags = {
        "paraeval.data": s.data.name,
        "paraeval.output_dir": str(out.resolve()),
        "paraeval.overrides": " ".join(redact(o) for o in overrides),
        "paraeval.versions": " ".join(versions),
        # shown on MLflow's run page
        "mlflow.source.type": "LOCAL",
        "mlflow.source.name": Path(sys.argv[0]).name or "python",
        "mlflow.source.git.commit": git_commit(),
        REFERENCE_FREE_TAG: ev.roles.note(),
        **hydra_tags(),
    }
    if not ev.correlations.empty:
        tags[COEFFICIENT_TAG] = headline_coefficient(s.correlation, ev.correlations["coefficient"])
    files = [str(f) for f in ev.table.attrs.get("data_files", []) if not str(f).startswith("<")]
    dataset = dataset_label(s.data.name, files)
    return RunRecord(
        # a password stays out of the record: paraeval-log takes it from the environment
        tracking=redact_values(tracking),
        params=params,
        tags=tags,
        run_name=redact(run_name or sweep_run_name(readable_run_name(dataset, overrides), tags)),
        metrics=dict(ev.run_metrics),
        data_name=dataset,
        data_source=str(Path(files[0]).resolve()) if files else "",
        started_ms=int(ev.started_at * 1000),
        ended_ms=int(time.time() * 1000),
    )


# override keys that do not change what a run computes, or that the dataset name already says
RUN_NAME_EXCLUDED = ("hydra.", "tracking", "cache.", "report.", "data")


def readable_run_name(dataset: str, overrides: Sequence[str]) -> str:
    kept = [o for o in overrides if not o.lstrip("+~").startswith(RUN_NAME_EXCLUDED)]
    return f"{dataset}: {','.join(kept)}" if kept else dataset


def dataset_label(name: str, files: Sequence[str]) -> str:
    if len(files) == 1:
        return Path(files[0]).name
    return f"{name}: {Path(files[0]).name} + {len(files) - 1} files" if files else name


def git_commit() -> str:
    command = ["git", "rev-parse", "HEAD"]
    try:
        out = subprocess.run(
            command, cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# the input's own columns: what the MLflow dataset of a run holds (computed scores are results)
DATASET_COLUMNS = ("item_id", "system", "source", "references", "candidate")
DATASET_PREFIXES = ("human_", "metric_")


@dataclass
class RunPayload:
    """One run as a tracker receives it: each table as its output file holds it."""

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
    # the figures may still be drawn until this returns: called before the files are logged
    finish_outputs: Callable[[], None] = field(default=lambda: None)
    # the command's: deferred interrupts are raised between the store's requests
    context: RunContext = field(default_factory=RunContext)

    @classmethod
    def from_evaluation(
        cls,
        ev: Evaluation,
        out_dir: Path,
        overrides: Sequence[str],
        tracking: dict[str, Any],
        run_name: str | None = None,
    ) -> RunPayload:
        curve = ev.alpha_curve
        return cls(
            out_dir=out_dir,
            record=run_record(ev, out_dir, overrides, tracking, run_name),
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
        out = Path(out_dir)
        record = read_run_info(out) if record is None else record
        text = {"keep_default_na": False, "na_values": [""]}  # a system named "NA" stays one
        return cls(
            out_dir=out,
            record=record,
            dataset=_read_dataset(out / "segment_scores.parquet"),
            systems=_read_csv(out / "system_scores.csv"),
            correlations=_read_csv(out / "correlations.csv"),
            comparison=_read_csv(out / "system_comparison.csv", **text),
            paraphrase=_read_csv(out / PARAPHRASE_FILE, **text),
            alpha_curve=_read_csv(out / "alpha_curve.csv"),
            alpha_systems=_read_csv(out / "alpha_systems.csv"),
            signatures=_read_csv(out / "signatures.csv", **text),
        )


def _read_csv(path: Path, **kwargs: Any) -> pd.DataFrame:
    """Floats to the very value; a missing or empty file is an empty table."""
    if not path.is_file() or path.stat().st_size <= 1:
        return pd.DataFrame()
    return pd.read_csv(path, float_precision="round_trip", **kwargs)


def dataset_columns(columns: Iterable[Any]) -> list[Any]:
    return [c for c in columns if c in DATASET_COLUMNS or str(c).startswith(DATASET_PREFIXES)]


def dataset_frame(segments: pd.DataFrame) -> pd.DataFrame:
    """References as JSON, alike from memory or from the parquet file."""
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
    """Of the whole table (MLflow's own digest looks at a prefix of rows)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(",".join(map(str, frame.columns)).encode("utf-8"))
    h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return h.hexdigest()
