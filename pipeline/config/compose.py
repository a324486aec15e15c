"""Where the configuration lives and how the Python API composes it, so that the API and the
command line (``@hydra.main``) run on the same ``conf/``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

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
