"""The pipeline from Python on the CLI's config: a notebook and a batch job compute the same."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf, open_dict

from paraeval.pipeline.config.compose import compose_config, config_dir
from paraeval.pipeline.config.settings import Settings, check_table
from paraeval.pipeline.data.load import load_data, load_frame
from paraeval.pipeline.errors import ConfigError, suggest
from paraeval.pipeline.report import summary
from paraeval.pipeline.report.figures import write_outputs
from paraeval.pipeline.stages import evaluation as stages
from paraeval.pipeline.stages.memory_bounds import check_memory
from paraeval.pipeline.tracking.trackers import tracker_from_settings

# config groups: a string value for one of these names picks a file of that group
GROUPS = ("data", "normalize", "correlation", "compare", "tracking", "engine", "experiment")


class Evaluation(stages.Evaluation):
    """An evaluation's tables, which :meth:`write` writes and :meth:`log` sends to MLflow."""

    out_dir: Path | None = None

    @classmethod
    def of(cls, ev: stages.Evaluation) -> Evaluation:
        return cls(**{f.name: getattr(ev, f.name) for f in fields(ev)})

    def write(self, out_dir: str | Path) -> Path:
        self.out_dir = write_outputs(self, out_dir)
        return self.out_dir

    def __repr__(self) -> str:
        # a notebook cell's echo: what was evaluated and where it went, not every setting
        return summary.short_repr(self, self.out_dir)

    def _repr_html_(self) -> str:
        return summary.html_summary(self, self.out_dir)

    def log(
        self,
        out_dir: str | Path,
        tracking: Mapping[str, object] | None = None,
        overrides: Sequence[str] = (),
    ) -> str | None:
        """:meth:`write`, then logged (``tracking``: settings to change); the run id, or None."""
        tracker = tracker_from_settings(self.settings.tracking.changed(tracking or {}))
        logged = tracker.log_evaluation(self, self.write(out_dir), overrides)
        return None if logged is None else logged.run_id


def evaluate(
    data: pd.DataFrame | str | Path,
    metrics: Sequence[str] | None = None,
    *,
    overrides: Sequence[str] = (),
    **settings: object,
) -> Evaluation:
    """Score, aggregate, correlate and compare; write or log with the :class:`Evaluation`.

    ``data``: a tidy DataFrame or a long table's path (CSV, TSV, JSONL, Parquet). ``metrics``: ids
    of ``conf/metrics/`` (default: the CLI's). ``settings``: top-level keys (``seed=7``) or group
    options (``normalize="zscore"``). ``overrides``: Hydra override strings."""
    picked = {k: v for k, v in settings.items() if k in GROUPS and isinstance(v, str)}
    chosen = [f"{k}={v}" for k, v in picked.items()]
    if metrics is not None:
        # before Hydra, whose error names a file ('metrics/chfr') and lists its search path
        known = {p.stem for p in (config_dir() / "metrics").glob("*.yaml")}
        for name in metrics:
            if name not in known:
                raise ConfigError(f"unknown metric '{name}'; {suggest(name, known, 'metrics')}")
        chosen.append(f"metrics=[{','.join(metrics)}]")
    # a DataFrame is a long table already read: the table layout's options apply to it too
    chosen.append("data=table")
    cfg = compose_config([*chosen, *overrides])
    with open_dict(cfg):
        for key, value in settings.items():
            if key in picked:
                continue
            if key not in cfg:
                raise ConfigError(f"unknown setting '{key}'; {suggest(key, map(str, cfg), 'keys')}")
            OmegaConf.update(cfg, key, _plain(value), merge=True)
        if isinstance(data, str | Path):
            # set after composing: a path may hold characters Hydra's override grammar reserves
            cfg.data.path = str(Path(data).resolve())
        if isinstance(data, pd.DataFrame):
            # a DataFrame needs no loader; the data node only names it in signatures and MLflow
            keep = ("columns", "human", "annotator", "aggregate", "controls")
            target = "paraeval.pipeline.data.load.load_frame"
            cfg.data = {"_target_": target, "name": "dataframe", **{k: cfg.data[k] for k in keep}}
    resolved = Settings.from_config(cfg)
    if isinstance(data, pd.DataFrame):
        table = load_frame(data, **resolved.data.options)  # type: ignore[arg-type]
    else:
        table = load_data(resolved.data)
    check_table(resolved, table)
    check_memory(resolved, table)
    return Evaluation.of(stages.compute(table, resolved))


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return list(value)
    return value
