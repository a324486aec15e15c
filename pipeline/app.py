"""The whole run as a plain function of a resolved config: load -> score -> aggregate -> correlate
-> track. ``pipeline.__main__`` is a thin Hydra wrapper around :func:`run`; tests call it directly.
"""

from __future__ import annotations

import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig, OmegaConf
from paraeval.pipeline import report
from paraeval.pipeline.aggregate import Aggregated, Normalizer, aggregate
from paraeval.pipeline.cache import ScoreCache, correlate_cached
from paraeval.pipeline.compare import Comparison, run_compare
from paraeval.pipeline.correlate import check_correlation_config, correlate, significance
from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.figures import Figures
from paraeval.pipeline.humans import human_report
from paraeval.pipeline.load import HUMAN_PREFIX, memoized_load
from paraeval.pipeline.plots import scatter_columns, write_plots
from paraeval.pipeline.score import Scores, build_metrics, score
from paraeval.pipeline.sweep import run_alpha_curve
from paraeval.pipeline.track import (
    RunRecord,
    check_writable,
    flatten,
    hydra_tags,
    library_versions,
    resolved_tracking,
    sweep_run_name,
    track_run,
    write_csv,
    write_parquet,
    write_run_info,
)

log = logging.getLogger("paraeval")


@dataclass
class RunResult:
    out_dir: Path
    segments: pd.DataFrame
    systems: pd.DataFrame
    correlations: pd.DataFrame
    signatures: dict[str, str]
    run_id: str | None
    tracking_uri: str | None
    comparison: Comparison | None = None


def _instantiate_data(node: Any) -> pd.DataFrame:
    from hydra.utils import get_method

    settings = (
        OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    )
    assert isinstance(settings, dict)
    target = settings.pop("_target_", None)
    if not target or not str(target).startswith("paraeval.pipeline.load."):
        raise ConfigError(
            "data._target_ must be one of paraeval.pipeline.load.load_demo/load_table/load_text"
        )
    missing = [k for k, v in settings.items() if v == "???"]
    if missing:
        raise ConfigError(f"data.{missing[0]} is required, e.g. data.{missing[0]}=<path>")
    fn = get_method(str(target))
    try:
        return memoized_load(fn, settings)
    except TypeError as exc:
        raise ConfigError(f"data: {exc}") from None


def _git_commit() -> str:
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


def _missing_config(cfg: DictConfig) -> None:
    for key in OmegaConf.missing_keys(cfg):
        raise ConfigError(f"{key} is required, e.g. {key}=<value>")


