"""Figures of a sweep folder (``simspec plot DIR``).

Each figure is drawn when the sweep's axes allow it:

* ``speedup-vs-batch``: mean speedup over plain decoding against the batch size
  (``workload.concurrency``), one line per case/model and policy, with 95 % CIs;
* ``policies``: mean TPOT per policy at each point, with 95 % CIs and the oracle's bar hatched;
* ``unique-experts``: U(T) of the first model: independent routing vs the overlap predictions
  (Markov, multi-lag IPF) vs the Monte-Carlo sampler;
* ``delta-space``: the oracle's Delta-space points of the first point that has them.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from simspec.plots import PALETTE, new_figure, save

BATCH = "workload.concurrency"


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _num(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def _axes(rows: list[dict[str, str]]) -> list[str]:
    fixed = {"case", "policy", "replications"}
    return [k for k in rows[0] if "." in k and k not in fixed] if rows else []


def plot_folder(folder: Path, out: Path) -> list[Path]:
    """Draw every applicable figure of ``folder`` into ``out`` (PNG and SVG)."""
    rows = _read(folder / "summary.csv")
    written: list[Path] = []
    if rows and BATCH in rows[0]:
        written += speedup_vs_batch(rows, out / "speedup-vs-batch.png")
    if rows:
        written += policy_comparison(rows, out / "policies.png")
    written += unique_experts_of_sweep(folder, rows, out / "unique-experts.png")
    deltas = sorted((folder / "delta").glob("*.npz")) if (folder / "delta").exists() else []
    if deltas:
        from simspec.analysis.delta import DeltaPoints
        from simspec.plots.policies import delta_space

        with np.load(deltas[0]) as data:
            points = DeltaPoints(**{k: data[k] for k in data.files})
        slope = _slope(points)
        written += delta_space(points, slope, out / "delta-space.png", svg=True)
    return written


def unique_experts_of_sweep(folder: Path, rows: list[dict[str, str]], path: Path) -> list[Path]:
    """U(T) of the sweep's first model: independent vs overlap predictions vs sampled."""
    import json

    from simspec import rng
    from simspec.config.scenario import scenario_from_dict
    from simspec.plots.routing import plot_unique_experts
    from simspec.routing.ipf import unique_curves
    from simspec.routing.samplers import sampled_unique_curve
    from simspec.simulate import build_setup

    first_case = rows[0]["case"] if rows else ""
    records = [
        json.loads(p.read_text(encoding="utf-8")) for p in (folder / "points").glob("*.json")
    ]
    records = [r for r in records if r["case"] == first_case and r["replication"] == 0]
    if not records:
        return []
    records.sort(key=lambda r: json.dumps(r["values"], sort_keys=True))
    scenario = scenario_from_dict(records[0]["results"]["scenario"], str(folder))
    refs = build_setup(scenario).references
    if not refs.num_experts:
        return []
    tokens = 12
    true, _ = scenario.routing.layer_profiles(refs.num_layers)
    predicted = unique_curves(refs.popularity, true, tokens)
    sampled = sampled_unique_curve(
        refs.popularity, true, tokens, 1, 200, rng.stream(scenario.seed, "routing", 10**6)
    )
    title = f"{scenario.model.target}: unique experts per layer vs tokens per sequence"
    return plot_unique_experts(
        path,
        np.arange(1, tokens + 1),
        predicted,
        refs.shape.experts_per_token,
        measured={"sampled": sampled},
        title=title,
        svg=True,
    )


def _slope(points: Any) -> dict[str, Any]:
    from simspec.analysis.delta import fit_slope

    slope, violations = fit_slope(points.delta_a_expected, points.delta_cost_s, points.chosen)
    return {"fitted_slope_s_per_token": slope, "fit_violations": violations}


