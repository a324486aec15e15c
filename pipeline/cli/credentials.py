"""Passwords kept out of ``.hydra/``, which Hydra writes before paraeval's code runs: one in
``tracking.uri=...`` is taken off the command line and handed on through the environment variable
its client reads; one written in a config file cannot be taken out, and is a config error."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

from paraeval.pipeline.errors import ConfigError
from paraeval.pipeline.secrets import (
    HTTP_PASSWORD_VAR,
    POSTGRES_PASSWORD_VAR,
    has_password,
    passwords,
    redact,
)

TRACKING_URI = "tracking.uri"
ENV_HINT = f"{HTTP_PASSWORD_VAR} for an MLflow server, {POSTGRES_PASSWORD_VAR} for PostgreSQL"


def move_passwords_to_env(argv: list[str]) -> list[str]:
    """``argv`` with the password of ``tracking.uri=scheme://user:PASSWORD@host`` moved to the
    environment (inherited by the jobs of a sweep, whatever their launcher)."""
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
    """A password in a composed, unresolved config (``${oc.env:...}`` is saved as written)."""
    for key, value in _strings(config, ""):
        if has_password(value):
            raise ConfigError(
                f"{key} holds a password, which Hydra would save in .hydra/config.yaml: remove it "
                f"from the config file and set it in the environment ({ENV_HINT})"
            )


def check_config_files(folders: Iterable[Path]) -> None:
    """The first YAML file under ``folders`` with a password."""
    for folder in folders:
        for path in sorted(folder.rglob("*.yaml")):
            with suppress(OSError, UnicodeDecodeError):
                if has_password(path.read_text(encoding="utf-8")):
                    raise ConfigError(
                        f"{path} holds a password, which Hydra would save in .hydra/: remove it "
                        f"from the file and set it in the environment ({ENV_HINT})"
                    )


def _strings(node: Any, prefix: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(v, f"{prefix}{k}.")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _strings(v, f"{prefix}{i}.")
    elif isinstance(node, str):
        yield prefix.rstrip("."), node
