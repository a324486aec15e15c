"""Command line entry: ``paraeval [overrides]`` and ``python -m paraeval [overrides]``.

A thin ``@hydra.main`` over :func:`pipeline.app.run`. User mistakes (bad input, bad config, a
missing resource) end with one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

EXIT_USER_ERROR = 2
GROUPS = ("data", "metrics", "normalize", "correlation", "tracking", "experiment", "compare")


def config_dir() -> Path:
    """conf/ at the top of a source checkout, or paraeval/conf inside an installed wheel."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "conf", here.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise SystemExit("paraeval: error: configuration folder not found (broken installation)")


def _fail(message: str) -> None:
    print(f"paraeval: error: {message}", file=sys.stderr)
    sys.exit(EXIT_USER_ERROR)


def check_group_overrides(argv: list[str], conf: Path) -> None:
    """Unknown group options (``metrics=[bleu,nosuch]``) as one line before Hydra composes."""
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, _, value = arg.partition("=")
        key = key.lstrip("+~")
        if key not in GROUPS or value in ("", "null"):
            continue
        options = {p.stem for p in (conf / key).glob("*.yaml")}
        chosen = [v.strip() for v in value.strip("[]").split(",") if v.strip()]
        for choice in chosen:
            if choice not in options and "/" not in choice and "$" not in choice:
                _fail(f"unknown {key} option '{choice}' in '{arg}'; choose from {sorted(options)}")


def check_output_dir_overrides(argv: list[str]) -> None:
    """An output folder that cannot be created as one line: Hydra makes ``hydra.run.dir`` (or
    ``hydra.sweep.dir``) before any of paraeval's code runs and would answer with a traceback."""
    multirun = any(a in ("-m", "--multirun") for a in argv)
    wanted = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    given = False
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key.lstrip("+") not in ("hydra.run.dir", "hydra.sweep.dir"):
            continue
        given = given or key.lstrip("+") == wanted
        if not value or "${" in value:
            continue  # interpolated: resolved by Hydra, checked by the run itself
        _probe(Path(value).expanduser(), value, key.lstrip("+"))
    if not given:
        # the default folders (outputs/..., multirun/...) are relative to the current directory
        default = "multirun" if multirun else "outputs"
        _probe(Path.cwd() / default, str(Path.cwd() / default), wanted)


def _probe(folder: Path, shown: str, key: str) -> None:
    from paraeval.pipeline.errors import ConfigError
    from paraeval.pipeline.files import check_writable

    try:
        check_writable(folder, key, shown)
    except ConfigError as exc:
        _fail(str(exc))


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    from paraeval.metrics.base import MetricConfigError, MissingResourceError
    from paraeval.pipeline.app import run
    from paraeval.pipeline.errors import UserError

    hc = HydraConfig.get()
    # Everything alive between jobs (modules, models, caches of this process) is long-lived:
    # frozen, the collector stops rescanning it, which cost a multirun ~0.5 s per job
    gc.freeze()
    try:
        run(cfg, hc.runtime.output_dir, list(hc.overrides.task))
    except (UserError, MetricConfigError, MissingResourceError) as exc:
        logging.getLogger("paraeval").error("%s", exc)
        _fail(str(exc))
    gc.freeze()
    return None


def compose_each_sweep_job_once() -> None:
    """Hydra's basic sweeper composes the config of every job of a batch to validate it, and its
    launcher then composes each again to run it (the same function of the same master config and
    overrides): about a quarter of a second each, the largest fixed cost of a cache-served job
    of an α sweep. The config composed for validation is kept and handed to the launcher once
    (it sets the job number on it, so it is never handed out twice)."""
    try:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
    except ImportError:  # another Hydra layout: both composes happen, as Hydra does them
        return
    original = ConfigLoaderImpl.load_sweep_config
    if getattr(original, "_paraeval_composed_once", False):
        return
    composed: dict[tuple[int, int, tuple[str, ...]], DictConfig] = {}

    def load_sweep_config(
        self: ConfigLoaderImpl, master_config: DictConfig, sweep_overrides: list[str]
    ) -> DictConfig:
        key = (id(self), id(master_config), tuple(sweep_overrides))
        kept = composed.pop(key, None)
        if kept is not None:
            return kept
        cfg = original(self, master_config, sweep_overrides)
        if len(composed) < 10_000:  # launchers in other processes never take them back
            composed[key] = cfg  # the validating sweeper only reads it
        return cfg

    load_sweep_config._paraeval_composed_once = True  # type: ignore[attr-defined]
    ConfigLoaderImpl.load_sweep_config = load_sweep_config  # type: ignore[method-assign]


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] in (["--version"], ["-V"]):
        from paraeval import __version__

        print(f"paraeval {__version__}")
        return
    if not any(a in ("--help", "-h", "--hydra-help", "--info", "--cfg", "-c") for a in argv):
        check_group_overrides(argv, config_dir())
        check_output_dir_overrides(argv)
    if any(a in ("-m", "--multirun") for a in argv):
        compose_each_sweep_job_once()
    _hydra_main()


if __name__ == "__main__":
    main()
