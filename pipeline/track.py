"""The run record (``run_info.json``) and the MLflow backend behind
:class:`paraeval.pipeline.tracking.MLflowTracker`.

The output files are written first (atomically, :mod:`paraeval.pipeline.files`); a tracker then
logs the finished directory (:mod:`paraeval.pipeline.tracking` chooses the backend).

MLflow layout: one parent run per invocation and one child run per system with its corpus-level
scores. The parent holds the flattened resolved config as params (plus ``metrics.selected``), the
correlations, cache hits/misses and α-curve results as metrics, the input table as an MLflow dataset
with a content digest, tags for metric signatures, project version, git commit and library
versions, and the output directory as artifacts. In a Hydra multirun every job's run carries the
same ``paraeval.sweep`` tag and a run name built from its overrides.

Everything a run logs is first written to ``run_info.json`` in its output directory and the runs are
built from the files on disk, so ``paraeval-log OUTPUT_DIR`` (:mod:`pipeline.relog`) logs a finished
directory later with exactly the same content. Runs are tagged with a hash of the output files;
logging a directory that is already logged returns the existing run instead of a duplicate.

Parallel jobs sharing one SQLite store serialize their logging on a lock file next to the database:
SQLite allows one writer, and MLflow's first-use schema creation is not safe to run concurrently.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from paraeval.memo import Memo
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.files import RUN_INFO, atomic_write, output_digest

log = logging.getLogger(__name__)

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")

RUN_INFO_FORMAT = "paraeval-run/1"
CONTENT_HASH_TAG = "paraeval.content_hash"
PARAM_MAX = 6000  # MLflow's limit on a param value
LOCK_TIMEOUT_S = 600.0
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


# --------------------------------------------------------------------------- run description
@dataclass
class RunRecord:
    """Everything logged for one run besides the output files; stored as ``run_info.json``."""

    tracking: dict[str, Any]
    params: dict[str, str]
    tags: dict[str, str]
    run_name: str
    metrics: dict[str, float] = field(default_factory=dict)
    data_name: str = "data"
    run_uid: str = field(default_factory=lambda: uuid.uuid4().hex)
    format: str = RUN_INFO_FORMAT


def write_run_info(out_dir: Path, record: RunRecord) -> None:
    text = json.dumps(asdict(record), indent=1, sort_keys=True, allow_nan=True)

    def write(path: Path) -> None:
        path.write_text(text, encoding="utf-8")

    atomic_write(out_dir / RUN_INFO, write)


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
    fields = RunRecord.__dataclass_fields__
    return RunRecord(**{k: v for k, v in raw.items() if k in fields})


# Config keys that are not parameters of the evaluation: which tracker logs a run says nothing
# about its results, and runs logged before trackers were chosen by _target_ had no such param.
NOT_PARAMS = frozenset({"tracking._target_"})


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if name in NOT_PARAMS:
            continue
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = "null" if value is None else str(value)
    return out


def library_versions() -> dict[str, str]:
    return dict(_library_versions())


@functools.cache
def _library_versions() -> dict[str, str]:
    # once per process: the libraries a process has imported do not change under it, and reading
    # the installed metadata cost about 0.1 s per job of a multirun
    from importlib import metadata

    out = {}
    for pkg in LIBRARIES:
        try:
            out[f"version.{pkg}"] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


def hydra_tags() -> dict[str, str]:
    """Sweep grouping from Hydra's runtime config: every job of one multirun shares the sweep
    directory, whatever launcher ran it (local processes, SLURM, Ray)."""
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
        sweep_dir = Path(str(hc.sweep.dir)).resolve()
        tags.update(
            {
                "paraeval.sweep": str(sweep_dir),
                "paraeval.sweep_id": hashlib.blake2b(
                    str(sweep_dir).encode(), digest_size=6
                ).hexdigest(),
                "paraeval.sweep_job": str(hc.job.num),
                "paraeval.sweep_overrides": str(hc.job.override_dirname),
            }
        )
    return tags


def sweep_run_name(name: str, tags: Mapping[str, str]) -> str:
    if "paraeval.sweep" not in tags:
        return name
    sweep = Path(tags["paraeval.sweep"])
    return f"{name} [sweep {sweep.parent.name}/{sweep.name} #{tags['paraeval.sweep_job']}]"


def _dataset_columns(columns: Iterable[Any]) -> list[Any]:
    return [
        c
        for c in columns
        if c in ("item_id", "system", "source", "references", "candidate")
        or str(c).startswith(("human_", "metric_"))
    ]


def dataset_frame(segments: pd.DataFrame) -> pd.DataFrame:
    """The evaluated input (tidy columns, human ratings, precomputed scores), references as JSON,
    in the same form whether it comes from memory or from ``segment_scores.parquet``."""
    keep = _dataset_columns(segments.columns)
    frame = segments[keep].reset_index(drop=True).copy()
    if "references" in frame:
        frame["references"] = [
            json.dumps([str(r) for r in refs], ensure_ascii=False) for refs in frame["references"]
        ]
    return frame


def frame_digest(frame: pd.DataFrame) -> str:
    """A digest of the whole table's content (MLflow's own digest looks at a prefix of rows)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(",".join(map(str, frame.columns)).encode("utf-8"))
    h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- MLflow
