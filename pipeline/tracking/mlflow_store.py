"""The run record (``run_info.json``) and the MLflow backend behind
:class:`paraeval.pipeline.tracking.trackers.MLflowTracker`.

The output files are written first (atomically, :mod:`paraeval.pipeline.files`); a tracker then
logs the finished directory (:mod:`paraeval.pipeline.tracking.trackers` chooses the backend).

MLflow layout: one parent run per invocation, named ``<input file>: <overrides>``, with its real
start and end times, and one child run per system (named after it) with its corpus-level scores and,
from the comparison, each column's ``.ci_low``, ``.ci_high``, ``.p_bootstrap``, ``.p_ar`` and
``.cluster``. The parent holds the flattened resolved config as params (plus
``metrics.selected``); as metrics a few headline correlations (the group averages'), cache
hits/misses and α-curve results; the full correlation and comparison tables as MLflow tables
(``tables/*.json``); the input table as an MLflow dataset named after the input file, with its path
as source and a content digest; tags for metric signatures, git commit and library versions
(``version.<package>``); and the output directory as artifacts. In a Hydra multirun every job's
run carries the same ``paraeval.sweep`` tag and a run name built from its overrides.

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
import tempfile
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

from paraeval.memo import Memo, arrow_key
from paraeval.pipeline.errors import ConfigError, raise_deferred
from paraeval.pipeline.files import RUN_INFO, atomic_write, output_digest
from paraeval.pipeline.names import show, slug

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
    data_source: str = ""  # the input file's absolute path ("" for a DataFrame)
    started_ms: int = 0  # epoch milliseconds: the run's start, and when its outputs were written
    ended_ms: int = 0
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
    if uri and str(uri).startswith("sqlite:///"):
        # beside the store, as for store_dir; MLflow's default is ./mlruns in whatever folder
        # the run was started from
        db = Path(sqlite_path(str(uri)))
        return str(uri), (db.parent / "artifacts").as_uri()
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


# MLflow's client retries a failing request 7 times with exponential back-off (minutes against a
# server that answers 500); paraeval bounds that to seconds. Variables a user sets win.
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}
HEALTH_ATTEMPTS = 2
HEALTH_PAUSE_S = 0.5


def bound_http_retries() -> None:
    for name, value in HTTP_RETRY_DEFAULTS.items():
        os.environ.setdefault(name, value)


def check_reachable(uri: str, timeout: float = 5.0) -> None:
    """A fast answer for a remote server that is down or failing (MLflow's client would retry
    for minutes): ``/health`` must answer, and not with a server error (5xx). A 4xx (a proxy
    without that route) counts as an answer. Raises :class:`TrackingUnavailable`."""
    if not uri.startswith(("http://", "https://")):
        return
    bound_http_retries()
    url = uri.rstrip("/") + "/health"
    problem = ""
    for attempt in range(HEALTH_ATTEMPTS):
        if attempt:
            time.sleep(HEALTH_PAUSE_S)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                resp.read(64)
            return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return  # something answers; MLflow reports any real problem itself
            problem = f"answers HTTP {exc.code} {exc.reason}".rstrip()
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            problem = f"is unreachable ({getattr(exc, 'reason', exc)})"
    raise TrackingUnavailable(f"MLflow tracking server {uri} {problem}")


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


def sqlite_path(uri: str) -> Path:
    """The database file of a ``sqlite:///`` URI, absolute."""
    db = Path(uri.removeprefix("sqlite:///").split("?", 1)[0])
    return db if db.is_absolute() else db.resolve()


class StoreBroken(TrackingUnavailable):
    """A SQLite store that a killed run left half-created; the message says what to do."""


