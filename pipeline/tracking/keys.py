"""MLflow keys and values built from names that may come from data (systems, aspects, metric
ids): whatever MLflow would refuse is made safe, whatever it accepts stays as it is."""

from __future__ import annotations

import math
from typing import Any

from paraeval.pipeline.names import slug

_ALLOWED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./ ")


def key(*parts: str) -> str:
    """An MLflow key from parts that may come from data: a part MLflow accepts as it is stays
    unchanged, any other passes through :func:`paraeval.pipeline.names.slug`."""
    return ".".join(part if _safe(part) else slug(part) for part in parts)


def _safe(part: str) -> bool:
    """MLflow allows alphanumerics, ``_ - . /`` and space, but no key that resolves as a path."""
    return all(ch in _ALLOWED for ch in part) and ".." not in part and not part.startswith("/")


def finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
