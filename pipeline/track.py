"""Track stage: write the output files first (atomically), then log everything to MLflow.

MLflow layout: one parent run per invocation (params = the flattened resolved config, correlations
as metrics, signatures as tags, the output files as artifacts) and one child run per system with its
corpus-level scores. The default store is SQLite at an absolute path.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.errors import ConfigError

log = logging.getLogger(__name__)

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")


# --------------------------------------------------------------------------- files
def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary file in the same folder, then rename: a crash never leaves a
    truncated file that looks valid."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def write_csv(df: pd.DataFrame, path: Path, index: bool = False) -> None:
    atomic_write(path, lambda p: df.to_csv(p, index=index))


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda p: df.to_parquet(p, index=False))


def check_writable(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        probe = out_dir / ".paraeval-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"output directory '{out_dir}' is not writable ({exc.strerror}); set hydra.run.dir "
            "to a writable folder"
        ) from None


# --------------------------------------------------------------------------- MLflow
def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = "null" if value is None else str(value)
    return out


def resolve_tracking_uri(tracking: Mapping[str, Any]) -> tuple[str, str | None]:
    """(tracking URI, artifact location for a new experiment or None)."""
    uri = tracking.get("uri")
    if uri:
        return str(uri), None
    store = Path(str(tracking.get("store_dir") or "mlflow")).expanduser().resolve()
    store.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{store / 'mlflow.db'}", (store / "artifacts").as_uri()


def _metric_name(*parts: str) -> str:
    # MLflow allows alphanumerics, _ - . / and space in metric names
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./ ")
    return ".".join("".join(ch if ch in allowed else "_" for ch in p) for p in parts)


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def log_to_mlflow(
    *,
    tracking: Mapping[str, Any],
    params: Mapping[str, str],
    out_dir: Path,
    systems: pd.DataFrame,
    correlations: pd.DataFrame,
    signatures: Mapping[str, str],
    tags: Mapping[str, str],
    run_name: str,
) -> str:
    """Log one parent run and one child run per system; return the parent run id."""
    import mlflow
    from mlflow.tracking import MlflowClient

    uri, artifact_location = resolve_tracking_uri(tracking)
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(uri)
    name = str(tracking.get("experiment") or "paraeval")
    exp = client.get_experiment_by_name(name)
    exp_id = (
        exp.experiment_id
        if exp is not None
        else client.create_experiment(name, artifact_location=artifact_location)
    )
    with mlflow.start_run(experiment_id=exp_id, run_name=run_name) as parent:
        items = list(params.items())
        for start in range(0, len(items), 100):
            mlflow.log_params(dict(items[start : start + 100]))
        all_tags = {f"signature.{k}": v for k, v in signatures.items()}
        all_tags.update(tags)
        mlflow.set_tags(all_tags)
        corr_metrics = {}
        for row in correlations.itertuples(index=False):
            if _finite(row.value):
                corr_metrics[
                    _metric_name("corr", row.level, row.coefficient, row.metric, row.aspect)
                ] = float(row.value)
        if corr_metrics:
            mlflow.log_metrics(corr_metrics)
        mlflow.log_artifacts(str(out_dir))
        for system, values in systems.iterrows():
            with mlflow.start_run(
                experiment_id=exp_id, run_name=f"{run_name}/{system}", nested=True
            ):
                mlflow.set_tags({"paraeval.system": str(system), "paraeval.role": "system"})
                mlflow.log_param("system", str(system))
                mlflow.log_metrics(
                    {_metric_name(str(k)): float(v) for k, v in values.items() if _finite(v)}
                )
        return str(parent.info.run_id)
