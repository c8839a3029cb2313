"""Policy comparison and Delta-space figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simspec.analysis.delta import DeltaPoints, completed, control_failure
from simspec.analysis.results import RunResult
from simspec.plots import PALETTE, new_figure, save


def policy_bars_figure(result: RunResult) -> Any:
    """Speedup over plain decoding per policy: the baseline grey, the oracle black."""
    from simspec.plots.layout import BASELINE_COLOR, ORACLE_COLOR

    rows = result.policies
    fig, ax = new_figure(max(6.4, 0.9 * len(rows)), 4.0)
    labels = [r.label for r in rows]
    values = [r.speedup_vs_no_spec for r in rows]
    colors = [
        BASELINE_COLOR if r.is_baseline else ORACLE_COLOR if r.is_oracle else PALETTE[0]
        for r in rows
    ]
    bars = ax.bar(range(len(rows)), values, color=colors)
    for bar, row in zip(bars, rows, strict=True):
        ax.annotate(
            f"{row.speedup_vs_no_spec:.2f}x",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)), labels, rotation=30, ha="right")
    ax.set_ylabel("speedup vs no speculation (TPOT ratio, x)")
    ax.set_title(f"{result.scenario['name']}: speedup per policy (seed {result.seed})")
    return fig


def delta_space(
    points: DeltaPoints, summary: dict[str, Any], path: str | Path, *, svg: bool = False
) -> list[Path]:
    """Save :func:`delta_space_figure` of ``points`` to ``path``."""
    return save(delta_space_figure(points, summary), path, svg=svg)


def delta_space_figure(points: DeltaPoints, summary: dict[str, Any], where: str = "") -> Any:
    """The oracle's candidate extensions in Delta space and how well a line separates them.

    Left: (ΔE[a], ΔE[cost]) with the best line through the origin and the oracle's cost per
    committed token. Right: the ratio ΔE[cost] / ΔE[a] that decides the side of such a line,
    chosen vs rejected, with the same two slopes: the overlap of the two histograms is what the
    line misclassifies. Numbers missing from ``summary`` are computed from ``points``; a failed
    control is written under the panels. ``where`` (a second title line) says which run the
    points come from when there were several.
    """
    full = completed(points, summary)
    new_figure()  # selects the Agg backend and the style
    import matplotlib.pyplot as plt

    plt.close("all")
    colors = PALETTE
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.0, 4.8), dpi=120)
    cost_ms = points.delta_cost_s * 1e3
    groups = (
        (points.chosen, "chosen (oracle extended)", colors[2], "o"),
        (~points.chosen, "rejected (oracle stopped)", colors[3], "x"),
    )
    for mask, label, color, marker in groups:
        left.scatter(
            points.delta_a_expected[mask],
            cost_ms[mask],
            s=10,
            alpha=0.5,
            c=color,
            marker=marker,
            label=label,
        )
    slope_ms = _finite(full.get("fitted_slope_s_per_token")) * 1e3
    g_ms = _finite(full.get("oracle_time_per_token_s")) * 1e3
    xs = np.linspace(0.0, 1.0, 50)
    lines = [("-", 1.2, slope_ms, f"best line through the origin: {slope_ms:.3f} ms per token")]
    if np.isfinite(g_ms):
        lines.append(("--", 1.0, g_ms, f"oracle cost per committed token: {g_ms:.3f} ms"))
    for style, width, slope, label in lines:
        if np.isfinite(slope):
            left.plot(xs, slope * xs, color="black", linestyle=style, linewidth=width, label=label)
    left.set_xlabel("ΔE[a]: probability the extra draft is accepted")
    left.set_ylabel("ΔE[cost]: marginal draft + verify time (ms)")
    left.set_xlim(0, 1)
    left.legend(fontsize=8, loc="upper left")
    left.set_title(
        f"expected form: {_pct(full.get('misclassified_fraction'))} misclassified, "
        f"AUC {_finite(full.get('auc')):.2f}"
    )
    positive = (points.delta_a_expected > 0) & (points.delta_cost_s > 0)
    ratio_ms = np.where(positive, cost_ms / np.where(positive, points.delta_a_expected, 1.0), 1.0)
    beyond = 0
    if positive.any():
        # Ratios beyond 30x the line (near-certain rejections) are left out, and counted.
        top = 30.0 * slope_ms if np.isfinite(slope_ms) and slope_ms > 0 else ratio_ms.max()
        lo = min(float(ratio_ms[positive].min()), 0.5 * top)
        edges = np.logspace(np.log10(lo), np.log10(top), 50)
        shown = positive & (ratio_ms <= top)
        beyond = int((positive & ~shown).sum())
        for mask, label, color, _ in groups:
            right.hist(ratio_ms[mask & shown], bins=edges, color=color, alpha=0.6, label=label)
        right.set_xscale("log")
    for style, width, slope, _ in lines:
        if np.isfinite(slope) and slope > 0:
            right.axvline(slope, color="black", linestyle=style, linewidth=width)
    right.set_xlabel(
        f"ΔE[cost] / ΔE[a]  (ms per expected token; {beyond} beyond 30x the line not shown)"
    )
    right.set_ylabel("candidate extensions")
    right.legend(fontsize=8, loc="upper right")
    random_, shuffled = (
        full.get("control_random_tables_misclassified_fraction"),
        full.get("control_permutation_misclassified_fraction"),
    )
    title = "the ratio that decides the side of a line through the origin"
    if random_ is not None and shuffled is not None:
        title = f"controls: random cost tables {_pct(random_)}, shuffled labels {_pct(shuffled)}"
        title += " misclassified"
    right.set_title(title, fontsize=10)
    for ax_ in (left, right):
        ax_.grid(True, alpha=0.3)
    title = "Delta space of the oracle's decisions"
    # above the panels' own titles (the saved figure grows to hold it)
    fig.suptitle(f"{title}\n{where}" if where else title, y=0.99, va="bottom")
    failure = control_failure(full)
    if failure:
        fig.text(0.5, -0.02, failure, ha="center", va="top", color="#b00020", fontsize=10)
    return fig


def _finite(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _pct(value: Any) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{100 * value:.1f} %"
