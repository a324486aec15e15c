"""Tracking-URI passwords are never written (:func:`redact`), only put in the client's env vars."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

# the password runs to the last "@" of the authority: an unescaped "@" in it is removed too
_USERINFO = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/?#@:]*):(?P<password>[^\s/?#]*)@"
)
_USER_ONLY = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/?#@:]+)@")

HTTP_USER_VAR = "MLFLOW_TRACKING_USERNAME"
HTTP_PASSWORD_VAR = "MLFLOW_TRACKING_PASSWORD"
POSTGRES_PASSWORD_VAR = "PGPASSWORD"


def redact(text: str) -> str:
    """``http://user@host``: a URI that works once the password is in the environment."""
    if "://" not in text or "@" not in text:
        return text
    return _USERINFO.sub(lambda m: m["head"] + (m["user"] + "@" if m["user"] else ""), text)


def redact_values(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: redact(v) if isinstance(v, str) else v for k, v in values.items()}


def has_password(text: str) -> bool:
    return redact(text) != text


def password_var(uri: str) -> str | None:
    scheme = uri.partition("://")[0].lower()
    if scheme in ("http", "https"):
        return HTTP_PASSWORD_VAR
    if scheme.partition("+")[0] == "postgresql":
        return POSTGRES_PASSWORD_VAR
    return None


def passwords(uri: str) -> list[tuple[str, str]]:
    """(environment variable or "", password) for each in ``uri`` (a sweep's ``a,b`` list)."""
    found = _USERINFO.finditer(uri)
    return [(password_var(m["head"]) or "", unquote(m["password"])) for m in found]


def client_credentials(uri: str) -> tuple[str, dict[str, str]]:
    """An MLflow URI loses its user too (MLflow sends the variables as basic auth; a user left in
    the URL would be sent without the password); a PostgreSQL URI keeps its user."""
    found = list(_USERINFO.finditer(uri))
    var = password_var(uri)
    if var == HTTP_PASSWORD_VAR:
        match = found[0] if found else _USER_ONLY.match(uri)
        if match is None:
            return uri, {}
        env = {HTTP_USER_VAR: unquote(match["user"])}
        if found:
            env[HTTP_PASSWORD_VAR] = unquote(found[0]["password"])
        return uri[: match.start()] + match["head"] + uri[match.end() :], env
    if var == POSTGRES_PASSWORD_VAR and found:
        return redact(uri), {POSTGRES_PASSWORD_VAR: unquote(found[0]["password"])}
    return uri, {}


@contextmanager
def credentials_in_env(uri: str) -> Iterator[str]:
    """The URI to give the client, its credentials in the environment while the block runs."""
    target, env = client_credentials(uri)
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield target
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
