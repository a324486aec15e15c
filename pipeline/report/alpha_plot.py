"""The iBLEU α curve: each level's correlation with each human aspect over the α grid."""

from __future__ import annotations

from typing import TYPE_CHECKING

import matplotlib
import numpy as np

from paraeval.pipeline.report.plots import new_figure, plain_y, save_figure, set_title

if TYPE_CHECKING:
    from pathlib import Path

    from paraeval.pipeline.stages.alpha import AlphaCurve

PANEL_IN = (4.6, 3.6)


def plot_alpha_curve(result: AlphaCurve, path: Path) -> bool:
    """A panel per level: each aspect's curve on dev (solid) and test (dashed), the α chosen on
    dev as a dot on the test curve, the configured α dotted; False when there is no curve."""
    curve, choice = result.curve, result.choice
    levels = list(dict.fromkeys(curve["level"]))
    if not levels:
        return False
    configured = choice["configured_alpha"].iloc[0] if len(choice) else None
    width = PANEL_IN[0] * len(levels)
    fig = new_figure((width, PANEL_IN[1]))
    axes = fig.subplots(1, len(levels), squeeze=False)[0]
    # fixed margins: the panels are all alike
    fig.subplots_adjust(left=0.6 / width, right=0.98, bottom=0.15, top=0.9, wspace=0.3)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, level in zip(axes, levels, strict=True):
        sub = curve[curve.level == level]
        for k, aspect in enumerate(dict.fromkeys(sub["aspect"])):
            color = colors[k % len(colors)]
            for split, line_style in (("dev", "-"), ("test", "--")):
                line = sub[(sub.aspect == aspect) & (sub.split == split)]
                label = f"{aspect.removeprefix('human_')} ({split})"
                ax.plot(line["alpha"], line["value"], line_style, color=color, label=label)
            pick = choice[(choice.level == level) & (choice.aspect == aspect)]
            if len(pick) and np.isfinite(pick["chosen_alpha"].iloc[0]):
                chosen = pick.iloc[0]
                ax.plot([chosen["chosen_alpha"]], [chosen["test"]], "o", color=color, markersize=6)
        if configured is not None:
            ax.axvline(float(configured), color="0.6", linestyle=":", linewidth=1)
        plain_y(ax)
        set_title(ax, f"iBLEU vs humans, {level} level")
        ax.set_xlabel("α (dot: chosen on dev, shown on test)")
        ax.set_ylabel(sub["coefficient"].iloc[0] if len(sub) else "")
        ax.legend(fontsize=7)
    save_figure(fig, path)
    return True