def speedup_vs_batch(rows: list[dict[str, str]], path: Path) -> list[Path]:
    """Speedup vs batch size, one line per (case, other axes, policy)."""
    others = [k for k in _axes(rows) if k != BATCH]
    series: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for row in rows:
        if row["policy"] in ("no-spec", "fixed-0"):
            continue
        parts = [row["case"]] if row["case"] else []
        parts += [f"{k.split('.')[-1]}={row[k]}" for k in others]
        parts.append(row["policy"])
        series[" · ".join(parts)].append(
            (
                _num(row[BATCH]),
                _num(row["speedup_vs_no_spec"]),
                _num(row.get("speedup_vs_no_spec_ci95", "nan")),
            )
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
    ticks = sorted({_num(r[BATCH]) for r in rows})
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("batch size (concurrent requests)")
    ax.set_ylabel("speedup vs no speculation (x)")
    ax.legend(fontsize=7, ncol=2 if len(series) > 8 else 1, loc="best")
    return save(fig, path, svg=True)


def policy_comparison(rows: list[dict[str, str]], path: Path, max_points: int = 6) -> list[Path]:
    """Mean TPOT per policy with 95 % CIs at up to ``max_points`` sweep points."""
    axes = _axes(rows)
    points: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        key = (
            " · ".join(
                ([row["case"]] if row["case"] else [])
                + [f"{k.split('.')[-1]}={row[k]}" for k in axes]
            )
            or "base"
        )
        points[key].append(row)
    keys = list(points)[:max_points]
    policies = list(dict.fromkeys(r["policy"] for k in keys for r in points[k]))
    fig, ax = new_figure(max(6.4, 1.2 * len(keys) * max(1, len(policies)) / 3), 4.6)
    width = 0.8 / max(len(policies), 1)
    for j, policy in enumerate(policies):
        xs, ys, es = [], [], []
        for i, key in enumerate(keys):
            found = [r for r in points[key] if r["policy"] == policy]
            if not found:
                continue
            row = found[0]
            xs.append(i + (j - (len(policies) - 1) / 2) * width)
            ys.append(_num(row["tpot_ms"]))
            ci = _num(row.get("tpot_ms_ci95", "nan"))
            es.append(0.0 if math.isnan(ci) else ci)
        bars = ax.bar(
            xs, ys, width=width, yerr=es, capsize=2, label=policy, color=PALETTE[j % len(PALETTE)]
        )
        if policy == "oracle":
            for bar in bars:
                bar.set_hatch("//")
    ax.set_xticks(range(len(keys)), keys, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("TPOT (ms, mean over replications, 95 % CI)")
    ax.legend(fontsize=7, ncol=2)
    return save(fig, path, svg=True)


def speedup_by_case(folders: list[Path], labels: list[str], path: Path) -> list[Path]:
    """One panel per case (model): speedup vs batch size, one line per sweep folder.

    Used to set two variants of a study side by side, e.g. the prior-work prediction against the
    full model. Needs ``workload.concurrency`` on the grid.
    """
    import matplotlib.pyplot as plt

    tables = [_read(f / "summary.csv") for f in folders]
    cases = list(dict.fromkeys(r["case"] for t in tables for r in t))
    cols = min(5, len(cases))
    nrows = math.ceil(len(cases) / cols)
    new_figure()  # backend and style
    plt.close("all")
    fig, axes = plt.subplots(
        nrows, cols, figsize=(3.0 * cols, 2.6 * nrows), dpi=120, sharex=True, squeeze=False
    )
    for ax, case in zip(axes.ravel(), cases, strict=False):
        for n, (rows, label) in enumerate(zip(tables, labels, strict=True)):
            pts = sorted(
                (_num(r[BATCH]), _num(r["speedup_vs_no_spec"]))
                for r in rows
                if r["case"] == case and r["policy"] not in ("no-spec", "fixed-0")
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
        ticks = sorted({_num(r[BATCH]) for t in tables for r in t})[::2]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_title(case, fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(cases) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("batch size", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("speedup (x)", fontsize=8)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return save(fig, path, svg=True)
