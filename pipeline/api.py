"""``paraeval.evaluate``: the whole pipeline from Python, on the same config as the CLI.

The configuration is composed by Hydra from the package's ``conf/`` exactly as ``paraeval`` does
on the command line, then the given settings are applied, so a notebook and a batch job compute
the same numbers with the same signatures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig, OmegaConf, open_dict

from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.stages.evaluation import Evaluation, compute
from paraeval.pipeline.data.load import load_frame, take_load_token
from paraeval.pipeline.config.settings import Settings, check_table

# config groups: a string value for one of these names picks a file of that group
GROUPS = ("data", "normalize", "correlation", "compare", "tracking", "experiment")


def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """The config the CLI would run with these Hydra overrides (``metrics=[bleu,chrf]``,
    ``correlation.n_resamples=200``, ...)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from paraeval.pipeline.cli.main import config_dir

    if GlobalHydra.instance().is_initialized():  # e.g. called from inside a Hydra app
        GlobalHydra.instance().clear()
    with initialize_config_dir(str(config_dir()), version_base="1.3", job_name="paraeval"):
        return compose("config", overrides=list(overrides))


def evaluate(
    data: pd.DataFrame | str | Path,
    metrics: Sequence[str] | None = None,
    *,
    overrides: Sequence[str] = (),
    **settings: object,
) -> Evaluation:
    """Score, aggregate, correlate and compare, and return the :class:`Evaluation`.

    ``data``: a DataFrame in the tidy layout (``item_id``, ``system``, ``source``,
    ``references`` (a list per row), ``candidate``, ``human_<aspect>``...) or the path of a
    long table (CSV, TSV, JSONL, Parquet). ``metrics``: ids of ``conf/metrics/`` (default: the
    CLI's default set). ``settings``: any top-level config key with a value or a nested mapping
    (``seed=7``, ``correlation={"n_resamples": 200}``), or a group option by name
    (``normalize="zscore"``, ``correlation="full"``). ``overrides``: Hydra override strings, as on
    the command line (``["metrics.ibleu.alpha=0.7"]``). Nothing is written or logged until
    :meth:`Evaluation.write` or :meth:`Evaluation.log` is called.
    """
    chosen = [f"{k}={v}" for k, v in settings.items() if k in GROUPS and isinstance(v, str)]
    if metrics is not None:
        chosen.append(f"metrics=[{','.join(metrics)}]")
    # a DataFrame is a long table already read: the table layout's options (data.columns,
    # data.human, data.annotator, data.aggregate) apply to it as to a file
    chosen.append("data=table")
    cfg = compose_config([*chosen, *overrides])
    values = {k: v for k, v in settings.items() if not (k in GROUPS and isinstance(v, str))}
    with open_dict(cfg):
        for key, value in values.items():
            if key not in cfg:
                raise ConfigError(f"unknown setting '{key}'; valid: {sorted(map(str, cfg))}")
            OmegaConf.update(cfg, key, _plain(value), merge=True)
        if isinstance(data, str | Path):
            # set after composing: a path may hold characters Hydra's override grammar reserves
            cfg.data.path = str(Path(data).resolve())
        if isinstance(data, pd.DataFrame):
            # a DataFrame needs no loader; the data node only names it in signatures and MLflow
            options = {k: cfg.data[k] for k in ("columns", "human", "annotator", "aggregate")}
            cfg.data = {
                "_target_": "paraeval.pipeline.data.load.load_frame",
                "name": "dataframe",
                **options,
            }
    resolved = Settings.from_config(cfg)
    if isinstance(data, pd.DataFrame):
        options = {k: v for k, v in resolved.data.options.items() if k != "name"}
        table = load_frame(data, name=resolved.data.name, **options)  # type: ignore[arg-type]
        token = None
    else:
        table = resolved.data.load()
        token = take_load_token(table)
    check_table(resolved, table)
    return compute(table, resolved, table_token=token)


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return list(value)
    return value
