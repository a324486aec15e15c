"""Typed settings of each config node but ``correlation``; no defaults: ``conf/`` has them all."""

from __future__ import annotations

import difflib
import math
import socket
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from paraeval.correlation.levels import LEVELS, valid_combination
from paraeval.pipeline.errors import ConfigError

Node = Mapping[str, Any]

FORMATS = ("png", "pdf", "svg")  # figure file formats
NORMALIZE_METHODS = ("minmax", "zscore", "rank", "bounds")
ENGINE_KINDS = ("local", "ray")
ENGINE_KEYS: dict[str, tuple[str, ...]] = {
    "local": ("kind",),
    "ray": ("kind", "address", "actors_per_encoder", "gpus_per_actor", "rows_per_shard"),
}
ADDRESS_KEY = "engine.address"
# long enough for a head node across a data centre, short enough not to stall a typo
CONNECT_TIMEOUT_S = 3.0
# Ray's own words for "start one here" and "find the running one": nothing to check beforehand
NOT_AN_ADDRESS = ("", "auto", "local")
DEFAULT_GRID: tuple[float, ...] = tuple(round(float(a), 4) for a in np.linspace(0.0, 1.0, 21))


def check_keys(node: Node, valid: Sequence[str], section: str) -> None:
    """A key that is not a setting (added with ``+``) is an error naming the nearest valid key."""
    for key in node:
        if key not in valid:
            where = f"{section}.{key}" if section else str(key)
            near = difflib.get_close_matches(str(key), list(valid), n=1, cutoff=0.5)
            hint = f"; did you mean '{section + '.' if section else ''}{near[0]}'?" if near else ""
            raise ConfigError(
                f"unknown setting '{where}'{hint} (valid: {', '.join(sorted(map(str, valid)))})"
            )


def required(node: Node, keys: Sequence[str] | type, section: str) -> dict[str, Any]:
    """The node's values of ``keys`` (a dataclass: its fields); unknown or missing: an error."""
    names = [f.name for f in fields(keys)] if isinstance(keys, type) else list(keys)
    check_keys(node, names, section)
    missing = [n for n in names if n not in node]
    if missing:
        raise ConfigError(f"{section}.{missing[0]} is missing from the configuration")
    return {n: node[n] for n in names}


def one_of(value: object, valid: Collection[str], key: str) -> str:
    if str(value) not in valid:
        raise ConfigError(f"{key} must be one of {list(valid)}, got '{value}'")
    return str(value)


def known(name: object, valid: Collection[str], key: str, what: str) -> None:
    if str(name) not in valid:
        raise ConfigError(f"{key}: unknown {what} '{name}'; choose from {list(valid)}")


def count(value: object, key: str, minimum: int = 1) -> int:
    """An integer of at least ``minimum`` (not a boolean, nor 1e6, which YAML reads as a float)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum >= 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{key} must be {kind}, got {value!r}")
    return value


def boolean(value: object, key: str) -> bool:
    """YAML's true/false only: ``maybe`` or ``1`` is a mistake, not a truthy string."""
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got '{value}'")
    return value


def names(value: object, key: str) -> tuple[str, ...]:
    """A list of names (null: none; one name alone: that one)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or any(
        isinstance(v, Mapping | Sequence) and not isinstance(v, str) for v in value
    ):
        raise ConfigError(f"{key} must be a list of system names, got {value!r}")
    return tuple(str(v) for v in value)


def number(key: str, value: Any, low: float, high: float | None, open_: bool = False) -> float:
    """``value`` as a number in [low, high] (``open_``: (low, high)), or a ConfigError."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key} must be a number, got '{value}'") from None
    too_low = out <= low if open_ else out < low
    too_high = high is not None and (out >= high if open_ else out > high)
    if too_low or too_high or out != out:
        left, right = "()" if open_ else "[]"
        upper = "inf)" if high is None else f"{high:g}{right}"
        raise ConfigError(f"{key} must be in {left}{low:g}, {upper}, got {value}")
    return out


