"""Delta-space analysis of the oracle's decisions: closed forms, and a test that can fail."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simspec.analysis import delta, oracle
from simspec.analysis.oracle import RequestTables
from simspec.sim.setup import build_setup
from tests.helpers import tiny


@pytest.fixture(scope="module")
def analysed():
    setup = build_setup(
        tiny(
            "workload.concurrency=1",
            "workload.num_requests=3",
            "workload.output_tokens=150",
            'acceptance.process="bursty"',
        )
    )
    res = oracle.oracle_plan(setup)
    return res, *delta.analyse(res.tables, np.random.default_rng(1))


def _points(ratio, chosen, a=None) -> delta.DeltaPoints:
    """Synthetic points with Δcost = ratio·ΔE[a] (only the fields the separation reads)."""
    ratio = np.asarray(ratio, dtype=float)
    a = np.full(len(ratio), 0.5) if a is None else np.asarray(a, dtype=float)
    z = np.zeros(len(ratio))
    return delta.DeltaPoints(
        z, z, z, z, a, ratio * a, z, np.asarray(chosen, dtype=bool), np.zeros(len(ratio), bool), z
    )


def test_points_are_labelled_from_the_oracle_choice(analysed):
    res, pts, _ = analysed
    t = res.tables[pts.request_id[0]]
    for n in range(50):
        i, k = pts.state[n], pts.k[n]
        assert pts.chosen[n] == (k + 1 <= t.choice[i])
        assert pts.delta_cost_s[n] == pytest.approx(t.cost_s[i, k + 1] - t.cost_s[i, k])
        assert pts.cost_s[n] == t.cost_s[i, k]
        assert pts.delta_a[n] == float(t.match_lengths[i] >= k + 1)
        assert pts.delta_a_expected[n] == pytest.approx(np.prod(t.confidences[i, : k + 1]))


def test_oracle_cost_per_token_from_points_equals_the_dp_value(analysed):
    res, _, summary = analysed
    seconds = sum(float(t.value_s[1]) for t in res.tables.values())
    tokens = sum(len(t.choice) - 1 for t in res.tables.values())  # states 1 .. L-1 committed
    assert summary["oracle_time_per_token_s"] == pytest.approx(seconds / tokens, rel=1e-12)
    assert summary["slope_over_oracle_cost"] == pytest.approx(
        summary["fitted_slope_s_per_token"] * tokens / seconds
    )


def test_a_summary_with_only_the_slope_is_completed_from_the_points(analysed):
    # A sweep's Delta-space figure gets only the slope: its oracle line was drawn at 0 ms.
    _, pts, summary = analysed
    full = delta.completed(pts, {"fitted_slope_s_per_token": 1.0, "auc": None})
    assert full["fitted_slope_s_per_token"] == 1.0
    assert full["oracle_time_per_token_s"] == pytest.approx(summary["oracle_time_per_token_s"])
    assert full["oracle_time_per_token_s"] > 0
    assert full["auc"] == pytest.approx(summary["auc"])


def test_binding_decisions_reproduce_the_dp_argmin(analysed):
    # A consistency check of the indexing (optimality makes it 0 by construction), not a finding.
    _, _, summary = analysed
    assert summary["binding_decisions"] > 50
    assert summary["dp_consistency_violations"] == 0


def test_random_cost_tables_separate_clearly_worse_than_the_real_scenario(analysed):
    res, _, real = analysed
    for seed in range(3):
        _, rand = delta.analyse(delta.random_tables(res.tables, np.random.default_rng(seed)))
        assert real["auc"] > rand["auc"] + 0.15
        assert real["misclassified_over_trivial"] < 0.7 * rand["misclassified_over_trivial"]
        assert (
            real["local_condition_violation_fraction"]
            < 0.8 * rand["local_condition_violation_fraction"]
        )
    # The control the summary reports is the same analysis on random tables.
    assert real["control_random_tables_auc"] < real["auc"] - 0.15
    assert real["control_permutation_misclassified_fraction"] > real["misclassified_fraction"]
    assert real["control_permutation_p_value"] < 0.01


def test_random_tables_keep_transitions_and_are_solved_by_the_dp(analysed):
    res, _, _ = analysed
    rand = delta.random_tables(res.tables, np.random.default_rng(5))
    for rid, t in res.tables.items():
        r = rand[rid]
        assert np.array_equal(r.next_state, t.next_state)
        lo, hi = t.cost_s[1:].min(), t.cost_s[1:].max()
        assert lo <= r.cost_s[1:].min() and r.cost_s[1:].max() <= hi
        i = len(r.choice) // 2
        totals = r.cost_s[i] + r.value_s[r.next_state[i]]
        assert r.value_s[i] == pytest.approx(totals.min())
        assert not np.allclose(r.cost_s, t.cost_s)


def test_fit_slope_separates_separable_points():
    a = np.array([0.2, 0.4, 0.6, 0.8, 0.3, 0.9])
    cost = np.array([0.1, 0.1, 0.1, 0.1, 0.5, 0.8])  # the last two are above slope 0.7
    chosen = np.array([True, True, True, True, False, False])
    slope, errors = delta.fit_slope(a, cost, chosen)
    assert errors == 0
    assert 0.5 < slope < 0.8889


def test_separation_of_interleaved_points_closed_form():
    # Ratios 1..6: chosen at 1, 2, 4; rejected at 3, 5, 6. Any threshold errs at least once;
    # the best is between 2 and 3 (or 4 and 5) with one error. AUC: pairs (chosen, rejected)
    # with r_rej > r_chosen: 1 -> 3, 2 -> 3, 4 -> 2, so 8 of 9.
    s = delta.separation(_points([1, 2, 3, 4, 5, 6], [1, 1, 0, 1, 0, 0]))
    assert s["misclassified"] == 1
    assert s["misclassified_fraction"] == pytest.approx(1 / 6)
    assert s["misclassified_over_trivial"] == pytest.approx(1 / 3)
    assert s["fitted_slope_s_per_token"] == pytest.approx(2.5)
    assert s["margin_s_per_token"] == pytest.approx(0.5)
    assert s["margin_rel"] == pytest.approx(0.2)
    assert s["misclassified_depth_rel"] == pytest.approx(0.6)  # |4 - 2.5| / 2.5
    assert s["auc"] == pytest.approx(8 / 9)


def test_progress_only_auc_ignores_the_cost_axis():
    # ΔE[a] orders the points 0.9 > 0.8 > 0.3 > 0.2; chosen at 0.9 and 0.3: 3 of 4 pairs right.
    a = np.array([0.9, 0.8, 0.3, 0.2])
    pts = _points([5.0, 1.0, 0.1, 9.0], [1, 0, 1, 0], a)
    assert delta.separation(pts)["auc_progress_only"] == pytest.approx(0.75)


def test_auc_closed_forms():
    assert delta.auc(np.ones(4), np.array([1.0, 2, 3, 4]), np.array([1, 1, 0, 0], bool)) == 1.0
    assert delta.auc(np.ones(4), np.array([1.0, 2, 3, 4]), np.array([0, 0, 1, 1], bool)) == 0.0
    assert delta.auc(np.ones(4), np.ones(4), np.array([1, 0, 1, 0], bool)) == 0.5


def test_labels_unrelated_to_the_ratio_are_reported_as_unseparated():
    rng = np.random.default_rng(3)
    n = 4000
    pts = _points(rng.lognormal(0.0, 1.0, n), rng.random(n) < 0.3, rng.uniform(0.05, 1.0, n))
    s = delta.separation(pts)
    share = pts.chosen.mean()
    assert abs(s["auc"] - 0.5) < 0.04
    assert s["misclassified_fraction"] > 0.9 * share
    assert s["misclassified_over_trivial"] > 0.9
    perm = delta.permutation_control(pts, np.random.default_rng(4), permutations=99)
    assert perm["p_value"] > 0.01


def test_local_condition_fails_off_the_binding_pair_on_a_non_convex_table():
    # Every state: k = 0 costs 1 s for 1 token, k = 2 costs 2.5 s for 3 tokens (m = 2), k = 1
    # costs 3 s. The DP drafts 2; the extension 0 -> 1 (chosen, not binding) adds 2 s for one
    # token worth V(i+1) - V(i+2) = 2.5/3 s, so it violates the local condition; 1 -> 2 is
    # binding and holds (it saves 0.5 s).
    last = 31
    cost = np.tile([0.0, 0.0, 0.0], (last, 1))
    cost[1:] = [1.0, 3.0, 2.5]
    m = np.full(last, 2)
    nxt = np.minimum(np.arange(last)[:, None] + np.minimum(np.arange(3), m[:, None]) + 1, last)
    value, choice = oracle.solve(cost, nxt)
    conf = np.full((last, 2), 0.8)
    table = RequestTables(0, cost, nxt, value, choice, m, conf)
    pts = delta.delta_points({0: table})
    ok = delta.local_condition(pts)
    first = pts.state == 1
    assert choice[1] == 2
    assert not ok[first & (pts.k == 0)].any()
    assert ok[first & (pts.k == 1)].all()
    _, summary = delta.analyse({0: table})
    assert summary["dp_consistency_violations"] == 0
    # Every state on the path drafts k* = 2 = min(m, K) ...
    assert summary["drafts_to_first_rejection_fraction"] == 1.0
    # ... until state 4 accepts only one draft: 1 token for 1 s beats 2 tokens for 2.5 s.
    m[4] = 1
    nxt[4] = 4 + np.minimum(np.arange(3), 1) + 1
    value, choice = oracle.solve(cost, nxt)
    table = RequestTables(0, cost, nxt, value, choice, m, conf)
    path = np.array(table.path())
    assert choice[4] == 0
    expected = np.mean(choice[path] == np.minimum(m[path], 2))
    assert 0.0 < expected < 1.0
    got = delta.drafts_to_first_rejection_fraction(delta.delta_points({0: table}))
    assert got == pytest.approx(expected)
    assert summary["local_condition_violations_all_extensions"] > 0


def test_analysis_is_reproducible_and_json_clean(analysed):
    res, _, summary = analysed
    _, again = delta.analyse(res.tables, np.random.default_rng(1))
    assert json.dumps(again, allow_nan=False) == json.dumps(summary, allow_nan=False)
    _, empty = delta.analyse({})
    json.dumps(empty, allow_nan=False)  # undefined numbers are null, never NaN
    assert "n/a" in delta.describe(empty)
    assert "% misclassified" in delta.describe(summary)


@pytest.mark.parametrize(
    ("found", "random_", "failed"), [(0.307, 0.276, True), (0.20, 0.20, True), (0.1, 0.3, False)]
)
def test_a_line_no_better_than_random_cost_tables_fails_its_control(found, random_, failed):
    summary = {
        "misclassified_fraction": found,
        "control_random_tables_misclassified_fraction": random_,
    }
    verdict = delta.control_failure(summary)
    assert (verdict is not None) is failed
    assert ("WARNING: the analysis failed its control" in delta.describe(summary)) is failed
    assert delta.control_failure({"misclassified_fraction": 0.3}) is None  # no control: silent


def test_the_delta_figure_says_when_the_control_failed(tmp_path):
    from simspec.plots.policies import delta_space

    rng = np.random.default_rng(0)
    points = _points(rng.uniform(0.5, 2.0, 200), rng.random(200) < 0.5)
    summary = {
        "misclassified_fraction": 0.45,
        "control_random_tables_misclassified_fraction": 0.40,
        "control_permutation_misclassified_fraction": 0.5,
    }
    import matplotlib.figure

    captured = []
    original = matplotlib.figure.Figure.savefig

    def keep(self, *args, **kwargs):
        captured.append([t.get_text() for t in self.texts])
        return original(self, *args, **kwargs)

    matplotlib.figure.Figure.savefig = keep
    try:
        delta_space(points, summary, tmp_path / "d.png")
    finally:
        matplotlib.figure.Figure.savefig = original
    assert any("failed its control" in text for texts in captured for text in texts)
