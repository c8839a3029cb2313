"""Figures of a sweep folder (``simspec plot DIR``), drawn from its result objects.

The folder is read back with :func:`simspec.sweep.points.read_sweep` (each point's
:class:`~simspec.analysis.results.RunResult`, in the sweep's order) and summarised with
:func:`simspec.sweep.summary.summarize`; the axes are the keys the points set, and the
baseline and the oracle are the rows marked ``is_baseline`` and ``is_oracle``. Keys that vary
together with another one (an axis of tables) add no line and no label
(:func:`simspec.plots.layout.free_keys`). Each figure is drawn when the sweep's axes allow it:

* ``speedup-vs-batch``: mean speedup over plain decoding against the batch size
  (``workload.concurrency``), one line per case and policy (and free axis), with 95 % CIs; one
  panel per case once a single panel would hold more than :data:`MAX_LINES` lines (one case:
  one panel per value of the other axes, a line per policy);
* ``speedup-vs-<axis>``: the same against every other numeric axis (``acceptance.alpha``,
  ``routing.overlap``, ...);
* ``policies``: mean TPOT per policy at every point, one panel per case
  (:mod:`simspec.plots.comparison`);
* ``unique-experts``: U(T) of the first case: independent routing vs the overlap predictions
  (Markov, multi-lag IPF) vs the Monte-Carlo sampler, its popularity and overlaps in the title;
* ``delta-space``: the oracle's Delta-space points of the first point that has them (in the
  sweep's order), named in the title, with its controls and how many points failed them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simspec.errors import InputError
from simspec.plots import pyplot, save
from simspec.plots.comparison import policy_comparison_figure
from simspec.plots.layout import (
    BATCH,
    cases,
    describe,
    free_keys,
    grid_shape,
    line_colors,
    policy_styles,
)
from simspec.plots.routing import unique_experts_of_sweep
from simspec.sweep.points import axes, read_sweep
from simspec.sweep.summary import PolicySummary, summarize

__all__ = [
    "BATCH",
    "MAX_LINES",
    "plot_folder",
    "policy_comparison_figure",
    "speedup_by_case",
    "speedup_by_case_figure",
    "speedup_vs_batch_figure",
    "unique_experts_of_sweep",
]

#: Most lines one panel of speedup vs batch holds before it splits into one panel per case.
MAX_LINES = 10
_MARKERS = "os^vD<>p*h"
_STYLES = ("-", "--", ":", "-.")


def _num(value: Any) -> float:
    """An axis value as a number (nan when a point does not set it or it is not numeric)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def plot_folder(folder: Path, out: Path) -> list[Path]:
    """Draw every applicable figure of ``folder`` into ``out`` (PNG and SVG)."""
    points = read_sweep(folder)
    rows = summarize(points)
    written: list[Path] = []
    numeric = numeric_axes(points)
    given = [BATCH] if BATCH in numeric else []
    # one figure per independent axis: a key set with the batch (an axis of tables) adds none
    for axis in given + [a for a in free_keys(rows, given) if a in numeric]:
        name = "batch" if axis == BATCH else axis
        figure = speedup_vs_batch_figure(rows, axis)
        written += save(figure, out / f"speedup-vs-{name}.png", svg=True)
    if rows:
        written += save(policy_comparison_figure(rows), out / "policies.png", svg=True)
    written += unique_experts_of_sweep(points, out / "unique-experts.png")
    with_delta = [p for p in points if p.delta_path is not None]
    if with_delta:
        written += save(delta_space_of_sweep(with_delta), out / "delta-space.png", svg=True)
    return written


def delta_space_of_sweep(points: Sequence[Any]) -> Any:
    """The Delta-space figure of the first of ``points`` (sweep points with the oracle, in the
    sweep's order), with the analysis saved with it (controls included, so a failed control is
    flagged), naming that point and counting the points whose analysis failed its control."""
    from simspec.analysis.delta import control_failure
    from simspec.plots.policies import delta_space_figure

    shown = points[0]
    delta = shown.delta_points()
    assert delta is not None
    oracle = shown.result.oracle
    summary = dict(oracle.delta) if oracle is not None and oracle.delta else _slope(delta)
    values = [f"{k}={v}" for k, v in shown.values.items()]
    replications = 1 + max(p.replication for p in points)
    name = ", ".join(
        ([shown.case] if shown.case else [])
        + values
        + [f"replication {shown.replication + 1} of {replications}"]
    )
    failed = sum(
        1
        for p in points
        if p.result.oracle is not None and control_failure(dict(p.result.oracle.delta))
    )
    where = f"sweep point {name} (first of {len(points)} with the oracle"
    where += f"; {failed} of {len(points)} failed the control)" if failed else ")"
    return delta_space_figure(delta, summary, where)