def run(cfg: DictConfig, out_dir: str | Path, overrides: list[str] | None = None) -> RunResult:
    """Run every stage; outputs go to ``out_dir`` before anything is sent to MLflow."""
    out = Path(out_dir)
    check_writable(out)
    _missing_config(cfg)
    try:
        rng = np.random.default_rng(int(cfg.get("seed", 0)))
    except (TypeError, ValueError):
        raise ConfigError(f"seed must be an integer, got '{cfg.get('seed')}'") from None
    corr_cfg = OmegaConf.to_container(cfg.correlation, resolve=True)
    assert isinstance(corr_cfg, dict)
    check_correlation_config(corr_cfg)  # type: ignore[arg-type]

    df = _instantiate_data(cfg.data)
    log.info(
        "loaded %d rows: %d items x %d systems",
        len(df),
        df["item_id"].nunique(),
        df["system"].nunique(),
    )
    metrics_cfg = OmegaConf.to_container(cfg.metrics, resolve=True) if cfg.get("metrics") else None
    assert metrics_cfg is None or isinstance(metrics_cfg, dict)
    metrics = build_metrics(metrics_cfg, bool(cfg.get("allow_external_metrics", False)))  # type: ignore[arg-type]

    cache_node = OmegaConf.to_container(cfg.cache, resolve=True) if cfg.get("cache") else None
    cache = ScoreCache.from_config(cache_node)  # type: ignore[arg-type]
    progress = bool(cfg.get("report", {}).get("progress", True))
    scores: Scores = score(df, metrics, progress=progress, cache=cache)
    extra_metrics: dict[str, float] = {}
    if cache is not None:
        cache.log_summary()
        extra_metrics.update(cache.metrics())
    normalizer = Normalizer(
        **{
            k: v
            for k, v in OmegaConf.to_container(cfg.normalize).items()  # type: ignore[union-attr]
            if k != "_target_"
        }
    )
    agg: Aggregated = aggregate(scores, normalizer)
    humans = human_report(agg.segments)
    if cache is not None:
        # rows of columns whose scores did not change (all but iBLEU in an alpha sweep) come
        # from the cache; the result and the generator state are those of a full computation
        corr = correlate_cached(agg, corr_cfg, rng, scores, cache)  # type: ignore[arg-type]
        extra_metrics.update(cache.metrics())
    else:
        corr = correlate(agg, corr_cfg, rng, scores)  # type: ignore[arg-type]
    sig = significance(agg, corr_cfg, rng)  # type: ignore[arg-type]
    # figures are drawn in a helper process while the comparison and MLflow logging go on
    figures = Figures(background=bool(cfg.get("report", {}).get("plot_process", True)))
    aspects = [c for c in agg.segments.columns if c.startswith(HUMAN_PREFIX)]
    shown = scatter_columns(agg.segments, list(agg.columns))
    figures.submit(
        write_plots,
        out,
        agg.segments[["system", *shown, *aspects]],
        agg.systems.copy(),
        corr,
        shown,
        aspects,
    )
    compare_cfg = OmegaConf.to_container(cfg.compare, resolve=True) if cfg.get("compare") else None
    comparison = (
        run_compare(scores, agg, compare_cfg, out, figures)  # type: ignore[arg-type]
        if isinstance(compare_cfg, dict) and compare_cfg.get("enabled", True)
        else None
    )

    signatures = {c: info.signature for c, info in agg.columns.items()}
    seg_out = agg.segments.drop(columns=["origin"], errors="ignore")
    write_parquet(seg_out, out / "segment_scores.parquet")
    write_csv(agg.systems.reset_index(), out / "system_scores.csv")
    write_csv(corr, out / "correlations.csv")
    if not sig.empty:
        write_csv(sig, out / "significance.csv")
    if not humans.empty:
        write_csv(humans, out / "human_report.csv")
    write_csv(agg.normalization, out / "normalization.csv")
    sig_df = pd.DataFrame(
        [
            {
                "column": c,
                "metric": i.metric,
                "group": i.group,
                "higher_is_better": i.higher_is_better,
                "signature": i.signature,
            }
            for c, i in agg.columns.items()
        ]
    )
    write_csv(sig_df, out / "signatures.csv")
    curve_node = (
        OmegaConf.to_container(cfg.alpha_curve, resolve=True) if cfg.get("alpha_curve") else None
    )
    extra_metrics.update(
        run_alpha_curve(
            curve_node,  # type: ignore[arg-type]
            agg.segments,
            scores.stats,
            scores.metrics,
            aspects,
            out,
            figures,
        )
    )

    run_id = None
    uri = None
    tracking = OmegaConf.to_container(cfg.tracking, resolve=True)
    assert isinstance(tracking, dict)
    params = flatten(OmegaConf.to_container(cfg, resolve=True))  # type: ignore[arg-type]
    params["metrics.selected"] = ",".join(metrics)
    tags = {
        "paraeval.data": str(cfg.data.get("name", "data")),
        "paraeval.git_commit": _git_commit(),
        "paraeval.output_dir": str(out.resolve()),
        "paraeval.overrides": " ".join(overrides or []),
    }
    tags.update({f"signature.{k}": v for k, v in signatures.items()})
    tags.update(library_versions())
    tags["paraeval.version"] = tags.get("version.paraeval", "unknown")
    tags.update(hydra_tags())
    name = tracking.get("run_name") or sweep_run_name(_run_name(cfg, overrides or []), tags)
    record = RunRecord(
        tracking=resolved_tracking(tracking),
        params=params,
        tags=tags,
        run_name=str(name),
        metrics=extra_metrics,
        data_name=str(cfg.data.get("name", "data")),
    )
    # run_info.json is written either way, so `paraeval-log` can log this directory later
    try:
        if tracking.get("enabled", True):
            # the figures are awaited inside, after the per-system runs and before the output
            # directory is hashed and uploaded
            logged = track_run(out, record, before_artifacts=figures.wait)
            if logged is not None:
                run_id, uri = logged.run_id, logged.uri
        else:
            write_run_info(out, record)
    finally:
        figures.wait()
    result = RunResult(out, agg.segments, agg.systems, corr, signatures, run_id, uri, comparison)
    if cfg.get("report", {}).get("print_tables", True):
        report.print_summary(result, int(cfg.report.get("max_rows", 40)))
    return result


def _run_name(cfg: DictConfig, overrides: list[str]) -> str:
    data = str(cfg.data.get("name", "data"))
    interesting = [o for o in overrides if not o.startswith(("hydra.", "tracking."))]
    return data + (" " + " ".join(interesting) if interesting else "")
