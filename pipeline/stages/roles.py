"""Controls (a copy of the input tops every similarity metric) and reference-free data."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from paraeval.pipeline.errors import ConfigError

log = logging.getLogger(__name__)

# a system that copies its source in more than this share of its items is a likely control
COPY_SHARE = 0.5


def same_text(a: object, b: object) -> bool:
    """Equal once whitespace is collapsed and case folded (the copy rate's rule)."""
    return " ".join(str(a).split()).casefold() == " ".join(str(b).split()).casefold()


@dataclass(frozen=True)
class Roles:
    """The systems' roles and the kind of references of one loaded table."""

    controls: tuple[str, ...] = ()
    # systems not declared that copy their source in most items: their copy rate
    likely_controls: dict[str, float] = field(default_factory=dict)
    reference_free: bool = False
    # why the run is reference-free: "the references are the sources" or "there are no references"
    reason: str = ""

    def note(self) -> str:
        """The sentence a run says once (terminal, report, MLflow) when it is reference-free."""
        if not self.reference_free:
            return ""
        return (
            f"Reference-free data ({self.reason}): similarity metrics measure meaning kept from "
            "the source; self-BLEU and PINC measure diversity from it; iBLEU is not computed."
        )


def copy_rates(table: pd.DataFrame) -> pd.Series:
    """Per system (in order of appearance), the share of its candidates equal to their source."""
    same = [same_text(c, s) for c, s in zip(table["candidate"], table["source"], strict=True)]
    return (
        pd.Series(same, index=table.index, dtype=float).groupby(table["system"], sort=False).mean()
    )


def reference_kind(table: pd.DataFrame) -> str:
    """Why the table is reference-free, or "" where some reference is not its source."""
    any_reference = False
    for refs, source in zip(table["references"], table["source"], strict=True):
        for ref in refs:
            any_reference = True
            if not same_text(ref, source):
                return ""
    return "the references are the sources" if any_reference else "there are no references"


def find_roles(
    table: pd.DataFrame,
    controls: Sequence[str] = (),
    baseline: str | None = None,
    baseline_is_control: bool = True,
) -> Roles:
    """The ``baseline`` is a control unless ``baseline_is_control`` is false."""
    systems = [str(s) for s in dict.fromkeys(table["system"])]
    for name in controls:
        if name not in systems:
            near = difflib.get_close_matches(name, sorted(systems), n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise ConfigError(
                f"data.controls: '{name}' is not a system; {hint}choose from {sorted(systems)}"
            )
    named = {*controls, baseline} if baseline is not None and baseline_is_control else set(controls)
    chosen = tuple(s for s in systems if s in named)
    rates = copy_rates(table)
    likely = {str(s): float(r) for s, r in rates.items() if r > COPY_SHARE and str(s) not in chosen}
    for system, rate in likely.items():
        log.warning(
            "system '%s' copies its source in %.0f%% of its items: likely a control; it is "
            "ranked like any system until declared with data.controls=[%s]",
            system,
            100 * rate,
            system,
        )
    reason = reference_kind(table) if "references" in table and "source" in table else ""
    roles = Roles(chosen, likely, bool(reason), reason)
    if roles.reference_free:
        log.info("%s", roles.note())
    return roles
