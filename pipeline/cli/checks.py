"""Checked before Hydra writes ``.hydra/``: a mistake is one line; a password moves to the
environment (``tracking.uri``) or, in a config file, is a config error."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from omegaconf import DictConfig, OmegaConf

from paraeval.pipeline.config.compose import config_dir, flatten
from paraeval.pipeline.errors import ConfigError, suggest
from paraeval.pipeline.secrets import (
    HTTP_PASSWORD_VAR,
    POSTGRES_PASSWORD_VAR,
    has_password,
    passwords,
    redact,
)

ADDRESS_KEY = "hydra.launcher.ray.init.address"
GROUPS = (
    "data",
    "metrics",
    "normalize",
    "correlation",
    "tracking",
    "engine",
    "experiment",
    "compare",
)
TRACKING_URI = "tracking.uri"
ENV_HINT = f"{HTTP_PASSWORD_VAR} for an MLflow server, {POSTGRES_PASSWORD_VAR} for PostgreSQL"


def move_passwords_to_env(argv: list[str]) -> list[str]:
    """The environment is inherited by the jobs of a sweep, whatever their launcher."""
    found: dict[str, str] = {}
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or not has_password(value):
            out.append(arg)
            continue
        if key.lstrip("+~") != TRACKING_URI:
            raise ConfigError(
                f"'{redact(arg)}' holds a password, which Hydra would save in the output folder; "
                f"only {TRACKING_URI} takes credentials"
            )
        for var, password in passwords(value):
            if not var:
                raise ConfigError(
                    f"{TRACKING_URI}={redact(value)}: paraeval can pass a password on only for "
                    f"http(s):// and postgresql:// URIs; give it to the database driver "
                    "through its own configuration, or log through an MLflow server"
                )
            if found.setdefault(var, password) != password:
                raise ConfigError(
                    f"{TRACKING_URI}={redact(value)} holds two passwords for {var}; "
                    f"set {var} instead"
                )
        out.append(f"{key}={redact(value)}")
    os.environ.update(found)
    return out


def check_config_passwords(config: Any) -> None:
    """Unresolved: ``${oc.env:...}`` is saved as written."""
    for key, value in flatten(config).items():
        if has_password(value):
            raise ConfigError(
                f"{key} holds a password, which Hydra would save in .hydra/config.yaml: remove it "
                f"from the config file and set it in the environment ({ENV_HINT})"
            )


def check_config_files(folders: Iterable[Path]) -> None:
    for folder in folders:
        for path in sorted(folder.rglob("*.yaml")):
            with suppress(OSError, UnicodeDecodeError):
                if has_password(path.read_text(encoding="utf-8")):
                    raise ConfigError(
                        f"{path} holds a password, which Hydra would save in .hydra/: remove it "
                        f"from the file and set it in the environment ({ENV_HINT})"
                    )


def user_config_dirs(argv: list[str]) -> list[Path]:
    out: list[Path] = []
    for i, arg in enumerate(argv):
        for flag in ("--config-dir", "-cd"):
            if arg == flag and i + 1 < len(argv):
                out.append(Path(argv[i + 1]).expanduser())
            elif arg.startswith(flag + "="):
                out.append(Path(arg.partition("=")[2]).expanduser())
        key, _, value = arg.partition("=")
        if key.lstrip("+") == "hydra.searchpath":
            for entry in value.strip("[]").split(","):
                entry = entry.strip().strip("'\"")
                if entry.startswith("file://"):
                    out.append(Path(entry.removeprefix("file://")).expanduser())
                elif entry and "://" not in entry:
                    out.append(Path(entry).expanduser())
    return out


def _overrides(argv: list[str]) -> list[str]:
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in ("--config-dir", "-cd", "--config-name", "-cn", "--config-path", "-cp"):
            next(args, None)  # the flag's value
        elif not arg.startswith("-") and "=" in arg:
            out.append(arg)
    return out


def check_grammar(argv: list[str]) -> None:
    parser = OverridesParser.create()
    for arg in _overrides(argv):
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as exc:
            said = exc.message.splitlines()[0] if exc.message else "syntax error"
            raise ConfigError(
                f"cannot read the override '{arg}' (Hydra's parser: {said}); check its brackets, "
                "braces and quotes, e.g. 'metrics=[bleu,chrf]'"
            ) from None


def check_group_overrides(argv: list[str]) -> None:
    folders = [*user_config_dirs(argv), config_dir()]
    for arg in _overrides(argv):
        key, _, value = arg.partition("=")
        key = key.lstrip("+~")
        if key not in GROUPS or value in ("", "null"):
            continue
        options = {p.stem for folder in folders for p in (folder / key).glob("*.yaml")}
        for choice in [v.strip() for v in value.strip("[]").split(",") if v.strip()]:
            if choice not in options and "/" not in choice and "$" not in choice:
                hint = suggest(choice, options, f"{key} options")
                raise ConfigError(f"unknown {key} option '{choice}' in '{arg}'; {hint}")


def check_override_keys(argv: list[str]) -> None:
    """Hydra would suggest adding a misspelt key with ``+``: the nearest valid key is named."""
    overrides = [(arg, arg.partition("=")[0]) for arg in _overrides(argv)]
    plain = [
        (arg, key)
        for arg, key in overrides
        if not (key.startswith(("+", "~")) or "/" in key or "@" in key or key in GROUPS)
    ]
    cfg = _compose_selections(tuple(argv)) if plain else None
    if cfg is None:
        return
    for arg, key in plain:
        node: object = cfg
        path: list[str] = []
        for part in key.split("."):
            if not isinstance(node, DictConfig):
                break  # a list index or a value: Hydra's own message is clear
            valid = [str(k) for k in node]  # `in` on a DictConfig skips keys set to ???
            if part not in valid:
                near = difflib.get_close_matches(part, valid, n=1, cutoff=0.5)
                hint = f"valid here: {', '.join(valid)}" if valid else f"add it with '+{arg}'"
                if near:
                    hint = f"did you mean '{'.'.join([*path, near[0]])}'?"
                raise ConfigError(f"unknown setting '{'.'.join([*path, part])}' in '{arg}'; {hint}")
            try:
                node = node[part]
            except Exception:  # ??? or an interpolation: nothing to check below it
                break
            path.append(part)
        else:  # a word for an integer (seed=abc) fails here, before the run has its folder
            value = OverridesParser.create().parse_overrides([arg])[0].value()
            integer = isinstance(node, int) and not isinstance(node, bool)
            if integer and isinstance(value, str) and "${" not in value:
                raise ConfigError(f"{key} must be an integer, got '{value}'")


@cache
def _compose_selections(argv: tuple[str, ...]) -> DictConfig | None:
    """Group selections and user config folders only; None where Hydra cannot compose them."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    overrides = [(arg, arg.partition("=")[0]) for arg in _overrides(list(argv))]
    selections = [arg for arg, key in overrides if key.lstrip("+~") in GROUPS or "/" in key]
    searchpath = [f"file://{d.resolve()}" for d in user_config_dirs(list(argv))]
    if searchpath:
        selections.append(f"hydra.searchpath=[{','.join(searchpath)}]")
    try:
        GlobalHydra.instance().clear()
        with initialize_config_dir(str(config_dir()), version_base="1.3", job_name="paraeval"):
            return compose("config", overrides=selections, return_hydra_config=True)
    except Exception:  # Hydra reports a selection it cannot compose itself
        return None
    finally:
        GlobalHydra.instance().clear()


def check_config_file_passwords(argv: list[str]) -> None:
    """Before Hydra saves a user's config file in ``.hydra/config.yaml``."""
    folders = user_config_dirs(argv)
    if not folders:
        return
    cfg = _compose_selections(tuple(argv))
    if cfg is None:  # a sweep over groups does not compose here: every file of the folders is read
        check_config_files(folders)
        return
    config = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(config, dict)
    check_config_passwords({k: v for k, v in config.items() if k != "hydra"})


def check_output_dir_overrides(argv: list[str]) -> None:
    """Hydra creates the output folder before paraeval's code runs: a failure is a traceback."""
    from paraeval.pipeline.files import check_writable

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
        check_writable(Path(value).expanduser(), key.lstrip("+"), value)
    if not given:
        # the default folders (outputs/..., multirun/...) are relative to the current directory
        default = "multirun" if multirun else "outputs"
        check_writable(Path.cwd() / default, wanted, str(Path.cwd() / default))


def check_cluster_address(argv: list[str]) -> None:
    """The last override of the key, else the composed config's (None: Ray starts locally)."""
    from paraeval.pipeline.config.nodes import check_reachable

    cfg = _compose_selections(tuple(argv)) if is_multirun(argv) else None
    launcher = cfg.get("hydra", {}).get("launcher", {}) if cfg is not None else {}
    if not str(launcher.get("_target_", "")).startswith("hydra_plugins.hydra_ray_launcher."):
        return
    address = launcher.get("ray", {}).get("init", {}).get("address")
    for arg in _overrides(argv):
        key, _, value = arg.partition("=")
        if key.lstrip("+") == ADDRESS_KEY:
            address = None if value == "null" else value
    check_reachable(None if address is None else str(address), ADDRESS_KEY)


def is_multirun(argv: list[str]) -> bool:
    return any(a in ("-m", "--multirun", "hydra.mode=MULTIRUN") for a in argv)
