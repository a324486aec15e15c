"""The Ray cluster a sweep joins (``hydra/launcher=ray_cluster``): its address, which the command
checks before any work (:func:`paraeval.pipeline.engine.address.check_reachable`)."""

from __future__ import annotations

from typing import Any

ADDRESS_KEY = "hydra.launcher.ray.init.address"


def given_address(overrides: list[str], cfg: Any) -> str | None:
    """The address a sweep with the Ray launcher joins: the last override of the key, else the
    composed config's value; None where no Ray launcher is selected or Ray starts locally."""
    launcher = cfg.get("hydra", {}).get("launcher", {}) if cfg is not None else {}
    target = str(launcher.get("_target_", ""))
    if not target.startswith("hydra_plugins.hydra_ray_launcher."):
        return None
    address = launcher.get("ray", {}).get("init", {}).get("address")
    for arg in overrides:
        key, _, value = arg.partition("=")
        if key.lstrip("+") == ADDRESS_KEY:
            address = None if value == "null" else value
    return None if address is None else str(address)
