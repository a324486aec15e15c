"""report.html's tables, rendered by pandas' ``Styler``: each column has one precision (scores
of 10 or more, BLEU-like 0-100 scales: one decimal; 0-1 scales: three; counts, ranks and
clusters: integers), the index hidden, every text escaped."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any

import pandas as pd
from markupsafe import Markup

from paraeval.pipeline.report.answers import Agreement, ranked_columns, sacrebleu_p
from paraeval.pipeline.report.plots import AVERAGES, FigureStyle

if TYPE_CHECKING:
    from paraeval.pipeline.stages.evaluation import Evaluation

INTEGER_COLUMNS = frozenset({"n", "rank", "cluster", "seed"})
# a table of more columns is split into several (1,400 px hold about ten)
MAX_COLUMNS = 10
DASH = "–"
# text columns aligned right like the numbers they hold
RIGHT_ALIGNED = ("p ", "interval")
# each table's own id in the page (Styler's CSS selects its cells by it)
_IDS = itertools.count(1)


def digits(values: pd.Series) -> int:
    """One decimal for a column reaching 10 (a 0-100 scale), three otherwise."""
    finite = pd.to_numeric(values, errors="coerce").abs()
    finite = finite[finite.map(math.isfinite)]
    return 1 if len(finite) and finite.max() >= 10 else 3


def _is_count(name: str, values: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(values) or (
        (name in INTEGER_COLUMNS or name.startswith("n_")) and pd.api.types.is_numeric_dtype(values)
    )


def _number(d: int, signed: bool = False) -> Callable[[object], str]:
    sign = "+" if signed else ""

    def fmt(v: object) -> str:
        f = float(v)  # type: ignore[arg-type]
        if not math.isfinite(f):
            return DASH
        # a value that rounds to zero is written without a sign ("-0.0" reads as a typo)
        return f"{0.0 if round(f, d) == 0 else f:{sign}.{d}f}"

    return fmt


def _integer(v: object) -> str:
    f = float(v)  # type: ignore[arg-type]
    return DASH if not math.isfinite(f) else str(round(f))


def _formatter(name: str, values: pd.Series, signed: bool) -> Callable[[object], str] | None:
    if pd.api.types.is_bool_dtype(values):
        return lambda v: "yes" if v else "no"
    if _is_count(name, values):
        return _integer
    if pd.api.types.is_numeric_dtype(values):
        return _number(digits(values), signed)
    return None


def table(
    frame: pd.DataFrame,
    signed: frozenset[str] = frozenset(),
    css: str = "",
    right: frozenset[str] = frozenset(),
) -> Markup:
    """``frame`` as an HTML table, its index hidden; the columns in ``signed`` with their sign,
    names (text but intervals, p-values and the columns in ``right``) aligned left."""
    formats: dict[Any, str | Callable[[object], str] | None] = {
        c: f for c in frame.columns if (f := _formatter(str(c), frame[c], c in signed)) is not None
    }
    names: list[Hashable] = [
        c
        for c in frame.columns
        if not pd.api.types.is_numeric_dtype(frame[c])
        and not pd.api.types.is_bool_dtype(frame[c])
        and not str(c).startswith(RIGHT_ALIGNED)
        and c not in right
    ]
    styler = frame.style.format(formats, na_rep=DASH, escape="html").hide(axis="index")
    styler = styler.set_properties(subset=names, **{"text-align": "left"})
    styler = styler.set_table_styles(
        {c: [{"selector": "th", "props": "text-align: left"}] for c in names}, overwrite=False
    )
    body = styler.to_html(
        table_uuid=f"t{next(_IDS)}", table_attributes=f'class="{css}"' if css else None
    )
    return Markup(f'<div class="scroll">{body}</div>')


def with_interval(
    frame: pd.DataFrame, value: str, signed: bool = False, name: str = "interval"
) -> pd.DataFrame:
    """``ci_low``/``ci_high`` as one column ``[low, high]`` at ``value``'s precision."""
    fmt = _number(digits(frame[value]), signed)
    cells = [
        f"[{fmt(lo)}, {fmt(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else DASH
        for lo, hi in zip(
            frame["ci_low"].astype(float), frame["ci_high"].astype(float), strict=True
        )
    ]
    at = frame.columns.get_loc("ci_low")
    out = frame.drop(columns=["ci_low", "ci_high"])
    out.insert(int(at), name, cells)  # type: ignore[arg-type]
    return out


def interval_cells(
    values: pd.Series, lows: pd.Series, highs: pd.Series, fmt: Callable[[object], str]
) -> list[str]:
    """``value [low, high]`` cells: the value alone without an interval, a dash without it."""
    return [
        DASH
        if not math.isfinite(v)
        else fmt(v)
        + (f" [{fmt(lo)}, {fmt(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else "")
        for v, lo, hi in zip(
            values.astype(float), lows.astype(float), highs.astype(float), strict=True
        )
    ]


def _chunks(columns: list[str], size: int = MAX_COLUMNS) -> Iterator[list[str]]:
    parts = max(1, math.ceil(len(columns) / size))
    step = math.ceil(len(columns) / parts) if columns else 1
    for i in range(0, len(columns), step):
        yield columns[i : i + step]


def system_tables(ev: Evaluation, style: FigureStyle) -> list[tuple[str, Markup]]:
    """system_scores.csv as readable tables: each metric group, then the averages with the mean
    human ratings and the comparison's columns."""
    systems = ev.systems
    info = ev.aggregated.columns if ev.aggregated is not None else {}
    groups: dict[str, list[str]] = {}
    for c in systems.columns:
        if c in info and info[c].group != "average" and systems[c].notna().any():
            groups.setdefault(info[c].group, []).append(c)
    summary = [c for c in AVERAGES if c in systems.columns]
    summary += [c for c in systems.columns if c.startswith("human_")]
    summary += [c for c in systems.columns if c not in info and c not in summary]
    summary = [c for c in summary if systems[c].notna().any()]
    out = []
    for title, columns in [("Averages, human ratings and counts", summary), *groups.items()]:
        parts = list(_chunks([c for c in columns if c != "n_items"] or columns))
        for i, part in enumerate(parts, 1):
            frame = systems[part].copy()
            frame.columns = [style.label(str(c)).removeprefix("human_") for c in part]
            frame.insert(0, "system", [str(s) for s in systems.index])
            out.append(
                (title + (f" ({i} of {len(parts)})" if len(parts) > 1 else ""), table(frame))
            )
    return out


def correlation_tables(
    ev: Evaluation, headline: str, style: FigureStyle
) -> list[tuple[str, Markup]]:
    """Per coefficient (the headline first) and aspect: every metric at every level, ``value
    [interval]``, with the number of items or systems each level rests on."""
    corr = ev.correlations
    if corr.empty:
        return []
    order = [headline] + [c for c in dict.fromkeys(corr["coefficient"]) if c != headline]
    out = []
    for coefficient in order:
        for aspect, sub in corr[corr["coefficient"] == coefficient].groupby("aspect", sort=False):
            fmt = _number(3, signed=True)
            sub = sub.assign(cell=interval_cells(sub["value"], sub["ci_low"], sub["ci_high"], fmt))
            wide = sub.pivot_table(
                index="metric", columns="level", values="cell", aggfunc="first", sort=False
            )
            ns = sub.groupby("level", sort=False)["n"].max() if "n" in sub else None
            wide.columns = [
                f"{lv} (n = {int(ns[lv])})" if ns is not None and math.isfinite(ns[lv]) else lv
                for lv in wide.columns
            ]
            frame = wide.reset_index()
            frame["metric"] = [style.label(str(m)) for m in frame["metric"]]
            title = f"{coefficient}: {str(aspect).removeprefix('human_')}"
            out.append((title, table(frame)))
    return out


def controls_tables(ev: Evaluation, headline: str, style: FigureStyle) -> list[tuple[str, Markup]]:
    """With ``correlation.include_controls=both``, per aspect: each metric's ``headline``
    correlation at every level without the controls and with them."""
    with_controls = ev.correlations_with_controls
    if with_controls.empty:
        return []
    keys = ["metric", "aspect", "level"]
    pick = [*keys, "value", "n"]
    without = ev.correlations[ev.correlations["coefficient"] == headline][pick]
    both = without.merge(
        with_controls[with_controls["coefficient"] == headline][pick],
        on=keys,
        suffixes=(" without", " with"),
        sort=False,
    )
    out = []
    for aspect, sub in both.groupby("aspect", sort=False):
        frame = pd.DataFrame(
            {"metric": [style.label(str(m)) for m in dict.fromkeys(sub["metric"])]}
        )
        for level, rows in sub.groupby("level", sort=False):
            rows = rows.set_index("metric").reindex(list(dict.fromkeys(sub["metric"])))
            for side in ("without", "with"):
                n = pd.to_numeric(rows[f"n {side}"], errors="coerce").max()
                label = f"{level} {side}" + (f" (n = {int(n)})" if math.isfinite(n) else "")
                frame[label] = rows[f"value {side}"].to_numpy(dtype=float)
        out.append(
            (str(aspect).removeprefix("human_"), table(frame, signed=frozenset(frame.columns[1:])))
        )
    return out


def comparison_tables(ev: Evaluation, style: FigureStyle) -> list[tuple[str, Markup]]:
    """system_comparison.csv, one small table per compared column (its own precision)."""
    if ev.compared is None or ev.compared.table.empty:
        return []
    from paraeval.pipeline.report.answers import system_ranking

    metrics = list(dict.fromkeys(ev.compared.table["metric"]))
    first = ranked_columns(ev)
    return [
        (style.label(m), table(with_interval(system_ranking(ev, m), "score")))
        for m in [*first, *(m for m in metrics if m not in first)]
    ]


def agreement_table(agree: Agreement, aspect: str, style: FigureStyle, best: bool) -> Markup:
    """One aspect's metrics ranked by their agreement: the answer's top (``best``) or all of them
    with the significance test's p-values (sacrebleu's format)."""
    frame = agree.best(aspect) if best else agree.by_aspect[aspect]
    frame = with_interval(frame.drop(columns=["agreement"]), "value", signed=True)
    frame.insert(0, "rank", range(1, len(frame) + 1))
    frame["metric"] = [style.label(str(m)) for m in frame["metric"]]
    for c in ("p vs best", "p vs next"):
        if c in frame:
            frame[c] = [sacrebleu_p(p, agree.alpha) for p in frame[c]]
    if best:
        frame = frame.drop(columns=[c for c in ("p vs best", "p vs next", "n") if c in frame])
    if frame["cluster"].isna().all():  # no significance test was run
        frame = frame.drop(columns=["cluster"])
    frame = frame.rename(columns={"value": agree.coefficient})
    return table(frame, signed=frozenset({agree.coefficient}))


def human_table(ev: Evaluation) -> Markup | None:
    if ev.humans.empty:
        return None
    frame = ev.humans.copy()
    frame["aspect"] = frame["aspect"].astype(str).str.removeprefix("human_")
    return table(frame)


def signature_table(ev: Evaluation) -> Markup:
    frame = ev.signature_table()[["column", "group", "higher_is_better", "signature"]]
    return table(frame, css="signatures")


def paraphrase_table(ev: Evaluation) -> Markup | None:
    """The headline table: a row per system (the controls last, labelled), each measure with
    its interval, the paraphrase score's cluster, the copy rate and the human ratings."""
    view = ev.paraphrase
    if view is None:
        return None
    t = view.table
    frame = pd.DataFrame({"system": t["system"].astype(str)})
    frame["role"] = [
        "control" if c else ("frontier" if f else "")
        for c, f in zip(t["control"], t["frontier"], strict=True)
    ]
    measures = ["adequacy", "diversity", "edit_distance", "paraphrase"]
    shown = []
    for m in [m for m in measures if m in t]:
        name = view.paraphrase if m == "paraphrase" else m.replace("_", " ")
        fmt = _number(digits(t[m]))
        frame[name] = interval_cells(t[m], t[f"{m}_low"], t[f"{m}_high"], fmt)
        shown.append(name)
    if "cluster" in t:
        frame["cluster"] = t["cluster"].to_numpy()
    frame["copy rate"] = [f"{v:.0%}" if math.isfinite(v) else DASH for v in t["copy_rate"]]
    for c in [c for c in t.columns if str(c).startswith("human_")]:
        frame[str(c).removeprefix("human_")] = t[c].to_numpy()
    return table(frame, css="paraphrase", right=frozenset([*shown, "copy rate"]))
