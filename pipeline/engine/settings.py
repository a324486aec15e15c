"""The ``engine`` config group checked before any work: ``engine=local`` (the default) or
``engine=ray`` with its settings; a wrong key or value is one config error naming it, and an
address nothing answers at is one too (:func:`paraeval.pipeline.engine.address.check_reachable`)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from paraeval.pipeline.config.bounds import count
from paraeval.pipeline.errors import ConfigError

KINDS = ("local", "ray")
# the keys of each kind (conf/engine/*.yaml)
KEYS: dict[str, tuple[str, ...]] = {
    "local": ("kind",),
    "ray": ("kind", "address", "actors_per_encoder", "gpus_per_actor", "rows_per_shard"),
}
ADDRESS_KEY = "engine.address"


@dataclass(frozen=True)
class EngineSettings:
    kind: str = "local"
    address: str | None = None  # None: a Ray instance started for the run
    actors_per_encoder: int = 1
    gpus_per_actor: float = 0.0
    rows_per_shard: int = 2048

    @classmethod
    def from_node(cls, node: Mapping[str, object]) -> EngineSettings:
        kind = node.get("kind")
        if kind not in KINDS:
            raise ConfigError(f"engine.kind must be one of {list(KINDS)}, got {kind!r}")
        valid = KEYS[str(kind)]
        for key in node:
            if key not in valid:
                near = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.5)
                hint = f"; did you mean 'engine.{near[0]}'?" if near else ""
                raise ConfigError(
                    f"unknown setting 'engine.{key}' for engine={kind}{hint} "
                    f"(valid: {', '.join(valid)})"
                )
        if kind == "local":
            return cls()
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

    def check_reachable(self) -> None:
        """A cluster address nothing answers at: one config error, before any work."""
        from paraeval.pipeline.engine.address import check_reachable

        if self.kind == "ray":
            check_reachable(self.address, ADDRESS_KEY)
