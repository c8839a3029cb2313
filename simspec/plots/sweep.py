"""Figures of a sweep folder (``simspec plot DIR``), drawn from its result objects.

The folder is read back with :func:`simspec.sweep.points.read_sweep` (each point's
:class:`~simspec.analysis.results.RunResult`, in the sweep's order) and summarised with
:func:`simspec.sweep.summary.summarize`; the axes are the keys the points set, and the
baseline and the oracle are the rows marked ``is_baseline`` and ``is_oracle``. Each figure is
drawn when the sweep's axes allow it:

* ``speedup-vs-batch``: mean speedup over plain decoding against the batch size
  (``workload.concurrency``), one line per case/model and policy, with 95 % CIs;
* ``policies``: mean TPOT per policy at each point, with 95 % CIs and the oracle's bar hatched;
* ``unique-experts``: U(T) of the first model: independent routing vs the overlap predictions
  (Markov, multi-lag IPF) vs the Monte-Carlo sampler;
* ``delta-space``: the oracle's Delta-space points of the first point that has them.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simspec.errors import InputError
from simspec.plots import PALETTE, new_figure, save
from simspec.sweep.points import PointResult, axes, read_sweep
from simspec.sweep.summary import PolicySummary, summarize

BATCH = "workload.concurrency"


def _num(value: Any) -> float:
    """An axis value as a number (nan when a point does not set it or it is not numeric)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _zero_if_nan(value: float) -> float:
    return 0.0 if math.isnan(value) else value


def _where(s: PolicySummary, keys: Sequence[str]) -> list[str]:
    """Legend parts naming a point: its case and its axis values (last key part = value)."""
    return ([s.case] if s.case else []) + [f"{k.split('.')[-1]}={s.values[k]}" for k in keys]


def plot_folder(folder: Path, out: Path) -> list[Path]:
    """Draw every applicable figure of ``folder`` into ``out`` (PNG and SVG)."""
    points = read_sweep(folder)
    rows = summarize(points)
    written: list[Path] = []
    if rows and BATCH in axes(points):
        written += speedup_vs_batch(rows, out / "speedup-vs-batch.png")
    if rows:
        written += policy_comparison(rows, out / "policies.png")
    written += unique_experts_of_sweep(points, out / "unique-experts.png")
    with_delta = sorted(
        (p for p in points if p.delta_path is not None), key=lambda p: p.result.scenario_digest
    )
    if with_delta:
        from simspec.plots.policies import delta_space

        delta = with_delta[0].delta_points()
        assert delta is not None
        written += delta_space(delta, _slope(delta), out / "delta-space.png", svg=True)
    return written


def _inclusion_probabilities(scenario: Any) -> np.ndarray:
    """Per-layer expert inclusion probabilities p_e of ``scenario``, as its simulation drew them."""
    from simspec import rng
    from simspec.routing.popularity import draw_inclusion_probabilities

    shape = scenario.target.shape
    return draw_inclusion_probabilities(
        scenario.routing,
        shape.num_moe_layers,
        shape.num_experts,
        shape.experts_per_token,
        rng.stream(scenario.seed, "popularity"),
    )


def unique_experts_of_sweep(points: Sequence[PointResult], path: Path) -> list[Path]:
    """U(T) of the sweep's first case: independent vs overlap predictions vs sampled.

    Drawn for the first replication of the point with the smallest axis values (by their JSON
    text), so the figure does not depend on the order of the grid.
    """
    from simspec import rng
    from simspec.config.load import scenario_from_dict
    from simspec.plots.routing import plot_unique_experts
    from simspec.routing.maxent import sampled_unique_curve
    from simspec.routing.predictor import unique_curves

    if not points:
        return []
    first_case = points[0].case
    candidates = [p for p in points if p.case == first_case and p.replication == 0]
    if not candidates:
        return []
    chosen = min(candidates, key=lambda p: json.dumps(dict(p.values), sort_keys=True))
    scenario = scenario_from_dict(chosen.result.scenario, str(chosen.folder))
    shape = scenario.target.shape
    if not shape.num_moe_layers or not shape.num_experts:
        return []
    tokens = 12
    inclusion = _inclusion_probabilities(scenario)
    true, _ = scenario.routing.layer_profiles(shape.num_moe_layers)
    predicted = unique_curves(inclusion, true, tokens)
    sampled = sampled_unique_curve(
        inclusion, true, tokens, 1, 200, rng.stream(scenario.seed, "routing", 10**6)
    )
    title = f"{scenario.model.target}: unique experts per layer vs tokens per sequence"
    return plot_unique_experts(
        path,
        np.arange(1, tokens + 1),
        predicted,
        shape.experts_per_token,
        measured={"sampled": sampled},
        title=title,
        svg=True,
    )


def _slope(points: Any) -> dict[str, Any]:
    from simspec.analysis.delta import fit_slope

    slope, violations = fit_slope(points.delta_a_expected, points.delta_cost_s, points.chosen)
    return {"fitted_slope_s_per_token": slope, "fit_violations": violations}


def _axis_keys(rows: Sequence[PolicySummary]) -> list[str]:
    return list(dict.fromkeys(k for r in rows for k in r.values))


