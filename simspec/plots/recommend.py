"""Speedup against the fixed draft length k, one figure per batch size (``simspec recommend``).

Each fixed k is a point at its mean speedup over k = 0 with its 95 % t interval as an error bar
(:mod:`simspec.analysis.replications`); the recommended k is ringed, and the k within noise of it
are drawn hollow. Two horizontal references: the best online policy (a policy colour, dashed,
its interval shaded) and the hindsight oracle's bound (black, as in every figure of the
project: :mod:`simspec.plots.layout`), so the figure says both "which k" and "how much is left".
"""

from __future__ import annotations

import math
from typing import Any

from simspec.analysis.recommend import BatchRecommendation
from simspec.analysis.replications import Interval
from simspec.plots import new_figure
from simspec.plots.layout import BASELINE_COLOR, ORACLE_COLOR, POLICY_COLORS


def _half(interval: Interval) -> float:
    return 0.0 if math.isnan(interval.half_width) else interval.half_width


def speedup_vs_k_figure(rec: BatchRecommendation, scenario_name: str = "") -> Any:
    """Figure: mean speedup per fixed k with 95 % CIs, the best online policy and the oracle."""
    fig, ax = new_figure(7.4, 3.8)
    ks = [k for k, _ in rec.fixed]
    within = {k for k, _ in rec.runners_up}
    for k, c in rec.fixed:
        hollow = k in within
        ax.errorbar(
            k,
            c.speedup.mean,
            yerr=_half(c.speedup),
            fmt="o",
            color=POLICY_COLORS[0],
            markerfacecolor="white" if hollow else POLICY_COLORS[0],
            capsize=3,
        )
    ax.plot(
        ks,
        [c.speedup.mean for _, c in rec.fixed],
        color=POLICY_COLORS[0],
        linewidth=0.8,
        marker="o",
        label="fixed k (mean, 95 % CI)",
    )
    if within:
        ax.plot([], [], "o", color=POLICY_COLORS[0], markerfacecolor="white", label="within noise")
    best = rec.best.speedup
    ax.plot(rec.best_k, best.mean, "o", markersize=14, markerfacecolor="none", color="black")
    ax.annotate(  # above the error bar and the ring around the best point, never on them
        f"best k = {rec.best_k}: {best.mean:.3f}x",
        (rec.best_k, best.mean + _half(best)),
        textcoords="offset points",
        xytext=(0, 10),
        # at the last k a centred label would run past the axes: end it at the point instead
        ha="right" if rec.best_k == max(k for k, _ in rec.fixed) else "center",
        fontsize=8,
    )
    online = rec.best_online
    if online is not None:
        s = online.speedup
        ax.axhline(s.mean, color=POLICY_COLORS[1], linestyle="--", label=f"{online.label}")
        ax.axhspan(
            s.mean - _half(s),
            s.mean + _half(s),
            color=POLICY_COLORS[1],
            alpha=0.15,
            label=f"{online.label} 95 % CI",
        )
    if rec.oracle is not None:
        ax.axhline(rec.oracle.mean, color=ORACLE_COLOR, label="oracle (bound)")
    ax.axhline(1.0, color=BASELINE_COLOR, linewidth=0.8, label="no speculation")
    ax.set_xticks(ks)
    ax.set_xlabel("fixed draft tokens k")
    ax.set_ylabel("speedup vs no speculation (TPOT ratio, x)")
    title = f"batch {rec.batch}: mean of {rec.replications} replications, 95 % CI"
    ax.set_title(f"{scenario_name} · {title}" if scenario_name else title, fontsize=9)
    # outside the axes: the oracle's and the policy's lines span the whole width
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig
