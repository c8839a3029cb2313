"""Delta-space analysis of the oracle's decisions."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.analysis import delta, oracle
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
    return res, *delta.analyse(res.tables)


def test_local_condition_has_no_violations_on_binding_decisions(analysed):
    _, _, summary = analysed
    assert summary["binding_decisions"] > 50
    assert summary["local_condition_violations"] == 0


def test_points_are_labelled_from_the_oracle_choice(analysed):
    res, pts, _ = analysed
    t = res.tables[pts.request_id[0]]
    for n in range(50):
        i, k = pts.state[n], pts.k[n]
        assert pts.chosen[n] == (k + 1 <= t.choice[i])
        assert pts.delta_cost_s[n] == pytest.approx(t.cost_s[i, k + 1] - t.cost_s[i, k])
        assert pts.delta_a[n] == float(t.match_lengths[i] >= k + 1)
        assert pts.delta_a_expected[n] == pytest.approx(np.prod(t.confidences[i, : k + 1]))


def test_fitted_slope_is_a_time_per_token(analysed):
    _, _, summary = analysed
    g = summary["oracle_time_per_token_s"]
    assert 0.5 * g < summary["fitted_slope_s_per_token"] < 2.0 * g
    assert summary["fit_violations"] < 0.5 * summary["points"]


def test_fit_slope_separates_separable_points():
    a = np.array([0.2, 0.4, 0.6, 0.8, 0.3, 0.9])
    cost = np.array([0.1, 0.1, 0.1, 0.1, 0.5, 0.8])  # the last two are above slope 0.7
    chosen = np.array([True, True, True, True, False, False])
    slope, errors = delta.fit_slope(a, cost, chosen)
    assert errors == 0
    assert 0.5 < slope < 0.8889