def speedup_vs_batch(rows: Sequence[PolicySummary], path: Path) -> list[Path]:
    """Speedup vs batch size, one line per (case, other axes, policy); no line for the baseline."""
    others = [k for k in _axis_keys(rows) if k != BATCH]
    series: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for row in rows:
        if row.is_baseline:
            continue
        label = " · ".join([*_where(row, others), row.policy])
        series[label].append(
            (_num(row.values[BATCH]), row.speedup_vs_no_spec, row.speedup_vs_no_spec_ci95)
        )
    fig, ax = new_figure(7.2, 4.6)
    markers = "os^vD<>p*h"
    for n, (label, pts) in enumerate(sorted(series.items())):
        pts.sort()
        x, y, ci = (np.array(v) for v in zip(*pts, strict=True))
        style = "-" if n < len(PALETTE) else "--"
        ax.errorbar(
            x,
            y,
            yerr=np.where(np.isnan(ci), 0.0, ci),
            marker=markers[n % len(markers)],
            linestyle=style,
            markersize=4,
            capsize=2,
            label=label,
            color=PALETTE[n % len(PALETTE)],
        )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ticks = sorted({_num(r.values[BATCH]) for r in rows})
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("batch size (concurrent requests)")
    ax.set_ylabel("speedup vs no speculation (x)")
    ax.legend(fontsize=7, ncol=2 if len(series) > 8 else 1, loc="best")
    return save(fig, path, svg=True)


def policy_comparison(rows: Sequence[PolicySummary], path: Path, max_points: int = 6) -> list[Path]:
    """Mean TPOT per policy with 95 % CIs at up to ``max_points`` sweep points."""
    keys = _axis_keys(rows)
    points: dict[str, list[PolicySummary]] = defaultdict(list)
    for row in rows:
        points[" · ".join(_where(row, keys)) or "base"].append(row)
    shown = list(points)[:max_points]
    policies = list(dict.fromkeys(r.policy for k in shown for r in points[k]))
    oracles = {r.policy for k in shown for r in points[k] if r.is_oracle}
    fig, ax = new_figure(max(6.4, 1.2 * len(shown) * max(1, len(policies)) / 3), 4.6)
    width = 0.8 / max(len(policies), 1)
    for j, policy in enumerate(policies):
        xs, ys, es = [], [], []
        for i, key in enumerate(shown):
            found = [r for r in points[key] if r.policy == policy]
            if not found:
                continue
            xs.append(i + (j - (len(policies) - 1) / 2) * width)
            ys.append(found[0].tpot_ms)
            es.append(_zero_if_nan(found[0].tpot_ms_ci95))
        bars = ax.bar(
            xs, ys, width=width, yerr=es, capsize=2, label=policy, color=PALETTE[j % len(PALETTE)]
        )
        if policy in oracles:
            for bar in bars:
                bar.set_hatch("//")
    ax.set_xticks(range(len(shown)), shown, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("TPOT (ms, mean over replications, 95 % CI)")
    ax.legend(fontsize=7, ncol=2)
    return save(fig, path, svg=True)


def speedup_by_case(folders: list[Path], labels: list[str], path: Path) -> list[Path]:
    """One panel per case (model): speedup vs batch size, one line per sweep folder.

    Used to set two variants of a study side by side, e.g. the prior-work prediction against the
    full model. Needs ``workload.concurrency`` on the grid.
    """
    import matplotlib.pyplot as plt

    tables = []
    for folder in folders:
        points = read_sweep(folder)
        if BATCH not in axes(points):
            raise InputError(str(folder), "sweep.grid", f"an axis {BATCH}", "no such axis")
        tables.append(summarize(points))
    cases = list(dict.fromkeys(r.case for t in tables for r in t))
    cols = min(5, len(cases))
    nrows = math.ceil(len(cases) / cols)
    new_figure()  # backend and style
    plt.close("all")
    fig, axes_ = plt.subplots(
        nrows, cols, figsize=(3.0 * cols, 2.6 * nrows), dpi=120, sharex=True, squeeze=False
    )
    for ax, case in zip(axes_.ravel(), cases, strict=False):
        for n, (rows, label) in enumerate(zip(tables, labels, strict=True)):
            pts = sorted(
                (_num(r.values[BATCH]), r.speedup_vs_no_spec)
                for r in rows
                if r.case == case and not r.is_baseline
            )
            if pts:
                x, y = zip(*pts, strict=True)
                ax.plot(
                    x,
                    y,
                    marker="os^D"[n % 4],
                    markersize=3,
                    color=PALETTE[n % len(PALETTE)],
                    linestyle="-" if n == 0 else "--",
                    label=label,
                )
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.set_xscale("log", base=2)
        ticks = sorted({_num(r.values[BATCH]) for t in tables for r in t})[::2]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_title(case, fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=7)
    for ax in axes_.ravel()[len(cases) :]:
        ax.set_visible(False)
    for ax in axes_[-1]:
        ax.set_xlabel("batch size", fontsize=8)
    for ax in axes_[:, 0]:
        ax.set_ylabel("speedup (x)", fontsize=8)
    axes_[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return save(fig, path, svg=True)