class TrackingUnavailable(RuntimeError):
    """The tracking server cannot be reached; the message is one line."""


def resolve_tracking_uri(tracking: Mapping[str, Any]) -> tuple[str, str | None]:
    """(tracking URI, artifact location for a new experiment or None)."""
    uri = tracking.get("uri")
    if uri:
        return str(uri), None
    store = Path(str(tracking.get("store_dir") or "mlflow")).expanduser().resolve()
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}", (store / "artifacts").as_uri()


def resolved_tracking(tracking: Mapping[str, Any]) -> dict[str, Any]:
    """Tracking settings with a relative ``store_dir`` made absolute (as stored for relogging);
    the tracker's ``_target_`` is not a setting."""
    out = {k: v for k, v in tracking.items() if k != "_target_"}
    if not out.get("uri"):
        out["store_dir"] = str(Path(str(out.get("store_dir") or "mlflow")).expanduser().resolve())
    return out


def check_reachable(uri: str, timeout: float = 5.0) -> None:
    """A fast answer for a remote server that is down (MLflow's client would retry for minutes)."""
    if not uri.startswith(("http://", "https://")):
        return
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            resp.read(64)
    except urllib.error.HTTPError:
        return  # something answers; MLflow reports any real problem itself
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackingUnavailable(
            f"MLflow tracking server {uri} is unreachable ({reason})"
        ) from None


_SQLITE_TUNED = False


def _tune_sqlite() -> None:
    """WAL journal and no fsync per commit for SQLite stores: MLflow commits several times per
    run, and with a child run per system those commits dominate logging time. WAL keeps the
    database consistent after a crash (at worst the last transactions are lost; the outputs stay
    on disk and ``paraeval-log`` is idempotent)."""
    global _SQLITE_TUNED
    if _SQLITE_TUNED:
        return
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _pragmas(dbapi_connection: Any, connection_record: Any) -> None:
        if type(dbapi_connection).__module__.startswith("sqlite3"):
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

    _SQLITE_TUNED = True


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialize writers of one SQLite store (no-op for servers and other databases)."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    from filelock import FileLock

    _tune_sqlite()
    db = Path(uri.removeprefix("sqlite:///").split("?", 1)[0])
    if not db.is_absolute():
        db = db.resolve()
    db.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(db) + ".lock", timeout=LOCK_TIMEOUT_S):
        yield


def _key(*parts: str) -> str:
    # MLflow allows alphanumerics, _ - . / and space in metric, param and tag names
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./ ")
    return ".".join("".join(ch if ch in allowed else "_" for ch in p) for p in parts)


_metric_name = _key


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _experiment_id(client: Any, name: str, artifact_location: str | None) -> str:
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    try:
        return str(client.create_experiment(name, artifact_location=artifact_location))
    except MlflowException:
        # another job created it between our lookup and our create
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return str(exp.experiment_id)


def _find_logged(client: Any, exp_id: str, content_hash: str) -> str | None:
    runs = client.search_runs(
        [exp_id],
        filter_string=f"tags.`{CONTENT_HASH_TAG}` = '{content_hash}' "
        "and attributes.status = 'FINISHED'",
        max_results=1,
    )
    return str(runs[0].info.run_id) if runs else None


# the MLflow dataset entity of the last input logged in this process, by content digest and name
_DATASETS: Memo[tuple[str, str], Any] = Memo("track.datasets", max_entries=1)


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _log_batch(
    client: Any,
    run_id: str,
    metrics: Mapping[str, float] | None = None,
    params: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
) -> None:
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    ms = [Metric(_key(k), float(v), now, 0) for k, v in (metrics or {}).items() if _finite(v)]
    ps = [Param(_key(k), str(v)[:PARAM_MAX]) for k, v in (params or {}).items()]
    ts = [RunTag(k, str(v)[:PARAM_MAX]) for k, v in (tags or {}).items()]
    # one request per run where possible (each is a round trip, or a SQLite transaction); MLflow
    # takes at most 1000 metrics, 100 params, 100 tags and 1000 entries in all per request
    while ms or ps or ts:
        p_part, ps = ps[:100], ps[100:]
        t_part, ts = ts[:100], ts[100:]
        m_part, ms = ms[: 1000 - len(p_part) - len(t_part)], ms[1000 - len(p_part) - len(t_part) :]
        client.log_batch(run_id, metrics=m_part, params=p_part, tags=t_part)


