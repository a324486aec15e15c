"""Trackers by ``_target_``: ``run_info.json`` first (``paraeval-log``); a failure only warns."""

from __future__ import annotations

import inspect
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paraeval.pipeline.config.nodes import TrackingSettings
from paraeval.pipeline.errors import ConfigError, RunContext, not_allowed
from paraeval.pipeline.secrets import HTTP_PASSWORD_VAR, HTTP_USER_VAR
from paraeval.pipeline.tracking.mlflow_log import Logged, log_payload
from paraeval.pipeline.tracking.payload import RunPayload, write_run_info
from paraeval.pipeline.tracking.store import TrackingUnavailable, check_store, resolved_tracking

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

log = logging.getLogger("paraeval.pipeline.tracking")

TRACKERS: dict[str, type[Tracker]] = {}  # all a config may name: nothing else is imported


class Tracker(ABC):
    """Logs a finished run somewhere; ``run_info.json`` is always written first."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith("paraeval.") and not cls.__name__.startswith("_"):
            TRACKERS[f"{cls.__module__}.{cls.__qualname__}"] = cls

    @property
    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """As ``run_info.json`` records them, for ``paraeval-log``."""

    @property
    def run_name(self) -> str | None:
        name = self.settings.get("run_name")
        return None if name is None else str(name)

    def log_evaluation(
        self,
        ev: Evaluation,
        out_dir: Path,
        overrides: Sequence[str] = (),
        finish_outputs: Callable[[], None] | None = None,
        context: RunContext | None = None,
    ) -> Logged | None:
        payload = RunPayload.from_evaluation(
            ev, Path(out_dir), overrides, self.settings, self.run_name
        )
        payload.finish_outputs = finish_outputs or payload.finish_outputs
        payload.context = context or payload.context
        return self.log(payload)

    def log(self, payload: RunPayload) -> Logged | None:
        write_run_info(payload.out_dir, payload.record)
        return self.send(payload)

    @abstractmethod
    def send(self, payload: RunPayload) -> Logged | None:
        """A failure is a warning line and None, never an exception."""

    def check(self) -> None:  # noqa: B027 (a tracker that cannot tell keeps this no-op)
        """Raise :class:`ConfigError` for a backend that cannot take the run, before any work."""


class _StoreSettings(Tracker):
    """The settings of ``conf/tracking/{sqlite,server,none}.yaml``."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        uri: str | None = None,
        store_dir: str | None = None,
        experiment: str = "paraeval",
        run_name: str | None = None,
    ) -> None:
        self._config: dict[str, Any] = dict(
            enabled=enabled, uri=uri, store_dir=store_dir, experiment=experiment, run_name=run_name
        )

    @property
    def settings(self) -> dict[str, Any]:
        return resolved_tracking(self._config)


class MLflowTracker(_StoreSettings):
    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> MLflowTracker:
        """Keys of other trackers are ignored."""
        known = inspect.signature(cls.__init__).parameters
        return cls(**{k: v for k, v in settings.items() if k in known and k != "self"})

    def check(self) -> None:
        """A SQL store now; a server at logging: it may be up by then, and the outputs are kept."""
        uri = self.settings.get("uri") or f"sqlite:///{Path(self.settings['store_dir'])}/mlflow.db"
        try:
            check_store(str(uri))
        except TrackingUnavailable as exc:
            raise ConfigError(str(exc)) from None

    def log_or_raise(self, payload: RunPayload) -> Logged:
        return log_payload(payload, self.settings)

    def send(self, payload: RunPayload) -> Logged | None:
        out = str(payload.out_dir)
        try:
            logged = self.log_or_raise(payload)
        except Exception as exc:
            payload.context.not_logged.append(Path(out))
            failed = f"MLflow logging failed ({failure_reason(exc)})"
            problem = str(exc) if isinstance(exc, TrackingUnavailable) else failed
            log.warning(
                "%s; outputs kept in %s; log them later with: paraeval-log %s", problem, out, out
            )
            return None
        log.info("MLflow run %s in %s", logged.run_id, logged.uri)
        return logged


def failure_reason(exc: BaseException) -> str:
    """The first line of an error's message, with what to do where credentials were refused."""
    text = str(exc).strip()
    reason = text.splitlines()[0] if text else type(exc).__name__
    if len(reason) > 300:
        reason = reason[:300].rsplit(" ", 1)[0] + " …"
    if "error code 401" in reason:
        reason += f"; set {HTTP_USER_VAR} and {HTTP_PASSWORD_VAR} (or fix them)"
    return reason


class NoTracker(_StoreSettings):
    """``run_info.json`` only; its settings (any keys) are recorded."""

    def __init__(self, **settings: Any) -> None:
        super().__init__()
        self._config.update(settings)

    def send(self, payload: RunPayload) -> Logged | None:
        return None


def tracker_class(target: str) -> type[Tracker]:
    if target not in TRACKERS:
        raise not_allowed("tracking._target_", target, "tracker", sorted(TRACKERS))
    cls = TRACKERS[target]
    if inspect.isabstract(cls):
        raise ConfigError(f"tracking._target_ '{target}' is not a paraeval tracker")
    return cls


def tracker_from_settings(tracking: TrackingSettings) -> Tracker:
    """``_target_`` (default MLflow), or a :class:`NoTracker` for ``enabled: false``."""
    settings, target = dict(tracking.options), tracking.target
    # checked even when logging is off: a config never names code outside the allow-list
    named = None if target is None else tracker_class(target)
    cls = (named or MLflowTracker) if settings.get("enabled", True) else NoTracker
    try:
        return cls(**settings)
    except TypeError as exc:
        raise ConfigError(f"tracking ({cls.__name__}): {exc}") from None