@dataclass(frozen=True)
class DataSettings:
    target: str
    options: dict[str, object]  # the loader's keyword arguments
    name: str
    # shown apart, never ranked, out of the correlations unless correlation.include_controls
    controls: tuple[str, ...]

    @classmethod
    def from_node(cls, node: Node) -> DataSettings:
        options = {str(k): v for k, v in node.items()}
        target = str(options.pop("_target_", "") or "")
        controls = names(options.pop("controls", None), "data.controls")
        if "name" not in options:
            raise ConfigError("data.name is missing from the configuration")
        return cls(target=target, options=options, name=str(options["name"]), controls=controls)


@dataclass(frozen=True)
class NormalizeSettings:
    method: str  # minmax | zscore | rank | bounds
    bounds: dict[str, list[float]]  # column -> [low, high], for method=bounds

    @classmethod
    def from_node(cls, node: Node) -> NormalizeSettings:
        values = {k: v for k, v in node.items() if k != "_target_"}
        check_keys(values, ("method", "bounds"), "normalize")
        method = one_of(values.get("method"), NORMALIZE_METHODS, "normalize.method")
        bounds = values.get("bounds") or {}
        if not isinstance(bounds, Mapping):
            raise ConfigError(f"normalize.bounds must map columns to [low, high], got {bounds!r}")
        return cls(method, {str(k): list(v) for k, v in bounds.items()})


@dataclass(frozen=True)
class CompareSettings:
    baseline: str | None
    baseline_is_control: bool
    n_bootstrap: int
    n_ar: int
    confidence: float
    alpha: float
    seed: int | None

    @classmethod
    def from_node(cls, node: Node) -> CompareSettings | None:
        """None where the comparison is switched off (``compare.enabled=false``)."""
        values = dict(node)
        if not boolean(values.pop("enabled", None), "compare.enabled"):
            return None
        v = required(values, cls, "compare")
        for key in ("n_bootstrap", "n_ar"):
            count(v[key], f"compare.{key}")
        for key in ("confidence", "alpha"):
            value = v[key]
            if not isinstance(value, int | float) or not 0.0 < float(value) < 1.0:
                raise ConfigError(f"compare.{key} must be a number in (0, 1), got {value!r}")
        seed = v["seed"]
        if seed is not None and (not isinstance(seed, int) or seed < 0):
            raise ConfigError(f"compare.seed must be a non-negative integer or null, got {seed!r}")
        boolean(v["baseline_is_control"], "compare.baseline_is_control")
        v["baseline"] = None if v["baseline"] is None else str(v["baseline"])
        return cls(**v)

    def signature(self) -> str:
        seed = "none" if self.seed is None else str(self.seed)
        return (
            f"bs:{self.n_bootstrap}|ar:{self.n_ar}|seed:{seed}|conf:{self.confidence:g}"
            f"|alpha:{self.alpha:g}"
        )


@dataclass(frozen=True)
class AlphaCurveSettings:
    enabled: bool
    grid: tuple[float, ...]  # sorted α values in [0, 1] (null in conf/: DEFAULT_GRID)
    levels: tuple[str, ...]
    coefficient: str
    dev_fraction: float
    seed: int

    @classmethod
    def from_node(cls, node: Node) -> AlphaCurveSettings:
        v = required(node, cls, "alpha_curve")
        grid = list(DEFAULT_GRID if v["grid"] is None else v["grid"])
        try:
            values = sorted({float(a) for a in grid})
        except (TypeError, ValueError):
            values = []
        if not values or values[0] < 0 or values[-1] > 1:
            raise ConfigError(f"alpha_curve.grid must be numbers in [0, 1], got {grid}")
        levels = names(v["levels"], "alpha_curve.levels")
        for level in levels:
            known(level, LEVELS, "alpha_curve.levels", "level")
            try:
                ok = valid_combination(level, v["coefficient"])
            except ValueError as exc:
                raise ConfigError(f"alpha_curve.coefficient: {exc}") from None
            if not ok:
                raise ConfigError(
                    f"alpha_curve: coefficient '{v['coefficient']}' is not defined at level "
                    f"'{level}'"
                )
        return cls(
            enabled=boolean(v["enabled"], "alpha_curve.enabled"),
            grid=tuple(values),
            levels=levels,
            coefficient=str(v["coefficient"]),
            dev_fraction=number("alpha_curve.dev_fraction", v["dev_fraction"], 0.0, 1.0, True),
            seed=int(v["seed"]),
        )


