"""Policy comparison and Delta-space figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from simspec.analysis.delta import DeltaPoints
from simspec.analysis.results import RunResult
from simspec.plots import PALETTE, new_figure, save


def policy_bars(result: RunResult, path: str | Path, *, svg: bool = False) -> list[Path]:
    """Speedup over plain decoding per policy, the oracle's bar hatched."""
    rows = result.policies
    fig, ax = new_figure(max(6.4, 0.9 * len(rows)), 4.0)
    labels = [r.label for r in rows]
    values = [r.speedup_vs_no_spec for r in rows]
    colors = [PALETTE[3] if r.is_oracle else PALETTE[0] for r in rows]
    bars = ax.bar(range(len(rows)), values, color=colors)
    for bar, row in zip(bars, rows, strict=True):
        if row.is_oracle:
            bar.set_hatch("//")
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
    ax.set_title(result.scenario["name"])
    return save(fig, path, svg=svg)


def delta_space(
    points: DeltaPoints, summary: dict[str, Any], path: str | Path, *, svg: bool = False
) -> list[Path]:
    """The oracle's candidate extensions in Delta space, expected and hindsight forms.

    Left: (ΔE[a], ΔE[cost]) with the fitted boundary through the origin and the oracle's time
    per token. Right: for the binding decisions, the slack Δcost − Δa·[V(i+k+1) − V(i+k+2)]
    (cost minus hindsight value of the extra token): optimality puts every chosen extension at
    or below 0 and every rejected one at or above 0.
    """
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
    slope_ms = summary.get("fitted_slope_s_per_token", 0.0) * 1e3
    xs = np.linspace(0.0, 1.0, 50)
    left.plot(
        xs,
        slope_ms * xs,
        color="black",
        linewidth=1.2,
        label=f"fitted boundary: {slope_ms:.3f} ms per token",
    )
    g = summary.get("oracle_time_per_token_s", 0.0) * 1e3
    left.plot(
        xs,
        g * xs,
        color="black",
        linestyle="--",
        linewidth=1.0,
        label=f"oracle time per token: {g:.3f} ms",
    )
    left.set_xlabel("ΔE[a]: probability the extra draft is accepted")
    left.set_ylabel("ΔE[cost]: marginal draft + verify time (ms)")
    left.set_xlim(0, 1)
    left.legend(fontsize=8, loc="upper left")
    left.set_title("expected form")
    bind = points.binding
    slack_ms = (points.delta_cost_s - points.delta_a * points.local_slope_s) * 1e3
    edges = np.linspace(
        float(slack_ms[bind].min(initial=-1.0)), float(slack_ms[bind].max(initial=1.0)), 60
    )
    for mask, label, color, _ in groups:
        right.hist(slack_ms[mask & bind], bins=edges, color=color, alpha=0.7, label=label)
    right.axvline(0.0, color="black", linewidth=1.0)
    right.set_yscale("log")
    right.set_xlabel("Δcost − Δa·[V(i+k+1) − V(i+k+2)]  (ms; < 0 pays off in hindsight)")
    right.set_ylabel("binding decisions")
    right.legend(fontsize=8, loc="upper right")
    right.set_title(
        f"hindsight local condition: {summary.get('local_condition_violations', 0)} violations"
    )
    for ax_ in (left, right):
        ax_.grid(True, alpha=0.3)
    fig.suptitle("Delta space of the oracle's decisions")
    return save(fig, path, svg=svg)