def _store_state(db: Path) -> str:
    """``missing``, ``ready``, ``empty-broken`` (half-created, no run in it: safe to recreate)
    or ``broken`` (half-created with runs: the user decides)."""
    import sqlite3

    if not db.exists() or db.stat().st_size == 0:
        return "missing"
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tables = {
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            versioned = "alembic_version" in tables and bool(
                con.execute("SELECT count(*) FROM alembic_version").fetchone()[0]
            )
            runs = con.execute("SELECT count(*) FROM runs").fetchone()[0] if "runs" in tables else 0
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise StoreBroken(f"MLflow store {db} cannot be read ({exc})") from None
    # an interrupted batch migration leaves its copy table behind ("table ... already exists")
    interrupted = any(t.startswith("_alembic_tmp_") for t in tables)
    if versioned and not interrupted:
        return "ready"
    return "broken" if runs else "empty-broken"


def prepare_sqlite_store(db: Path) -> None:
    """Create a new store atomically (built under a temporary name, then renamed), so that a run
    killed while MLflow creates the schema leaves no half-created store; repair one left by an
    older version the same way when it holds no run. Called under the store's lock."""
    state = _store_state(db)
    if state == "ready":
        return
    if state == "broken":
        raise StoreBroken(
            f"MLflow store {db} was left half-created (a schema migration was interrupted) and "
            f"holds runs; move it aside (mv {db} {db}.broken) so that a new one is created"
        )
    if state == "empty-broken":
        log.warning("MLflow store %s was left half-created and holds no run; recreating it", db)
    import sqlalchemy
    from mlflow.store.db.utils import _initialize_tables

    for stale in db.parent.glob(f".{db.name}.creating-*"):
        with suppress(OSError):
            stale.unlink()
    tmp = db.parent / f".{db.name}.creating-{os.getpid()}"
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp}")
    try:
        _initialize_tables(engine)
    finally:
        engine.dispose()
    for suffix in ("-wal", "-shm"):
        with suppress(OSError):
            os.unlink(str(db) + suffix)
    os.replace(tmp, db)


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialize writers of one SQLite store (no-op for servers and other databases), and make
    sure the store is whole before MLflow opens it."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    from filelock import FileLock

    _tune_sqlite()
    db = sqlite_path(uri)
    db.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(db) + ".lock", timeout=LOCK_TIMEOUT_S):
        prepare_sqlite_store(db)
        yield


# a pure function of its strings, called twice for each of the ~10,000 per-system metrics of a
# ParaBank-Eval job, on the same names in every job of a sweep
@functools.lru_cache(maxsize=1 << 16)
def _key(*parts: str) -> str:
    """An MLflow metric/param/tag key from parts that may come from data (system and column
    names): MLflow allows alphanumerics, ``_ - . /`` and space, and refuses keys that resolve to
    other names as paths. A part that is safe as it is stays unchanged; any other passes through
    :func:`paraeval.pipeline.names.slug` (safe characters and a stable hash)."""
    out = []
    for part in parts:
        if all(ch in _ALLOWED for ch in part) and ".." not in part and not part.startswith("/"):
            out.append(part)
        else:
            out.append(slug(part))
    return ".".join(out)


_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./ ")
_metric_name = _key


CORRELATION_TABLE = "tables/correlations.json"
COMPARISON_TABLE = "tables/system_comparison.json"
# the run tag through which the MLflow UI and ``MlflowClient.load_table`` find a run's tables
LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"
# the per-system statistics of system_comparison.csv, logged as <column>.<statistic>
COMPARISON_STATS = ("ci_low", "ci_high", "p_bootstrap", "p_ar", "cluster")
HEADLINE_COLUMNS = ("syntactic", "semantic")


def headline_metrics(correlations: pd.DataFrame) -> dict[str, float]:
    """The few correlations worth a chart: the group averages' correlation, first coefficient,
    at every level and aspect (``corr.<level>.<coefficient>.<column>.<aspect>``); the whole
    table is logged as an MLflow table."""
    if correlations.empty:
        return {}
    first = correlations["coefficient"].iloc[0]
    rows = correlations[
        (correlations["coefficient"] == first) & correlations["metric"].isin(HEADLINE_COLUMNS)
    ]
    metrics = {}
    for corr in rows.to_dict("records"):
        if _finite(corr["value"]):
            name = _key(*(str(corr[k]) for k in ("level", "coefficient", "metric", "aspect")))
            metrics[f"corr.{name}"] = float(corr["value"])
    return metrics