@dataclass(frozen=True)
class ReportSettings:
    print_tables: bool
    max_rows: int
    progress: bool
    format: str  # figure file format: png | pdf | svg
    parallel_figures: bool  # each drawn in a forked process as soon as its tables exist

    @classmethod
    def from_node(cls, node: Node) -> ReportSettings:
        v = required(node, cls, "report")
        count(v["max_rows"], "report.max_rows")
        one_of(v["format"], FORMATS, "report.format")
        for key in ("print_tables", "progress", "parallel_figures"):
            boolean(v[key], f"report.{key}")
        return cls(**v)


@dataclass(frozen=True)
class LimitsSettings:
    max_stage_minutes: float  # inf: null, no limit

    @classmethod
    def from_node(cls, node: Node) -> LimitsSettings:
        minutes = required(node, cls, "limits")["max_stage_minutes"]
        key = "limits.max_stage_minutes"
        return cls(math.inf if minutes is None else number(key, minutes, 0.0, None, True))


@dataclass(frozen=True)
class CacheSettings:
    dir: str

    @classmethod
    def from_node(cls, node: Node) -> CacheSettings | None:
        """None where the cache is switched off (``cache.enabled=false``)."""
        check_keys(node, ("enabled", "dir"), "cache")
        if not boolean(node.get("enabled"), "cache.enabled"):
            return None
        folder = node.get("dir")
        if not isinstance(folder, str) or not folder:
            raise ConfigError(f"cache.dir must be a folder, got '{folder}'")
        return cls(folder)


@dataclass(frozen=True)
class TrackingSettings:
    target: str | None  # the Tracker class ``_target_`` names (checked where it is built)
    options: dict[str, Any]  # its keyword arguments

    @classmethod
    def from_node(cls, node: Node) -> TrackingSettings:
        options = {str(k): v for k, v in node.items()}
        target = options.pop("_target_", None)
        return cls(None if target is None else str(target), options)

    def changed(self, changes: Mapping[str, object]) -> TrackingSettings:
        return TrackingSettings(self.target, {**self.options, **changes})


@dataclass(frozen=True)
class EngineSettings:
    kind: str  # local | ray
    address: str | None  # None: a Ray instance started for the run
    actors_per_encoder: int
    gpus_per_actor: float
    rows_per_shard: int

    @classmethod
    def from_node(cls, node: Node) -> EngineSettings:
        kind = one_of(node.get("kind"), ENGINE_KINDS, "engine.kind")
        check_keys(node, ENGINE_KEYS[kind], "engine")
        if kind == "local":
            return cls("local", None, 1, 0.0, 2048)  # the score stage's work in this process
        address = node.get("address")
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise ConfigError(f"{ADDRESS_KEY} must be host:port or null, got {address!r}")
        gpus = node.get("gpus_per_actor")
        if isinstance(gpus, bool) or not isinstance(gpus, int | float) or not gpus >= 0:
            raise ConfigError(f"engine.gpus_per_actor must be a number >= 0, got {gpus!r}")
        return cls(
            kind="ray",
            address=address,
            actors_per_encoder=count(node.get("actors_per_encoder"), "engine.actors_per_encoder"),
            gpus_per_actor=float(gpus),
            rows_per_shard=count(node.get("rows_per_shard"), "engine.rows_per_shard"),
        )


def check_reachable(address: str | None, key: str) -> None:
    """Not tried for ``auto``, an interpolation or a sweep over addresses."""
    if address is None:
        return
    text = address.strip().strip("'\"")
    if text.lower() in NOT_AN_ADDRESS or "${" in text or "," in text:
        return
    host, sep, port = text.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(
            f"{key}='{text}' is not a Ray cluster address; give host:port (the "
            "address 'ray start --head' prints), ray://host:10001, auto or null"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError
            reason = f"no answer in {CONNECT_TIMEOUT_S:g} s"
        raise ConfigError(
            f"cannot reach the Ray cluster at {key}='{address}' ({reason}); start it "
            "with 'ray start --head' or give the address it prints"
        ) from None
