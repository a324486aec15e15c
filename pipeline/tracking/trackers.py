"""Where a finished run goes: a :class:`Tracker` chosen by ``_target_`` in ``conf/tracking/``.

A tracker receives a run as a :class:`~paraeval.pipeline.tracking.payload.RunPayload` (the run
record, the result tables and the output folder). Every tracker first writes ``run_info.json``
into the output folder (so ``paraeval-log`` can log the directory later, whatever happened), then
hands the payload to its backend; the rest of paraeval uses a tracker through
:meth:`Tracker.log_evaluation` (a finished evaluation) and :meth:`Tracker.log` only. A backend that
fails or cannot be reached never stops the run: one warning line says how to log it later, and the
directory is recorded in :data:`NOT_LOGGED` (the CLI then exits 3).

- :class:`MLflowTracker`: an MLflow store (``conf/tracking/sqlite.yaml``: embedded SQLite;
  ``server.yaml``: a remote ``mlflow server``); the layout is described in
  :mod:`paraeval.pipeline.tracking.mlflow_log`.
- :class:`NoTracker`: ``run_info.json`` only (``conf/tracking/none.yaml``).

Adding a backend: a :class:`Tracker` subclass in a ``paraeval`` module (its keyword arguments are
its settings; implement :attr:`Tracker.settings` and :meth:`Tracker.send`), and a YAML file in
``conf/tracking/`` whose ``_target_`` is the class's dotted path and whose other keys are those
arguments. Only Tracker subclasses defined in paraeval's own modules can be named by
``_target_`` (:data:`TRACKERS`): a config cannot make the run import or call anything else.
``enabled: false`` in any tracking config still turns logging off (:class:`NoTracker`).
"""

from __future__ import annotations

import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from paraeval.pipeline.errors import ConfigError, not_allowed
from paraeval.pipeline.tracking.mlflow_log import Logged, log_payload
from paraeval.pipeline.tracking.payload import RunPayload
from paraeval.pipeline.tracking.run_record import Evaluated, write_run_info
from paraeval.pipeline.tracking.store import TrackingUnavailable, resolved_tracking

log = logging.getLogger("paraeval.pipeline.tracking")

NOT_LOGGED: list[Path] = []
"""Output directories of this process whose logging failed (the CLI's exit status says so)."""

TRACKERS: dict[str, type[Tracker]] = {}
"""The classes ``tracking._target_`` may name, by dotted path: every public Tracker subclass
defined in a ``paraeval`` module, registered when its module is imported."""


class Tracker(ABC):
    """Logs a finished run somewhere; ``run_info.json`` is always written first."""

    _registered_prefix: ClassVar[str] = "paraeval."

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith(cls._registered_prefix) and not cls.__name__.startswith("_"):
            TRACKERS[f"{cls.__module__}.{cls.__qualname__}"] = cls

    @property
    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """The settings as ``run_info.json`` records them (``RunRecord.tracking``), from which
        ``paraeval-log`` logs the directory later."""

    @property
    def run_name(self) -> str | None:
        """A configured run name, or None for the one built from the data and overrides."""
        name = self.settings.get("run_name")
        return None if name is None else str(name)

    def log_evaluation(
        self, ev: Evaluated, out_dir: Path, overrides: Sequence[str] = ()
    ) -> Logged | None:
        """Log a finished evaluation whose output files are in ``out_dir``, from its tables in
        memory (``overrides``: the command line's, for the run name and tags)."""
        payload = RunPayload.from_evaluation(
            ev, Path(out_dir), overrides, self.settings, self.run_name
        )
        return self.log(payload)

    def log(self, payload: RunPayload) -> Logged | None:
        """Write ``run_info.json``, then :meth:`send` the run. None when nothing was logged."""
        write_run_info(payload.out_dir, payload.record)
        return self.send(payload)

    @abstractmethod
    def send(self, payload: RunPayload) -> Logged | None:
        """Log the run to the backend; a failure is one warning line and None, never an
        exception."""


