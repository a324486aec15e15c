"""The run record: everything a run logs besides its tables and files, kept as ``run_info.json``
so that ``paraeval-log`` can log the directory later with the same content (no MLflow here).
It is read from an evaluation through :class:`Evaluated`, so that tracking imports no stage."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.files import RUN_INFO, atomic_write
from paraeval.pipeline.secrets import redact, redact_values
from paraeval.pipeline.stages.headline import headline_coefficient
from paraeval.pipeline.tracking.run_view import COEFFICIENT_TAG, REFERENCE_FREE_TAG

RUN_INFO_FORMAT = "paraeval-run/1"
# the installed libraries that decide the numbers, tagged as ``version.<package>``
LIBRARIES = (
    "paraeval",
    "sacrebleu",
    "bert-score",
    "transformers",
    "torch",
    "scipy",
    "numpy",
    "pandas",
    "hydra-core",
    "mlflow",
    "nltk",
)


@dataclass
class RunRecord:
    """Everything logged for one run besides the output files; stored as ``run_info.json``."""

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


def library_versions() -> dict[str, str]:
    out = {}
    for pkg in LIBRARIES:
        with suppress(metadata.PackageNotFoundError):
            out[f"version.{pkg}"] = metadata.version(pkg)
    return out


def hydra_tags() -> dict[str, str]:
    """Sweep tags from Hydra's runtime config: every job of a multirun shares the sweep
    directory, whatever launcher ran it."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode
    except ImportError:
        return {}
    if not HydraConfig.initialized():
        return {}
    hc = HydraConfig.get()
    tags = {"paraeval.hydra.launcher": str(hc.launcher.get("_target_", "")).rsplit(".", 1)[-1]}
    if hc.mode == RunMode.MULTIRUN:
        sweep_dir = str(Path(str(hc.sweep.dir)).resolve())
        tags["paraeval.sweep"] = sweep_dir
        tags["paraeval.sweep_id"] = hashlib.blake2b(sweep_dir.encode(), digest_size=6).hexdigest()
        tags["paraeval.sweep_job"] = str(hc.job.num)
        tags["paraeval.sweep_overrides"] = str(hc.job.override_dirname)
    return tags


def sweep_run_name(name: str, tags: Mapping[str, str]) -> str:
    if "paraeval.sweep" not in tags:
        return name
    sweep = Path(tags["paraeval.sweep"])
    return f"{name} [sweep {sweep.parent.name}/{sweep.name} #{tags['paraeval.sweep_job']}]"


class Evaluated(Protocol):
    """What tracking reads of a finished evaluation."""

    settings: Any  # params, data.name
    table: pd.DataFrame  # the loaded table; its attrs name the input files
    started_at: float
    correlations: pd.DataFrame
    compared: Any  # None when the comparison is off
    paraphrase: Any  # None, or .table: the headline table
    roles: Any  # .note(): the reference-free sentence ("" otherwise)
    alpha_curve: Any  # None, or .curve and .system_scores

    @property
    def metrics(self) -> Mapping[str, Any]: ...  # the metric ids, in order
    @property
    def run_metrics(self) -> Mapping[str, float]: ...
    @property
    def signatures(self) -> dict[str, str]: ...
    @property
    def segments(self) -> pd.DataFrame: ...
    @property
    def systems(self) -> pd.DataFrame: ...
    @property
    def comparison(self) -> pd.DataFrame: ...
    def signature_table(self) -> pd.DataFrame: ...


def run_record(
    ev: Evaluated,
    out: Path,
    overrides: Sequence[str],
    tracking: dict[str, Any],
    run_name: str | None = None,
) -> RunRecord:
    """``tracking`` and ``run_name``: the tracker's settings and configured run name."""
    s = ev.settings
    params = {**s.params, "metrics.selected": ",".join(ev.metrics)}
    tags = {
        "paraeval.data": s.data.name,
        "paraeval.git_commit": git_commit(),
        "paraeval.output_dir": str(out.resolve()),
        "paraeval.overrides": " ".join(redact(o) for o in overrides),
        # MLflow's system tags of a run's source, which its run page shows
        "mlflow.source.type": "LOCAL",
        "mlflow.source.name": Path(sys.argv[0]).name or "python",
    }
    if ev.roles.note():
        tags[REFERENCE_FREE_TAG] = ev.roles.note()
    tags.update({f"signature.{k}": v for k, v in ev.signatures.items()})
    if not ev.correlations.empty:
        # the coefficient the terminal, the report and the heatmap lead with
        tags[COEFFICIENT_TAG] = headline_coefficient(s.correlation, ev.correlations["coefficient"])
    tags.update(library_versions())
    tags.update(hydra_tags())
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
    """``<dataset>: key=value,...`` from the overrides that change the numbers."""
    kept = [o for o in overrides if not o.lstrip("+~").startswith(RUN_NAME_EXCLUDED)]
    return f"{dataset}: {','.join(kept)}" if kept else dataset


def dataset_label(name: str, files: Sequence[str]) -> str:
    """The dataset as its user knows it: the file name, or the layout's name for several."""
    if len(files) == 1:
        return Path(files[0]).name
    return f"{name}: {Path(files[0]).name} + {len(files) - 1} files" if files else name


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
