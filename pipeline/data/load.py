"""Load stage: files -> the tidy (item, system) table of DESIGN.md. Where the rest of paraeval
finds data loading; the work is done by :mod:`.readers` (files and formats), :mod:`.validate` (the
tidy table, its checks and per-annotator aggregation), :mod:`.loaders` and :mod:`.mtme`. A data
config's ``_target_`` names a loader here (:data:`LOADERS`); files are read every run, nothing is
kept."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from paraeval.pipeline.data.loaders import (
    demo_path,
    load_demo,
    load_frame,
    load_parabank,
    load_stsb,
    load_table,
    load_text,
)
from paraeval.pipeline.data.mtme import load_mtme
from paraeval.pipeline.data.readers import read_table
from paraeval.pipeline.data.validate import HUMAN_PREFIX, in_order, origin_error, row_groups
from paraeval.pipeline.errors import ConfigError

__all__ = [
    "HUMAN_PREFIX",
    "LOADERS",
    "demo_path",
    "in_order",
    "load_data",
    "load_demo",
    "load_frame",
    "load_mtme",
    "load_parabank",
    "load_stsb",
    "load_table",
    "load_text",
    "origin_error",
    "read_table",
    "row_groups",
]

# the loaders a data config may name in `_target_`, by their names in this module (where users
# import them from): an exact allow-list, not a module prefix
LOADERS: dict[str, Callable[..., pd.DataFrame]] = {
    f"{__name__}.{fn.__name__}": fn
    for fn in (load_demo, load_table, load_text, load_parabank, load_stsb, load_mtme, load_frame)
}


def load_data(target: str, options: Mapping[str, Any]) -> pd.DataFrame:
    """The tidy table from the loader a data config's ``_target_`` names (one of LOADERS)."""
    loader = LOADERS.get(target)
    if loader is None:
        raise ConfigError(f"data._target_ must be one of {sorted(LOADERS)}, got '{target}'")
    try:
        return loader(**options)
    except TypeError as exc:
        raise ConfigError(f"data: {exc}") from None