class _StoreSettings(Tracker):
    """The settings of ``conf/tracking/{sqlite,server,none}.yaml``: where an MLflow store is."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        uri: str | None = None,
        store_dir: str | None = None,
        experiment: str = "paraeval",
        run_name: str | None = None,
        **extra: Any,
    ) -> None:
        self._config: dict[str, Any] = {
            "enabled": enabled,
            "uri": uri,
            "store_dir": store_dir,
            "experiment": experiment,
            "run_name": run_name,
            **extra,
        }

    @property
    def settings(self) -> dict[str, Any]:
        return resolved_tracking(self._config)


class MLflowTracker(_StoreSettings):
    """One parent run per invocation and one child run per system in an MLflow store.

    ``uri``: a tracking URI (``http://host:5000``, ``postgresql://...``); without one,
    ``sqlite:///<store_dir>/mlflow.db`` with artifacts in ``<store_dir>/artifacts``.
    ``experiment``: the experiment name; ``run_name``: None builds it from the data and the
    overrides. ``enabled`` is recorded only (``enabled: false`` selects :class:`NoTracker`).
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        uri: str | None = None,
        store_dir: str | None = None,
        experiment: str = "paraeval",
        run_name: str | None = None,
    ) -> None:
        super().__init__(
            enabled=enabled, uri=uri, store_dir=store_dir, experiment=experiment, run_name=run_name
        )

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> MLflowTracker:
        """From recorded settings (``RunRecord.tracking``); keys it does not know are ignored,
        as a record may come from another tracker."""
        known = inspect.signature(cls.__init__).parameters
        return cls(**{k: v for k, v in settings.items() if k in known and k != "self"})

    def log_or_raise(self, payload: RunPayload) -> Logged:
        """Log the run and raise on failure (:class:`TrackingUnavailable` for a server that
        does not answer); returns the existing run if this content is already logged."""
        return log_payload(payload, self.settings)

    def send(self, payload: RunPayload) -> Logged | None:
        out_dir = payload.out_dir
        try:
            logged = self.log_or_raise(payload)
        except Exception as exc:
            NOT_LOGGED.append(Path(out_dir))
            log.warning(*not_logged_warning(out_dir, exc))
            return None
        log.info("MLflow run %s in %s", logged.run_id, logged.uri)
        return logged


def not_logged_warning(out_dir: Path, exc: BaseException) -> tuple[str, ...]:
    """The warning (format and arguments) for a directory whose logging failed with ``exc``."""
    if isinstance(exc, TrackingUnavailable):
        return (
            "%s; outputs kept in %s; log them later with: paraeval-log %s",
            str(exc),
            str(out_dir),
            str(out_dir),
        )
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (
        "MLflow logging failed (%s); outputs kept in %s; log them later with: paraeval-log %s",
        reason[:300],
        str(out_dir),
        str(out_dir),
    )


class NoTracker(_StoreSettings):
    """``run_info.json`` only. Its settings (any keys) are recorded as they are, so that
    ``paraeval-log`` logs the directory to that store later (``store_dir`` defaults to
    ``./mlflow``)."""

    def send(self, payload: RunPayload) -> Logged | None:
        return None


def tracker_class(target: str) -> type[Tracker]:
    """The tracker class a ``_target_`` names: an exact name of :data:`TRACKERS`, never a
    module prefix (nothing is imported for a name that is not registered)."""
    if target not in TRACKERS:
        raise not_allowed("tracking._target_", target, "tracker", sorted(TRACKERS))
    cls = TRACKERS[target]
    if inspect.isabstract(cls):
        raise ConfigError(f"tracking._target_ '{target}' is not a paraeval tracker")
    return cls


def tracker_from_config(node: Mapping[str, Any] | None) -> Tracker:
    """The tracker a ``tracking`` config node describes (a DictConfig or a plain mapping).

    ``_target_`` names the class and the other keys are its keyword arguments; ``enabled:
    false`` gives a :class:`NoTracker` with the same settings; a node without ``_target_`` (a
    config written before trackers were classes) is MLflow. An unknown key is a ConfigError.
    """
    settings = _plain(node)
    target = settings.pop("_target_", None)
    # checked even when logging is off: a config never names code outside the allow-list
    named = None if target is None else tracker_class(str(target))
    if not settings.get("enabled", True):
        cls: type[Tracker] = NoTracker
    else:
        cls = named or MLflowTracker
    try:
        return cls(**settings)
    except TypeError as exc:
        raise ConfigError(f"tracking ({cls.__name__}): {exc}") from None


def _plain(node: Mapping[str, Any] | None) -> dict[str, Any]:
    if node is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf
    except ImportError:  # pragma: no cover - omegaconf comes with hydra, a dependency
        return dict(node)
    if isinstance(node, DictConfig):
        container = OmegaConf.to_container(node, resolve=True)
        assert isinstance(container, dict)
        return {str(k): v for k, v in container.items()}
    return dict(node)
