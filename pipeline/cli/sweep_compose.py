"""The configs of a Hydra multirun's jobs, composed at a fraction of Hydra's own cost.

Hydra's basic sweeper composes the config of every job of a batch to validate it, and its launcher
then composes each again to run it: about a fifth of a second each (YAML parsing, the defaults
tree, merging), four seconds before the first job of a 21-value sweep starts and the largest
fixed cost of the sweep after its jobs. Two things remove nearly all of it:

- the config composed for validation is kept and handed to the launcher once;
- a job whose overrides differ from an earlier job's only in the values of plain settings
  (``metrics.ibleu.alpha=0.3`` after ``metrics.ibleu.alpha=0.2``: no config group, no ``hydra.``
  key, no ``+``/``~``, a single value) gets a copy of that job's config with those values set the
  way Hydra sets a command-line override, and its ``hydra.overrides.task`` and
  ``hydra.job.override_dirname`` written anew. Group selections decide the defaults tree and
  the files merged; plain values never do, so the copy is what a compose would give (checked
  against Hydra's own composes in ``tests/pipeline/test_sweep_compose.py``). Anything else is
  composed by Hydra.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

# the overrides of a job and the config composed for them, by (loader, master config)
_Template = tuple[tuple[Any, ...], DictConfig]
# plain values a copy may take; a dict or list merges into what is there, unlike a compose
_SCALARS = (str, int, float, bool, type(None))


def compose_each_sweep_job_once() -> None:
    """Installs the two shortcuts on Hydra's ``ConfigLoaderImpl.load_sweep_config`` (once; a
    Hydra without it composes as it always does)."""
    try:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
    except ImportError:
        return
    original = ConfigLoaderImpl.load_sweep_config
    if getattr(original, "_paraeval_composed_once", False):
        return
    composed: dict[tuple[int, int, tuple[str, ...]], DictConfig] = {}
    templates: dict[tuple[int, int], _Template] = {}

    def load_sweep_config(
        self: ConfigLoaderImpl, master_config: DictConfig, sweep_overrides: list[str]
    ) -> DictConfig:
        key = (id(self), id(master_config), tuple(sweep_overrides))
        kept = composed.pop(key, None)
        if kept is not None:
            return kept
        parsed = _parse(sweep_overrides)
        cfg = None
        template = templates.get(key[:2])
        if parsed is not None and template is not None:
            cfg = from_template(template, parsed, self)
            if cfg is not None:
                OmegaConf.copy_cache(from_config=master_config, to_config=cfg)
        if cfg is None:
            cfg = original(self, master_config, sweep_overrides)
            if parsed is not None:
                templates.clear()  # one sweep at a time: the latest job's config
                templates[key[:2]] = (tuple(parsed), copy.deepcopy(cfg))
        if len(composed) < 10_000:  # launchers in other processes never take them back
            composed[key] = cfg  # the validating sweeper only reads it
        return cfg

    load_sweep_config._paraeval_composed_once = True  # type: ignore[attr-defined]
    ConfigLoaderImpl.load_sweep_config = load_sweep_config  # type: ignore[method-assign]


def _parse(overrides: Sequence[str]) -> list[Any] | None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return list(OverridesParser.create().parse_overrides(overrides=list(overrides)))
    except Exception:  # Hydra's own compose reports it
        return None


def from_template(template: _Template, parsed: Sequence[Any], loader: Any) -> DictConfig | None:
    """The config of a job with overrides ``parsed``, from ``template`` (an earlier job's
    overrides and config); None where only a compose can say (see the module docstring)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname

    before, base = template
    if len(before) != len(parsed):
        return None
    changed: list[tuple[int, Any]] = []
    for k, (old, new) in enumerate(zip(before, parsed, strict=True)):
        if old.input_line == new.input_line:
            continue
        if not (_plain(old, base, loader) and _plain(new, base, loader)):
            return None
        if old.key_or_group != new.key_or_group:
            return None
        changed.append((k, new))
    cfg = copy.deepcopy(base)
    ConfigLoaderImpl._apply_overrides_to_config([o for _, o in changed], cfg)
    # as Hydra's compose: the job's non-hydra overrides, in order, are its task overrides
    task = [k for k, o in enumerate(parsed) if not o.is_hydra_override()]
    for k, override in changed:
        cfg.hydra.overrides.task[task.index(k)] = override.input_line
    cfg.hydra.runtime.cwd = os.getcwd()
    for name in cfg.hydra.job.env_copy:
        cfg.hydra.job.env_set[name] = os.environ[name]
    dirname = cfg.hydra.job.config.override_dirname
    cfg.hydra.job.override_dirname = get_overrides_dirname(
        overrides=[parsed[k] for k in task],
        kv_sep=dirname.kv_sep,
        item_sep=dirname.item_sep,
        exclude_keys=dirname.exclude_keys,
    )
    return cfg


def _plain(override: Any, cfg: DictConfig, loader: Any) -> bool:
    """A single value set on a plain setting: no group, no hydra key, no add or delete."""
    from hydra.core.override_parser.types import OverrideType

    key = str(override.key_or_group)
    if override.type != OverrideType.CHANGE or override.package is not None:
        return False
    if override.is_sweep_override() or override.is_hydra_override():
        return False
    if "/" in key or "@" in key or key in cfg.hydra.runtime.choices:
        return False
    try:
        if loader.repository.group_exists(key):  # as Hydra tells a group from a setting
            return False
    except Exception:
        return False
    return isinstance(override.value(), _SCALARS)
