"""Policy comparison of a sweep: mean TPOT per policy at every point, one panel per case.

Within a panel the points are the combinations of the free axes
(:func:`simspec.plots.layout.free_keys`: keys tied to another axis add no label). A panel with
one point puts the policies on the x axis, each bar annotated with its speedup over plain
decoding; a panel with several points groups the bars by point, with one legend for the figure,
below the panels (never over a bar). Every point is drawn: a panel with many points grows wider
(one panel per row), and beyond :data:`MAX_POINTS` points on a numeric axis only every n-th tick
is labelled, unrotated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simspec.plots import pyplot
from simspec.plots.layout import BATCH, Style, cases, describe, free_keys, grid_shape, policy_styles
from simspec.sweep.summary import PolicySummary

#: Most tick labels one panel's x axis carries (every point is drawn regardless).
MAX_POINTS = 12


def _ci(value: float) -> float:
    return 0.0 if np.isnan(value) else value


def _numeric(labels: Sequence[str]) -> bool:
    try:
        [float(v) for v in labels]
    except ValueError:
        return False
    return True


def policy_comparison_figure(rows: Sequence[PolicySummary], max_points: int = MAX_POINTS) -> Any:
    """Figure: mean TPOT with 95 % CIs per policy at each point, one panel per case."""
    plt = pyplot()
    keys = free_keys(rows)
    styles = policy_styles(rows)
    policies = list(styles)
    panels = cases(rows)
    groups = {
        c: list(dict.fromkeys(describe(r, keys, case=False) for r in rows if r.case == c))
        for c in panels
    }
    most = max(len(g) for g in groups.values())
    bars = most * len(policies)
    width_in = min(14.0, max(3.6, 0.2 * bars + 1.2))
    height_in = 3.8 if most > 1 else 4.4  # room for policy names under the bars
    nrows, ncols = grid_shape(len(panels), 1 if width_in > 7.0 else 3 if most > 1 else 4)
    fig, grid = plt.subplots(
        nrows, ncols, figsize=(width_in * ncols, height_in * nrows), dpi=120, squeeze=False
    )
    for ax, case in zip(grid.ravel(), panels, strict=False):
        shown = groups[case]
        mine = [r for r in rows if r.case == case]
        if len(shown) == 1:
            _one_point(ax, mine, styles)
        else:
            _grouped(ax, mine, shown, keys, styles, policies, max_points)
        title = " · ".join(p for p in (case, shown[0] if len(shown) == 1 else "") if p)
        ax.set_title(title, fontsize=9)
        ax.grid(True, alpha=0.3, axis="y")
        ax.grid(False, axis="x")
    for ax in grid.ravel()[len(panels) :]:
        ax.set_visible(False)
    for ax in grid[:, 0]:
        ax.set_ylabel("TPOT (ms)")
    reps = max((r.replications for r in rows), default=1)
    stats = f"mean of {reps} replications, 95 % CI" if reps > 1 else "one replication"
    fig.tight_layout()
    fig.suptitle(f"time per output token by policy ({stats})", fontsize=10, y=1.0, va="bottom")
    if most > 1:
        handles = [
            plt.Rectangle((0, 0), 1, 1, facecolor=s.color, hatch=s.hatch, edgecolor="white")
            for s in styles.values()
        ]
        fig.legend(
            handles,
            policies,
            fontsize=8,
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            ncol=min(5, len(policies)),
        )
    return fig


def _one_point(ax: Any, rows: Sequence[PolicySummary], styles: dict[str, Style]) -> None:
    """Bars per policy, named on the x axis, annotated with the speedup over plain decoding."""
    x = np.arange(len(rows))
    for i, r in enumerate(rows):
        style = styles[r.policy]
        ax.bar(
            i,
            r.tpot_ms,
            yerr=_ci(r.tpot_ms_ci95) or None,
            capsize=2,
            color=style.color,
            hatch=style.hatch,
            edgecolor="white",
            label=r.policy,
        )
        ax.annotate(
            f"{r.speedup_vs_no_spec:.2f}x",
            (i, r.tpot_ms + _ci(r.tpot_ms_ci95)),
            xytext=(0, 2),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=7,
        )
    ax.set_xticks(x, [r.policy for r in rows], rotation=35, ha="right", fontsize=7)
    ax.set_ylim(0, 1.2 * max((r.tpot_ms + _ci(r.tpot_ms_ci95) for r in rows), default=1.0))
    ax.set_xlabel("bars: TPOT; labels: speedup over no speculation", fontsize=7)


def _grouped(
    ax: Any,
    rows: Sequence[PolicySummary],
    shown: Sequence[str],
    keys: Sequence[str],
    styles: dict[str, Style],
    policies: Sequence[str],
    max_labels: int = MAX_POINTS,
) -> None:
    """Bars grouped by point, one colour per policy; at most ``max_labels`` numeric ticks."""
    width = 0.8 / max(len(policies), 1)
    for j, policy in enumerate(policies):
        xs, ys, es = [], [], []
        for i, name in enumerate(shown):
            found = [
                r for r in rows if r.policy == policy and describe(r, keys, case=False) == name
            ]
            if found:
                xs.append(i + (j - (len(policies) - 1) / 2) * width)
                ys.append(found[0].tpot_ms)
                es.append(_ci(found[0].tpot_ms_ci95))
        style = styles[policy]
        ax.bar(
            xs,
            ys,
            width=width,
            yerr=es if any(es) else None,
            capsize=1.5,
            label=policy,
            color=style.color,
            hatch=style.hatch,
            edgecolor="white",
            linewidth=0.3,
        )
    values = [name.split("=", 1)[1] for name in shown] if len(keys) == 1 else []
    if values and _numeric(values):
        step = -(-len(values) // max_labels)
        ticks = range(0, len(values), step)
        ax.set_xticks(ticks, [values[i] for i in ticks], fontsize=7)
        name = "batch size (concurrent requests)" if keys[0] == BATCH else keys[0]
        ax.set_xlabel(name, fontsize=8)
    else:
        ax.set_xticks(range(len(shown)), shown, rotation=25, ha="right", fontsize=7)
