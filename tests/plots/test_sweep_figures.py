"""Sweep figures, checked on the matplotlib objects (legend texts, lines, colours), not pixels."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.colors import to_hex

from simspec.plots.comparison import policy_comparison_figure
from simspec.plots.layout import BASELINE_COLOR, BATCH, ORACLE_COLOR
from simspec.plots.sweep import MAX_LINES, speedup_by_case_figure, speedup_vs_batch_figure
from simspec.sweep.summary import STATISTICS, PolicySummary

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def summary(
    case: str,
    values: dict[str, Any],
    policy: str,
    *,
    speedup: float = 1.5,
    tpot_ms: float = 3.0,
    baseline: bool = False,
    oracle: bool = False,
) -> PolicySummary:
    stats = dict.fromkeys(STATISTICS, math.nan)
    stats.update(speedup_vs_no_spec=speedup, tpot_ms=tpot_ms)
    return PolicySummary(
        case=case,
        values=values,
        policy=policy,
        is_baseline=baseline,
        is_oracle=oracle,
        replications=1,
        **stats,
    )


def paper_b_rows(cases: int = 10, policies: tuple[str, ...] = ("fixed-3",)) -> list[PolicySummary]:
    """Cases x batch sizes, the batch an axis of tables (num_requests set with concurrency)."""
    rows = []
    for c in range(cases):
        for b in BATCHES:
            values = {BATCH: b, "workload.num_requests": b}
            rows.append(summary(f"model {c}", values, "no-spec", speedup=1.0, baseline=True))
            for j, p in enumerate(policies):
                rows.append(summary(f"model {c}", values, p, speedup=1 + 0.1 * j + 0.01 * b))
    return rows


def legend_texts(fig: Any) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
    return [t.get_text() for lg in legends if lg is not None for t in lg.get_texts()]


def data_lines(fig: Any) -> list[Any]:
    """Drawn lines with more than two points (not the y = 1 rule, not error-bar caps)."""
    return [
        ln
        for ax in fig.axes
        for ln in ax.get_lines()
        if len(ln.get_xdata()) > 2 and ln.get_linestyle() not in ("None", "none", "")
    ]


def test_keys_varying_together_give_one_line_per_case():
    fig = speedup_vs_batch_figure(paper_b_rows())
    texts = legend_texts(fig)
    assert len(texts) == 10  # was 90: num_requests split every point into its own line
    assert not any("num_requests" in t for t in texts)
    assert len(data_lines(fig)) == 10
    for line in data_lines(fig):
        assert list(line.get_xdata()) == list(BATCHES)


def test_ten_models_get_ten_colours_and_no_error_bars_without_intervals():
    fig = speedup_vs_batch_figure(paper_b_rows())  # one replication: no CIs
    (ax,) = fig.axes
    colors = {to_hex(line.get_color()) for line in data_lines(fig)}
    assert len(colors) == 10
    assert not ax.collections  # no error-bar glyphs


def test_too_many_lines_split_into_one_panel_per_case():
    fig = speedup_vs_batch_figure(paper_b_rows(6, ("fixed-1", "fixed-3")))  # 12 lines
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 6
    assert sorted(legend_texts(fig)) == ["fixed-1", "fixed-3"]
    assert len(legend_texts(fig)) <= MAX_LINES
    lines = data_lines(fig)
    assert len(lines) == 12
    assert {ln.axes for ln in lines} == set(panels)


def test_legend_of_one_panel_sits_outside_the_data():
    fig = speedup_vs_batch_figure(paper_b_rows(3))
    (ax,) = fig.axes
    legend = ax.get_legend()
    anchor = legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.x0 >= 1.0  # right of the axes


def test_several_folders_never_join_different_policies():
    # Two policies per folder: each line must be one policy, one point per batch size.
    tables = [paper_b_rows(2, ("fixed-1", "fixed-3")), paper_b_rows(2, ("fixed-1", "fixed-3"))]
    fig = speedup_by_case_figure(tables, ["prior", "full"])
    for line in data_lines(fig):
        x = np.asarray(line.get_xdata(), dtype=float)
        assert (np.diff(x) > 0).all()  # no vertical segment
    assert sorted(legend_texts(fig)) == sorted(
        ["prior: fixed-1", "prior: fixed-3", "full: fixed-1", "full: fixed-3"]
    )
    assert all(ax.get_legend() is None for ax in fig.axes)  # one legend, off the panels


def test_one_policy_per_folder_is_named_by_folder():
    fig = speedup_by_case_figure([paper_b_rows(3), paper_b_rows(3)], ["prior", "full"])
    assert legend_texts(fig) == ["prior", "full"]
    assert len(data_lines(fig)) == 6


def paper_a_rows() -> list[PolicySummary]:
    names = ["fixed-1", "fixed-2", "fixed-3", "fixed-4", "thr-a", "thr-b", "cost_aware"]
    rows = []
    for case in ("30B", "480B"):
        rows.append(summary(case, {}, "no-spec", baseline=True, tpot_ms=4.0, speedup=1.0))
        rows += [summary(case, {}, n, tpot_ms=3.0) for n in names]
        rows.append(summary(case, {}, "oracle", oracle=True, tpot_ms=2.0, speedup=2.0))
    return rows


def _bar_colors(ax: Any) -> list[str]:
    return [to_hex(p.get_facecolor()) for p in ax.patches]


def test_paper_a_policies_no_spec_and_oracle_differ_and_no_legend_over_bars():
    fig = policy_comparison_figure(paper_a_rows())
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["30B", "480B"]
    for ax in panels:
        colors = _bar_colors(ax)
        assert len(colors) == 9
        assert colors[0] == BASELINE_COLOR.lower() and colors[-1] == ORACLE_COLOR.lower()
        assert len(set(colors)) == 9
        assert ax.get_legend() is None  # policies named on the x axis instead
        assert next(t.get_text() for t in ax.get_xticklabels()) == "no-spec"
        assert "2.00x" in [t.get_text() for t in ax.texts]  # the oracle's speedup


def test_policies_figure_covers_every_point():
    fig = policy_comparison_figure(paper_b_rows())  # 90 points, 10 cases
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 10
    for ax in panels:
        assert len(ax.get_xticks()) == len(BATCHES)
        assert len(ax.patches) == 2 * len(BATCHES)
        assert "of" not in ax.get_title()
    assert legend_texts(fig) == ["no-spec", "fixed-3"]


def test_policies_figure_draws_every_point_and_thins_only_the_tick_labels():
    rows = [
        summary("", {"routing.overlap": i / 100}, p, baseline=p == "no-spec")
        for i in range(20)
        for p in ("no-spec", "fixed-3")
    ]
    fig = policy_comparison_figure(rows, max_points=12)
    (ax,) = fig.axes
    assert len(ax.patches) == 40  # every point's bars
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    assert len(labels) <= 12 and labels[0].get_text() == "0.0"
    assert all(t.get_rotation() == 0 for t in labels)
    assert "of 20" not in ax.get_title()


def test_speedup_figure_against_another_numeric_axis():
    rows = [summary("", {"acceptance.alpha": a}, "fixed-3", speedup=1 + a) for a in (0.5, 0.6, 0.7)]
    fig = speedup_vs_batch_figure(rows, "acceptance.alpha")
    (ax,) = fig.axes
    assert ax.get_xlabel() == "acceptance.alpha" and "vs acceptance.alpha" in ax.get_title()
    assert ax.get_xscale() == "linear"
    (line,) = data_lines(fig)
    assert list(line.get_xdata()) == [0.5, 0.6, 0.7]


def test_one_case_with_too_many_lines_splits_by_the_other_axis():
    """12 lines of one case (3 batch sizes x 4 policies) against alpha: a panel per batch size,
    a line per policy in the policy's colour (the oracle black), every alpha value labelled."""
    policies = ("fixed-2", "fixed-4", "cost_aware", "oracle")
    rows = [
        summary(
            "", {BATCH: b, "acceptance.alpha": a}, p, speedup=1 + a + 0.1 * j, oracle=p == "oracle"
        )
        for b in (1, 4, 16)
        for a in (0.5, 0.8)
        for j, p in enumerate(policies)
    ]
    assert len(policies) * 3 > MAX_LINES
    fig = speedup_vs_batch_figure(rows, "acceptance.alpha")
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["concurrency=1", "concurrency=4", "concurrency=16"]
    assert legend_texts(fig) == list(policies)
    for ax, b in zip(panels, (1, 4, 16), strict=True):
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0.5", "0.8"]
        bars = ax.containers  # one errorbar container per line: its label and data line
        assert [c.get_label() for c in bars] == list(policies)
        for c, j in zip(bars, range(len(policies)), strict=True):
            assert list(c.lines[0].get_ydata()) == [1 + a + 0.1 * j for a in (0.5, 0.8)], b
        assert to_hex(bars[-1].lines[0].get_color()) == ORACLE_COLOR.lower()


def test_panels_of_a_few_batch_sizes_label_every_one():
    rows = [
        summary(f"model {c}", {BATCH: b}, p, speedup=1.2)
        for c in range(4)
        for b in (1, 8, 64)
        for p in ("fixed-1", "fixed-2", "fixed-3")
    ]
    fig = speedup_vs_batch_figure(rows)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 4
    for ax in panels:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "8", "64"]