@dataclass
class Logged:
    run_id: str
    uri: str
    already: bool  # the directory had been logged before: nothing new was created


def log_output_dir(
    out_dir: Path,
    record: RunRecord,
    tracking: Mapping[str, Any] | None = None,
    before_artifacts: Callable[[], None] | None = None,
) -> Logged:
    """Log a finished output directory (its ``run_info.json`` and files) as one parent run with
    one child run per system; return the existing run if this content is already logged.

    ``before_artifacts`` (the run's own logging, while its figures are still being drawn) is
    called after the per-system runs; the files are hashed and uploaded after it returns. A run
    being logged by itself is new (its id is in the hash), so the lookup of an earlier logging
    of the same content is skipped then."""
    import mlflow
    import pyarrow.parquet as pq
    from mlflow.data.pandas_dataset import from_pandas
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.tracking import MlflowClient

    out_dir = Path(out_dir)
    tracking = dict(record.tracking if tracking is None else tracking)
    uri, artifact_location = resolve_tracking_uri(tracking)
    check_reachable(uri)
    content_hash = output_digest(out_dir, record.run_uid) if before_artifacts is None else ""
    seg_path = out_dir / "segment_scores.parquet"
    # only the input's columns: the computed scores are not part of the dataset
    segments = pd.read_parquet(seg_path, columns=_dataset_columns(pq.read_schema(seg_path).names))
    systems = pd.read_csv(out_dir / "system_scores.csv")
    corr_path = out_dir / "correlations.csv"
    correlations = pd.read_csv(corr_path) if corr_path.stat().st_size > 1 else pd.DataFrame()
    frame = dataset_frame(segments)
    digest = frame_digest(frame)

    metrics: dict[str, float] = {}
    for corr in correlations.to_dict("records"):
        if _finite(corr["value"]):
            name = _key(*(str(corr[k]) for k in ("level", "coefficient", "metric", "aspect")))
            metrics[f"corr.{name}"] = float(corr["value"])
    metrics.update({k: float(v) for k, v in record.metrics.items()})
    tags = dict(record.tags)
    tags[CONTENT_HASH_TAG] = content_hash
    tags["paraeval.dataset_digest"] = digest
    tags["paraeval.role"] = "invocation"

    with store_lock(uri):
        mlflow.set_tracking_uri(uri)
        client = MlflowClient(uri)
        exp_id = _experiment_id(
            client, str(tracking.get("experiment") or "paraeval"), artifact_location
        )
        existing = _find_logged(client, exp_id, content_hash) if content_hash else None
        if existing is not None:
            return Logged(existing, uri, True)
        parent = client.create_run(exp_id, run_name=record.run_name)
        parent_id = parent.info.run_id
        try:
            _log_batch(client, parent_id, metrics=metrics, params=record.params)
            # MLflow infers the schema value by value: once per input and process, not once per
            # sweep job
            entity = _DATASETS.get_or_compute(
                (digest, record.data_name),
                lambda: from_pandas(
                    frame, name=record.data_name, digest=digest
                )._to_mlflow_entity(),
            )
            client.log_inputs(
                parent_id,
                [DatasetInput(entity, tags=[InputTag("mlflow.data.context", "evaluation")])],
            )
            shared = {k: v for k, v in tags.items() if k.startswith(("paraeval.sweep", "version."))}
            for row in systems.to_dict("records"):
                system = str(row.pop("system"))
                child = client.create_run(
                    exp_id,
                    run_name=f"{record.run_name} / {system}",
                    tags={
                        "mlflow.parentRunId": parent_id,
                        "paraeval.system": system,
                        "paraeval.role": "system",
                        **shared,
                    },
                )
                _log_batch(
                    client,
                    child.info.run_id,
                    metrics={str(k): v for k, v in row.items() if _finite(v)},
                    params={"system": system},
                )
                client.set_terminated(child.info.run_id)
            if before_artifacts is not None:
                before_artifacts()
                tags[CONTENT_HASH_TAG] = output_digest(out_dir, record.run_uid)
            client.log_artifacts(parent_id, str(out_dir))
            # the content tag goes last: a run interrupted before here is not taken as logged
            _log_batch(client, parent_id, tags=tags)
            client.set_terminated(parent_id)
        except BaseException:
            with suppress(Exception):
                client.set_terminated(parent_id, status="FAILED")
            raise
    return Logged(parent_id, uri, False)
