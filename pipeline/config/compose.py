"""Where ``conf/`` lives and how the Python API composes it, as the command line does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from paraeval.pipeline.config.targets import metric_class, metric_ids

if TYPE_CHECKING:
    import pandas as pd

# config keys that are not parameters of the evaluation: the tracker says nothing of the results
NOT_PARAMS = frozenset({"tracking._target_"})


def config_dir() -> Path:
    """conf/ of a source checkout or an installed wheel: two folders above this module's."""
    conf = Path(__file__).resolve().parents[2] / "conf"
    if (conf / "config.yaml").is_file():
        return conf
    raise SystemExit("paraeval: error: configuration folder not found (broken installation)")


def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """The config the CLI would run with these Hydra overrides (``metrics=[bleu,chrf]``, ...)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():  # e.g. called from inside a Hydra app
        GlobalHydra.instance().clear()
    with initialize_config_dir(str(config_dir()), version_base="1.3", job_name="paraeval"):
        return compose("config", overrides=list(overrides))


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A config tree as ``dotted.key -> value`` strings: the run's MLflow params."""
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


def list_metrics() -> pd.DataFrame:
    """Per ``conf/metrics/`` entry: ``id`` (for ``metrics=[...]``), ``group``, ``direction``,
    ``needs`` (references, sources, a model, WordNet, ...), ``default`` (whether a run without
    ``metrics=`` computes it) and default ``settings``."""
    import pandas as pd

    ids = metric_ids()
    # composed as a run would compose them: interpolations (the cache folder) resolved
    cfg = compose_config([f"metrics=[{','.join(ids)}]"])
    default = set(compose_config().metrics)
    rows = []
    for metric_id in ids:
        settings: dict[str, Any] = OmegaConf.to_container(cfg.metrics[metric_id], resolve=True)  # type: ignore[assignment]
        cls = metric_class(str(settings.pop("_target_")), metric_id, allow_external=False)
        info = cls.describe(settings)
        refs, srcs = ["references"] * info.needs_references, ["sources"] * info.needs_sources
        rows.append(
            {
                "id": metric_id,
                "group": info.group,
                "direction": "higher" if info.higher_is_better else "lower",
                "needs": ", ".join([*refs, *srcs, *info.resources]),
                "default": metric_id in default,
                "settings": settings,
            }
        )
    return pd.DataFrame(rows)
