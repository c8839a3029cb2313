"""The recommendation: best k = argmax of mean speedups, ties, noise, online policies, oracle."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.analysis.recommend import (
    DEFAULT_ONLINE,
    batch_scenario,
    markdown_table,
    online_policy_data,
    recommend,
)
from simspec.analysis.replications import Replicated
from tests.analysis.test_replications import row, run_of
from tests.helpers import tiny


def replicated(by_k: dict[int, np.ndarray], online: dict[str, np.ndarray], oracle: np.ndarray):
    """Replications with fixed k rows (k = 0 the baseline), online rows and the oracle."""
    runs = []
    for r in range(len(oracle)):
        rows = [row(f"fixed-{k}", float(v[r]), k=k, is_baseline=k == 0) for k, v in by_k.items()]
        rows += [row(name, float(v[r])) for name, v in online.items()]
        rows.append(row("oracle", float(oracle[r]), is_oracle=True))
        runs.append(run_of(rows, seed=r))
    return Replicated(tuple(runs))


@pytest.mark.parametrize("seed", range(8))
def test_best_k_is_the_argmax_of_mean_speedups(seed):
    rng = np.random.default_rng(seed)
    reps = 4
    by_k = {0: np.ones(reps)} | {k: rng.uniform(0.8, 1.6, reps) for k in range(1, 6)}
    rec = recommend(replicated(by_k, {}, np.full(reps, 2.0)), batch=8)
    means = [by_k[k].mean() for k in range(6)]
    assert rec.best_k == int(np.argmax(means))
    assert rec.expected_speedup.mean == pytest.approx(max(means))
    assert [k for k, _ in rec.fixed] == list(range(6))
    assert rec.batch == 8 and rec.replications == reps


def test_runners_up_are_the_k_whose_paired_difference_contains_zero():
    text = np.array([1.3, 1.6, 1.2, 1.5, 1.4])  # shared by every k within a replication
    wiggle = np.array([0.004, -0.003, 0.002, -0.004, 0.001])
    by_k = {
        0: np.ones(5),
        1: text - 0.20,  # clearly worse
        2: text + 0.01,  # the best
        3: text + 0.01 + wiggle,  # indistinguishable from k = 2
    }
    rec = recommend(replicated(by_k, {}, text + 0.5), batch=1)
    assert rec.best_k == 2
    assert [k for k, _ in rec.runners_up] == [3]
    assert not dict(rec.fixed)[1].within_noise


def test_ties_go_to_the_smallest_k():
    same = np.array([1.2, 1.3, 1.25])
    rec = recommend(replicated({0: np.ones(3), 1: same, 2: same}, {}, same + 1), batch=1)
    assert rec.best_k == 1


def test_best_online_policy_and_oracle_bound():
    base = np.array([1.2, 1.3, 1.25, 1.22])
    rec = recommend(
        replicated(
            {0: np.ones(4), 1: base},
            {"threshold": base + 0.1, "cost_aware": base + 0.3},
            base + 0.8,
        ),
        batch=32,
    )
    best = rec.best_online
    assert best is not None and best.label == "cost_aware"
    assert best.diff_vs_best.mean == pytest.approx(0.3)
    assert not best.within_noise
    assert rec.oracle is not None and rec.oracle.mean == pytest.approx(base.mean() + 0.8)
    data = rec.to_dict()
    assert data["best_k"] == 1 and data["best_online"] == "cost_aware"
    assert data["oracle_speedup"] == pytest.approx(base.mean() + 0.8)
    table = markdown_table([rec])
    lines = table.splitlines()
    assert len(lines) == 3 and lines[2].startswith("| 32 | 1 | ")
    assert "cost_aware" in lines[2]


def test_batch_scenario_sets_the_batch_and_the_policies():
    scenario = tiny()
    online = online_policy_data(scenario, None)
    assert online == [{"name": name} for name in DEFAULT_ONLINE]
    s = batch_scenario(scenario, 16, 3, online)
    assert s.workload.concurrency == 16 and s.workload.num_requests == 16
    assert [p.label for p in s.policies] == [
        "fixed-0",
        "fixed-1",
        "fixed-2",
        "fixed-3",
        *DEFAULT_ONLINE,
    ]
    small = batch_scenario(scenario, 1, 2, [])
    assert small.workload.concurrency == 1 and small.workload.num_requests == 4
    opened = batch_scenario(tiny("workload.loop='open'"), 8, 1, [])
    assert opened.workload.max_batch_size == 8
    with_own = tiny(policies=[{"name": "fixed", "draft_tokens": 1}, {"name": "threshold"}])
    assert online_policy_data(with_own, None) == [
        {"name": "threshold", "label": "threshold", **with_own.policies[1].params()}
    ]
    assert online_policy_data(with_own, ["cost_aware"]) == [{"name": "cost_aware"}]


def test_the_figure_labels_best_k_above_its_error_bar_and_names_the_band():
    from simspec.plots.recommend import speedup_vs_k_figure

    base = np.array([1.2, 1.3, 1.25, 1.22])
    rec = recommend(
        replicated({0: np.ones(4), 1: base}, {"threshold": base + 0.1}, base + 0.8), batch=8
    )
    fig = speedup_vs_k_figure(rec)
    (ax,) = fig.axes
    (label,) = [t for t in ax.texts if t.get_text().startswith("best k = 1")]
    best = rec.best.speedup
    assert label.xy[1] == pytest.approx(best.mean + best.half_width)
    names = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "threshold 95 % CI" in names


def test_the_figures_legend_hides_no_reference_line():
    """The oracle's and the online policy's horizontal lines span the axes: the legend sits
    right of them."""
    from simspec.plots.recommend import speedup_vs_k_figure

    base = np.array([1.2, 1.3, 1.25, 1.22])
    rec = recommend(
        replicated({0: np.ones(4), 1: base}, {"threshold": base + 0.1}, base + 0.8), batch=8
    )
    fig = speedup_vs_k_figure(rec)
    (ax,) = fig.axes
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # right of the axes, over no line
