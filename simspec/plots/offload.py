"""Speculation under expert offloading: speedup against the draft length, one curve per host link
bandwidth (or per expert-cache size).

Under offloading a verify pass loads the union of its drafts' experts once, so the best draft
length depends on how slow the link is against the GPU (offload.md, finding 4). The data
(:func:`offload_curves`) come from runs of one scenario with ``[offload]``: for each value of
the varied key (``offload.link_gb_per_s`` or ``offload.cache_experts_per_layer``), the scenario
with fixed-k policies for every draft length, each policy's speedup over plain decoding (mean
TPOT of the run's own no-spec baseline over the policy's: paired, same seed, same routing).
:func:`offload_figure` draws them; ``simspec plot --offload SCENARIO`` and
``python -m studies.offloading --figure DIR`` write the figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simspec.errors import InputError
from simspec.plots import new_figure, save

#: The keys a curve may vary, with the legend's title and each value's label.
VARIED = {
    "offload.link_gb_per_s": ("host link", "{:g} GB/s"),
    "offload.cache_experts_per_layer": ("expert cache", "{:g} per layer"),
}
#: Draft lengths of the default figure.
DRAFT_LENGTHS = (0, 1, 2, 3, 4, 6, 8)


@dataclass(frozen=True)
class OffloadCurves:
    """Speedup over plain decoding per value of ``key`` (rows) and draft length (columns)."""

    title: str
    key: str
    values: tuple[float, ...]
    draft_lengths: tuple[int, ...]
    speedup: tuple[tuple[float, ...], ...]

    def best(self) -> dict[float, int]:
        """Per value, the draft length with the highest speedup (the first of ties)."""
        return {
            v: self.draft_lengths[max(range(len(row)), key=row.__getitem__)]
            for v, row in zip(self.values, self.speedup, strict=True)
        }


def offload_curves(
    scenario: Any,
    key: str,
    values: Sequence[float],
    draft_lengths: Sequence[int] = DRAFT_LENGTHS,
) -> OffloadCurves:
    """Runs ``scenario`` (experts offloaded) once per value of ``key`` with a fixed-k policy per
    draft length; each speedup is the run's no-spec TPOT over the policy's (k = 0: 1)."""
    import simspec

    if key not in VARIED:
        raise InputError("offload_curves", "key", "one of " + ", ".join(VARIED), key)
    if not scenario.offload.enabled:
        expected = 'a scenario whose [offload] experts are "host_pinned" or "host_pageable"'
        raise InputError(scenario.source or "<scenario>", "offload.experts", expected, "gpu")
    ks = sorted({int(k) for k in draft_lengths})
    policies = [{"name": "fixed", "draft_tokens": k} for k in ks if k > 0]
    rows = []
    for value in values:
        run = simspec.run(simspec.with_overrides(scenario, {key: value, "policies": policies}))
        by_k = {0: 1.0}
        for r in run.records():
            if r["policy"].startswith("fixed-"):
                by_k[int(r["policy"].split("-")[1])] = float(r["speedup_vs_no_spec"])
        rows.append(tuple(by_k[k] for k in ks))
    o = scenario.offload
    title = (
        f"{scenario.target.name} on {scenario.gpu.name}, experts in {o.experts}, {o.cache_policy}"
    )
    return OffloadCurves(title, key, tuple(float(v) for v in values), tuple(ks), tuple(rows))


def offload_figure(curves: OffloadCurves) -> Any:
    """Speedup against draft length, one line per value of the varied key (marked at its best
    draft length), the y = 1 rule of plain decoding."""
    fig, ax = new_figure(6.4, 4.2)
    legend, label = VARIED[curves.key]
    best = curves.best()
    for value, row in zip(curves.values, curves.speedup, strict=True):
        (line,) = ax.plot(curves.draft_lengths, row, marker="o", label=label.format(value))
        k = best[value]
        ax.plot([k], [row[curves.draft_lengths.index(k)]], marker="*", ms=14, ls="none",
                color=line.get_color())  # fmt: skip
    ax.axhline(1.0, color="grey", lw=0.8, label="no speculation")
    ax.plot([], [], marker="*", ms=10, ls="none", color="black", label="best k of each curve")
    ax.set_xticks(curves.draft_lengths)  # whole tokens: no half-token ticks
    ax.set_xlabel("draft length k (tokens)")
    ax.set_ylabel("speedup over no speculation (TPOT ratio, x)")
    ax.set_title(curves.title, fontsize=9)
    ax.legend(title=legend)
    return fig


def draw_offload_figure(curves: OffloadCurves, path: str | Path, *, svg: bool = True) -> list[Path]:
    """:func:`offload_figure` written to ``path`` (PNG, and SVG when ``svg``)."""
    return save(offload_figure(curves), path, svg=svg)