def numeric_axes(points: Sequence[Any]) -> list[str]:
    """The sweep's axes whose values are all numbers, in the sweep's order (batch first)."""
    found = []
    for axis in axes(points):
        values = [p.values.get(axis) for p in points if axis in p.values]
        numbers = [_num(v) for v in values if not isinstance(v, bool)]
        numeric = len(numbers) == len(values) and not any(map(math.isnan, numbers))
        if numeric and len(set(numbers)) > 1:
            found.append(axis)
    return sorted(found, key=lambda a: a != BATCH)


def _slope(points: Any) -> dict[str, Any]:
    from simspec.analysis.delta import fit_slope

    slope, violations = fit_slope(points.delta_a_expected, points.delta_cost_s, points.chosen)
    return {"fitted_slope_s_per_token": slope, "fit_violations": violations}


def _axis_name(axis: str) -> str:
    return "batch size" if axis == BATCH else axis


def _policy_title(rows: Sequence[PolicySummary], axis: str = BATCH) -> str:
    """'speedup of P' for one policy, else 'speedup'; '(mean of R replications)' when R > 1."""
    policies = list(dict.fromkeys(r.policy for r in rows))
    head = f"speedup of {policies[0]}" if len(policies) == 1 else "speedup"
    reps = max((r.replications for r in rows), default=1)
    tail = f" (mean of {reps} replications, 95 % CI)" if reps > 1 else ""
    return f"{head} over no speculation vs {_axis_name(axis)}{tail}"