def system_metrics(systems: pd.DataFrame, comparison: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per system: each column's corpus-level score, and from the comparison its interval,
    paired p-values and cluster (``<column>.ci_low`` ...)."""
    out: dict[str, dict[str, float]] = {}
    for row in systems.to_dict("records"):
        system = str(row.pop("system"))
        out[system] = {_key(str(k)): float(v) for k, v in row.items() if _finite(v)}
    for row in comparison.to_dict("records"):
        values = out.setdefault(str(row["system"]), {})
        for stat in COMPARISON_STATS:
            if stat in row and _finite(row[stat]):
                values[_key(str(row["metric"]), stat)] = float(row[stat])
    return out


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


# the dataset table and its digest of the last input logged in this process, by the content of
# its columns as stored: each job of a sweep logs the same input (at ParaBank's 14,000 rows,
# its references as JSON and their digest took 0.15 s a job)
_DATASET_FRAMES: Memo[str, tuple[pd.DataFrame, str]] = Memo("track.dataset_frames", max_entries=1)


def _dataset(seg_path: Path) -> tuple[pd.DataFrame, str]:
    """The input's columns of ``segment_scores.parquet`` as :func:`dataset_frame` gives them
    (the computed scores are not part of the dataset), and their :func:`frame_digest`."""
    import pyarrow.parquet as pq

    columns = _dataset_columns(pq.read_schema(seg_path).names)
    key = arrow_key(pq.read_table(seg_path, columns=columns))

    def build() -> tuple[pd.DataFrame, str]:
        frame = dataset_frame(pd.read_parquet(seg_path, columns=columns))
        return frame, frame_digest(frame)

    return _DATASET_FRAMES.get_or_compute(key, build)


# the MLflow dataset entity of the last input logged in this process, by content digest and name
_DATASETS: Memo[tuple[str, str], Any] = Memo("track.datasets", max_entries=1)


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# what MLflow takes in one ``log_batch`` request (metrics count towards the entries only)
PARAMS_PER_REQUEST = 100
TAGS_PER_REQUEST = 100
ENTRIES_PER_REQUEST = 1000


def _log_batch(
    client: Any,
    run_id: str,
    metrics: Mapping[str, float] | None = None,
    params: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
) -> None:
    from mlflow.entities import RunTag

    ms, ps = _batch_entities(metrics or {}, params or {}, int(time.time() * 1000))
    ts = [RunTag(_key(k), str(v)[:PARAM_MAX]) for k, v in (tags or {}).items()]
    # one request per run where possible (each is a round trip, or a SQLite transaction)
    while ms or ps or ts:
        p_part, ps = ps[:PARAMS_PER_REQUEST], ps[PARAMS_PER_REQUEST:]
        t_part, ts = ts[:TAGS_PER_REQUEST], ts[TAGS_PER_REQUEST:]
        room = ENTRIES_PER_REQUEST - len(p_part) - len(t_part)
        m_part, ms = ms[:room], ms[room:]
        client.log_batch(run_id, metrics=m_part, params=p_part, tags=t_part)


def _log_tables(client: Any, run_id: str, tables: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    """The non-empty ``tables`` as MLflow tables, uploaded in one request; returns the tag that
    lists them. The same files and tag as ``MlflowClient.log_table``, which for each table asks
    for the run twice and lists its artifacts (to append to an existing table) and sets the tag
    in a request of its own: a third of a sweep job's logging on the demo."""
    logged = [(name, frame) for name, frame in tables.items() if not frame.empty]
    if not logged:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, frame in logged:
            path = Path(tmp, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            frame.to_json(path, orient="split", index=False, date_format="iso")
        client.log_artifacts(run_id, tmp)
    listed = [{"path": name, "type": "table"} for name, _ in logged]
    return {LOGGED_ARTIFACTS_TAG: json.dumps(listed)}


@dataclass
class SystemRun:
    """One system's child run: its name, tags, corpus-level metrics and params."""

    name: str
    tags: dict[str, str]
    metrics: Mapping[str, float]
    params: dict[str, str]


def log_system_runs(
    client: Any, exp_id: str, runs: list[SystemRun], start: int | None, end: int | None
) -> None:
    """The per-system child runs, created FINISHED with their metrics, params and tags.

    In a SQL store (SQLite, PostgreSQL, ...) all of them are written in one transaction, as the
    rows MLflow's own ``create_run`` + ``log_batch`` + ``set_terminated`` write: through MLflow's
    API each run costs three transactions and an ORM object per metric (50 ms a run, 1.3 s of a
    36-system sweep job). Other stores (a tracking server) take them through the API."""
    store = _sql_store(client)
    if store is None:
        for run in runs:
            raise_deferred()  # an interrupt that landed inside the store: here at the latest
            child_id = client.create_run(
                exp_id, run_name=run.name, start_time=start, tags=run.tags
            ).info.run_id
            _log_batch(client, child_id, metrics=run.metrics, params=run.params)
            client.set_terminated(child_id, end_time=end)
        return
    raise_deferred()
    _insert_system_runs(store, exp_id, runs, start, end)


def _sql_store(client: Any) -> Any | None:
    """The client's SQLAlchemy store, or None for any other kind (a server, a plugin)."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    except ImportError:
        return None
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    return store if type(store) is SqlAlchemyStore else None


def _batch_entities(
    metrics: Mapping[str, float], params: Mapping[str, str], now: int
) -> tuple[list[Any], list[Any]]:
    """The finite metrics (logged at ``now``, step 0) and the params (cut to MLflow's limit) as
    MLflow entities, under :func:`_key` names."""
    from mlflow.entities import Metric, Param

    ms = [Metric(_key(k), float(v), now, 0) for k, v in metrics.items() if _finite(v)]
    ps = [Param(_key(k), str(v)[:PARAM_MAX]) for k, v in params.items()]
    return ms, ps


def _entities(run: SystemRun, now: int) -> tuple[list[Any], list[Any], list[Any]]:
    """A child's metrics and params as :func:`_log_batch` sends them and its tags as
    ``create_run`` takes them, checked by MLflow's own validation of a batch (names, values,
    lengths)."""
    from mlflow.entities import RunTag
    from mlflow.utils.validation import _validate_batch_log_data

    ms, ps = _batch_entities(run.metrics, run.params, now)
    ts = [RunTag(k, v) for k, v in run.tags.items()]
    # a metric's check depends on its name only (the values are finite floats, the timestamps
    # and steps integers, made here): names that passed are not checked again in this process
    # (5,000 a ParaBank-Eval job, the same every job of a sweep)
    fresh = [m for m in ms if m.key not in _CHECKED_METRIC_NAMES]
    try:
        _, ps, ts = _validate_batch_log_data(fresh, ps, ts)
    except Exception:
        _validate_batch_log_data(ms, ps, ts)  # MLflow's own error, as it numbers the metrics
        raise
    _CHECKED_METRIC_NAMES.update(m.key for m in fresh)
    return ms, ps, ts


# metric names MLflow's validation passed in this process
_CHECKED_METRIC_NAMES: set[str] = set()


def _insert_system_runs(
    store: Any, exp_id: str, runs: list[SystemRun], start: int | None, end: int | None
) -> None:
    from mlflow.entities import LifecycleStage, RunStatus, SourceType
    from mlflow.store.tracking.dbmodels.models import (
        SqlLatestMetric,
        SqlMetric,
        SqlParam,
        SqlRun,
        SqlTag,
    )
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME, MLFLOW_USER
    from mlflow.utils.uri import append_to_uri_path

    experiment = store.get_experiment(exp_id)
    store._check_experiment_is_active(experiment)
    now = int(time.time() * 1000)
    source_type = SourceType.to_string(SourceType.UNKNOWN)
    finished = RunStatus.to_string(RunStatus.FINISHED)
    run_rows: list[tuple[Any, ...]] = []
    tag_rows: list[tuple[Any, ...]] = []
    param_rows: list[tuple[Any, ...]] = []
    metric_rows: list[tuple[Any, ...]] = []
    for run in runs:
        run_id = uuid.uuid4().hex
        metrics, params, tags = _entities(run, now)
        run_rows.append(
            (
                run_id,
                run.name,
                source_type,
                "",  # source_name
                "",  # entry_point_name
                run.tags.get(MLFLOW_USER, "unknown"),
                finished,
                start or now,
                end or now,
                None,  # deleted_time
                "",  # source_version
                LifecycleStage.ACTIVE,
                append_to_uri_path(
                    experiment.artifact_location, run_id, store.ARTIFACTS_FOLDER_NAME
                ),
                int(exp_id),
            )
        )
        names = {t.key: t.value for t in tags}
        names.setdefault(MLFLOW_RUN_NAME, run.name)
        tag_rows += [(run_id, k, v) for k, v in names.items()]
        param_rows += [(run_id, p.key, p.value) for p in params]
        for m in metrics:
            is_nan, value = store.sanitize_metric_value(m.value)
            metric_rows.append((run_id, m.key, value, m.timestamp, m.step, is_nan))
    try:
        session_scope = store.ManagedSessionMaker(read_only=False)
    except TypeError:  # MLflow before read replicas: every session may write
        session_scope = store.ManagedSessionMaker()
    with session_scope as session:
        for model, columns, rows in (
            (SqlRun, _RUN_COLUMNS, run_rows),
            (SqlTag, _KEY_VALUE_COLUMNS, tag_rows),
            (SqlParam, _KEY_VALUE_COLUMNS, param_rows),
            (SqlMetric, _METRIC_COLUMNS, metric_rows),
            (SqlLatestMetric, _METRIC_COLUMNS, metric_rows),
        ):
            if rows:
                _insert_rows(session, model.__table__, columns, rows)


# the columns of the child runs' rows, as they are built: every column of each table, so that
# no default is left to the insert to fill in
_RUN_COLUMNS = (
    "run_uuid",
    "name",
    "source_type",
    "source_name",
    "entry_point_name",
    "user_id",
    "status",
    "start_time",
    "end_time",
    "deleted_time",
    "source_version",
    "lifecycle_stage",
    "artifact_uri",
    "experiment_id",
)
_KEY_VALUE_COLUMNS = ("run_uuid", "key", "value")
_METRIC_COLUMNS = ("run_uuid", "key", "value", "timestamp", "step", "is_nan")


def _insert_rows(
    session: Any, table: Any, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
) -> None:
    """``rows`` (values of ``columns``, every column of ``table``) inserted in one
    ``executemany``. On SQLite by the driver itself: the values are text, integers, floats,
    booleans and None, which it stores as SQLAlchemy's types for these columns do (a boolean as
    0 or 1); SQLAlchemy's Core insert compiles and binds each row in Python, half the time of a
    ParaBank-Eval job's 5,000 metrics. Elsewhere the table's Core insert, without the ORM's
    per-row bookkeeping of a bulk insert."""
    from sqlalchemy import insert

    if set(columns) != {c.name for c in table.columns}:
        raise ValueError(f"{table.name}: the rows give {columns}, the table has other columns")
    connection = session.connection()
    if connection.dialect.name == "sqlite":
        names = ", ".join(f'"{c}"' for c in columns)
        places = ", ".join("?" * len(columns))
        connection.exec_driver_sql(f'INSERT INTO "{table.name}" ({names}) VALUES ({places})', rows)
        return
    session.execute(insert(table), [dict(zip(columns, row, strict=True)) for row in rows])


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
    from mlflow.data.pandas_dataset import from_pandas
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.tracking import MlflowClient

    out_dir = Path(out_dir)
    tracking = dict(record.tracking if tracking is None else tracking)
    uri, artifact_location = resolve_tracking_uri(tracking)
    check_reachable(uri)
    content_hash = output_digest(out_dir, record.run_uid) if before_artifacts is None else ""
    frame, digest = _dataset(out_dir / "segment_scores.parquet")
    systems = pd.read_csv(out_dir / "system_scores.csv")
    corr_path = out_dir / "correlations.csv"
    correlations = pd.read_csv(corr_path) if corr_path.stat().st_size > 1 else pd.DataFrame()

    comparison_path = out_dir / "system_comparison.csv"
    comparison = (
        pd.read_csv(comparison_path, keep_default_na=False, na_values=[""])
        if comparison_path.is_file() and comparison_path.stat().st_size > 1
        else pd.DataFrame()
    )
    metrics = headline_metrics(correlations)
    metrics.update({k: float(v) for k, v in record.metrics.items()})
    per_system = system_metrics(systems, comparison)
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
        leftovers = close_leftovers(client, exp_id, record.run_uid)
        start, end = record.started_ms or None, record.ended_ms or None
        # the directory's run id is tagged first: a logging that is interrupted can be found
        # and closed by the next one (paraeval-log) instead of being duplicated
        if leftovers:
            tags[REPLACES_TAG] = ",".join(leftovers)
        try:
            parent_id = client.create_run(
                exp_id,
                run_name=record.run_name,
                start_time=start,
                tags={RUN_UID_TAG: record.run_uid, "paraeval.output_dir": str(out_dir.resolve())},
            ).info.run_id
            # the params one request takes; the rest go with the last request's tags
            params = list(record.params.items())
            first = dict(params[:PARAMS_PER_REQUEST])
            _log_batch(client, parent_id, metrics=metrics, params=first)
            # MLflow infers the schema value by value: once per input and process, not once per
            # sweep job
            entity = _DATASETS.get_or_compute(
                (digest, record.data_name),
                lambda: from_pandas(
                    frame,
                    name=record.data_name,
                    digest=digest,
                    source=record.data_source or None,
                )._to_mlflow_entity(),
            )
            client.log_inputs(
                parent_id,
                [DatasetInput(entity, tags=[InputTag("mlflow.data.context", "evaluation")])],
            )
            shared = {k: v for k, v in tags.items() if k.startswith(("paraeval.sweep", "version."))}
            children = [
                SystemRun(
                    # nested under the invocation in the UI: the system's name says it all
                    name=show(system),
                    tags={
                        "mlflow.parentRunId": parent_id,
                        "paraeval.system": system,
                        "paraeval.role": "system",
                        **shared,
                    },
                    metrics=values,
                    params={"system": system},
                )
                for system, values in per_system.items()
            ]
            log_system_runs(client, exp_id, children, start, end)
            # the tables for MLflow's UI come from the frames read above: sent while the
            # figures are still being drawn
            tables = {CORRELATION_TABLE: correlations, COMPARISON_TABLE: comparison}
            tags.update(_log_tables(client, parent_id, tables))
            raise_deferred()
            if before_artifacts is not None:
                before_artifacts()
                tags[CONTENT_HASH_TAG] = output_digest(out_dir, record.run_uid)
            raise_deferred()
            client.log_artifacts(parent_id, str(out_dir))
            # the content tag goes last: a run interrupted before here is not taken as logged
            raise_deferred()
            _log_batch(client, parent_id, params=dict(params[PARAMS_PER_REQUEST:]), tags=tags)
            client.set_terminated(parent_id, end_time=end)
        except BaseException as exc:
            # never left RUNNING: KILLED for an interrupt (Ctrl-C, SIGTERM), FAILED otherwise
            status = "FAILED" if isinstance(exc, Exception) else "KILLED"
            with suppress(Exception):
                end_unfinished(client, exp_id, record.run_uid, status)
            raise
    return Logged(parent_id, uri, False)


def warm_store(tracking: Mapping[str, Any]) -> None:
    """What a process's first logging to a SQLite store does before it logs: the store created
    (or migrated) and opened, the experiment looked up (created if new). A server is left
    alone."""
    from mlflow.tracking import MlflowClient

    uri, artifact_location = resolve_tracking_uri(dict(tracking))
    if not uri.startswith("sqlite:"):
        return
    with store_lock(uri):
        mlflow_client = MlflowClient(uri)
        _experiment_id(
            mlflow_client, str(tracking.get("experiment") or "paraeval"), artifact_location
        )


def end_unfinished(client: Any, exp_id: str, run_uid: str, status: str) -> None:
    """Ends every run of this logging that is still RUNNING, the invocation's and its systems',
    found in the store by the directory's ``run_uid``: an interrupt can come after the store
    created a run and before its id came back to the caller."""
    parents = client.search_runs([exp_id], filter_string=f"tags.`{RUN_UID_TAG}` = '{run_uid}'")
    for parent in parents:
        children = client.search_runs(
            [exp_id],
            filter_string=f"tags.`mlflow.parentRunId` = '{parent.info.run_id}' and "
            "attributes.status = 'RUNNING'",
        )
        for run in [*children, parent]:
            if run.info.status == "RUNNING":
                client.set_terminated(run.info.run_id, status=status)


RUN_UID_TAG = "paraeval.run_uid"
REPLACES_TAG = "paraeval.replaces"


def close_leftovers(client: Any, exp_id: str, run_uid: str) -> list[str]:
    """Runs of the same output directory (same ``run_uid``) that an interrupted logging left
    unfinished: ended as KILLED if still RUNNING, then deleted (MLflow keeps deleted runs
    restorable), children included, so that the directory has one run. Returns their ids."""
    runs = client.search_runs(
        [exp_id],
        filter_string=f"tags.`{RUN_UID_TAG}` = '{run_uid}' and attributes.status != 'FINISHED'",
    )
    closed = []
    for run in runs:
        run_id = str(run.info.run_id)
        children = client.search_runs(
            [exp_id], filter_string=f"tags.`mlflow.parentRunId` = '{run_id}'"
        )
        for victim in [*children, run]:
            if victim.info.status == "RUNNING":
                client.set_terminated(victim.info.run_id, status="KILLED")
            client.delete_run(victim.info.run_id)
        log.info("closed the unfinished MLflow run %s of this output directory", run_id)
        closed.append(run_id)
    return closed