def _batch_ticks(ax: Any, values: Sequence[float], step: int = 1, axis: str = BATCH) -> None:
    """Ticks at the sweep's values: a log-2 axis for the batch size (and any positive axis
    spanning a factor of 8 or more), else a linear one; at most 12 labels."""
    ticks = sorted({v for v in values if not math.isnan(v)})
    positive = bool(ticks) and ticks[0] > 0
    if axis == BATCH or (positive and ticks[-1] >= 8 * ticks[0]):
        ax.set_xscale("log", base=2)
    step = max(step if len(ticks) > 6 else 1, -(-len(ticks) // 12))  # a few: label them all
    ticks = ticks[::step]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()


def _policy_label(row: PolicySummary) -> str:
    return row.policy


def speedup_vs_batch_figure(rows: Sequence[PolicySummary], axis: str = BATCH) -> Any:
    """Figure: speedup vs ``axis`` (the batch size by default), one line per (case, free axes,
    policy), baseline left out.

    One panel when it holds at most :data:`MAX_LINES` lines, else one panel per case, or (one
    case) one panel per value of the free axes with a line per policy; the legend sits
    outside the data.
    """
    shown = [r for r in rows if not r.is_baseline]
    others = free_keys(shown, [axis])
    case_list = cases(shown)
    several_policies = len({r.policy for r in shown}) > 1

    def line(row: PolicySummary, with_case: bool) -> str:
        parts = [describe(row, others, case=with_case)] if (with_case or others) else []
        parts += [row.policy] if several_policies or not any(parts) else []
        return " · ".join(p for p in parts if p)

    crowded = len({line(r, True) for r in shown}) > MAX_LINES
    if crowded and len(case_list) > 1:  # a panel per case

        def panel_of(row: PolicySummary) -> str:
            return row.case

        def label_of(row: PolicySummary) -> str:
            return line(row, False)

    elif crowded and others:  # one case: a panel per value of the free axes

        def panel_of(row: PolicySummary) -> str:
            return describe(row, others, case=False)

        label_of = _policy_label

    else:

        def panel_of(row: PolicySummary) -> str:
            return ""

        def label_of(row: PolicySummary) -> str:
            return line(row, True)

    panels = list(dict.fromkeys(panel_of(r) for r in shown)) or [""]
    one_panel = panels == [""]
    plt = pyplot()
    nrows, ncols = grid_shape(len(panels))
    size = (7.2, 4.6) if one_panel else (3.2 * ncols, 2.7 * nrows)
    fig, grid = plt.subplots(
        nrows, ncols, figsize=size, dpi=120, squeeze=False, sharex=True, sharey=not one_panel
    )
    labels = list(dict.fromkeys(label_of(r) for r in shown))
    colors = line_colors(len(labels))
    if label_of is _policy_label:  # a line per policy: the policies' own colours (oracle black)
        styles = policy_styles(shown)
        colors = tuple(styles[label].color for label in labels)
    for ax, panel in zip(grid.ravel(), panels, strict=False):
        mine = [r for r in shown if panel_of(r) == panel]
        for label in labels:
            pts = sorted(
                (_num(r.values.get(axis)), r.speedup_vs_no_spec, r.speedup_vs_no_spec_ci95)
                for r in mine
                if label_of(r) == label
            )
            if not pts:
                continue
            x, y, ci = (np.array(v) for v in zip(*pts, strict=True))
            n = labels.index(label)
            # no error bars (not even empty caps) where no interval exists (one replication)
            ax.errorbar(
                x,
                y,
                yerr=None if np.isnan(ci).all() else np.where(np.isnan(ci), 0.0, ci),
                marker=_MARKERS[n % len(_MARKERS)],
                linestyle=_STYLES[(n // len(colors)) % len(_STYLES)],
                markersize=4,
                capsize=2,
                label=label or None,
                color=colors[n],
            )
        ax.axhline(1.0, color="black", linewidth=0.8)
        _batch_ticks(ax, [_num(r.values.get(axis)) for r in shown], 1 if one_panel else 2, axis)
        if panel:
            ax.set_title(panel, fontsize=8)
        ax.grid(True, alpha=0.3)
    for ax in grid.ravel()[len(panels) :]:
        ax.set_visible(False)
    for ax in grid[-1]:
        label = "batch size (concurrent requests)" if axis == BATCH else axis
        ax.set_xlabel(label, fontsize=8 if not one_panel else None)
    for ax in grid[:, 0]:
        ax.set_ylabel("speedup (x)")
    handles, names = grid[0, 0].get_legend_handles_labels()
    if one_panel:
        grid[0, 0].set_title(_policy_title(shown, axis), fontsize=10)
        if names:
            grid[0, 0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    else:
        fig.tight_layout()
        fig.suptitle(_policy_title(shown, axis), fontsize=10, y=1.0, va="bottom")
    if names and not one_panel:
        fig.legend(
            handles, names, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4
        )
    return fig


def speedup_by_case_figure(tables: Sequence[Sequence[PolicySummary]], labels: list[str]) -> Any:
    """One panel per case (model): speedup vs batch size, one line per folder (and policy).

    With one policy per folder the folders differ by colour; with several, each (policy, free
    axes) has its colour and each folder its line style and marker, so points of different
    policies are never joined.
    """
    plt = pyplot()
    shown = [[r for r in t if not r.is_baseline] for t in tables]
    free = [free_keys(t, [BATCH]) for t in shown]
    combos = list(
        dict.fromkeys(
            " · ".join(p for p in (r.policy, describe(r, keys, case=False)) if p)
            for t, keys in zip(shown, free, strict=True)
            for r in t
        )
    )
    case_list = cases(r for t in shown for r in t)
    nrows, ncols = grid_shape(len(case_list))
    fig, grid = plt.subplots(
        nrows, ncols, figsize=(3.0 * ncols, 2.6 * nrows), dpi=120, sharex=True, squeeze=False
    )
    batches = [_num(r.values.get(BATCH)) for t in shown for r in t]
    colors = line_colors(max(len(labels), len(combos)))
    for ax, case in zip(grid.ravel(), case_list, strict=False):
        for n, (rows, keys, label) in enumerate(zip(shown, free, labels, strict=True)):
            for c, combo in enumerate(combos):
                pts = sorted(
                    (_num(r.values.get(BATCH)), r.speedup_vs_no_spec)
                    for r in rows
                    if r.case == case
                    and " · ".join(p for p in (r.policy, describe(r, keys, case=False)) if p)
                    == combo
                )
                if not pts:
                    continue
                x, y = zip(*pts, strict=True)
                ax.plot(
                    x,
                    y,
                    marker="os^D"[n % 4],
                    markersize=3,
                    color=colors[n if len(combos) == 1 else c],
                    linestyle=_STYLES[n % len(_STYLES)],
                    label=label if len(combos) == 1 else f"{label}: {combo}",
                )
        ax.axhline(1.0, color="black", linewidth=0.6)
        _batch_ticks(ax, batches, 2)
        ax.set_title(case, fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=7)
    for ax in grid.ravel()[len(case_list) :]:
        ax.set_visible(False)
    for ax in grid[-1]:
        ax.set_xlabel("batch size", fontsize=8)
    for ax in grid[:, 0]:
        ax.set_ylabel("speedup (x)", fontsize=8)
    fig.tight_layout()
    fig.suptitle(_policy_title([r for t in shown for r in t]), fontsize=10, y=1.0, va="bottom")
    entries: dict[str, Any] = {}
    for ax in grid.ravel():
        for handle, name in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(name, handle)
    if entries:
        fig.legend(
            list(entries.values()),
            list(entries),
            fontsize=8,
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=min(4, len(entries)),
        )
    return fig


def speedup_by_case(folders: list[Path], labels: list[str], path: Path) -> list[Path]:
    """One panel per case (model): speedup vs batch size, one line per sweep folder.

    Used to set two variants of a study side by side, e.g. the prior-work prediction against the
    full model. Needs ``workload.concurrency`` on the grid.
    """
    tables = []
    for folder in folders:
        points = read_sweep(folder)
        if BATCH not in axes(points):
            raise InputError(str(folder), "sweep.grid", f"an axis {BATCH}", "no such axis")
        tables.append(summarize(points))
    return save(speedup_by_case_figure(tables, labels), path, svg=True)
