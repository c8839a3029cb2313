"""Sweeps start the heaviest points first and still write their rows in grid order."""

from __future__ import annotations

import itertools
import tomllib

from simspec.analysis.experiment import work_tokens
from simspec.sweep.points import read_sweep
from simspec.sweep.run import heaviest_first, run_sweep
from simspec.sweep.spec import expand, read_spec

BASE = """
name = "order"
seed = 3
[acceptance]
alpha = 0.7
[workload]
concurrency = 1
num_requests = 2
prompt_tokens = 32
output_tokens = 20
[[policies]]
name = "fixed"
draft_tokens = 2
[sweep]
grid = { "workload.num_requests" = [1, 3, 2, 3], "workload.output_tokens" = [20, 40] }
"""


def _points():
    data = tomllib.loads(BASE)
    return expand(data, "order.toml", read_spec(data, "order.toml"))


def test_work_counts_requests_tokens_and_simulations():
    point = _points()[0]
    assert point.scenario.workload.num_requests == 1
    # runs: the policy and the k = 0 baseline (and the oracle)
    assert (
        work_tokens(point.scenario, oracle=False) == 1 * 20 * 2
    )  # the policy and the k = 0 baseline
    assert work_tokens(point.scenario, oracle=True) == 1 * 20 * 3


def test_heaviest_first_with_ties_in_grid_order():
    points = _points()
    ordered = heaviest_first(points, oracle=False)
    works = [work_tokens(p.scenario, False) for p in ordered]
    assert works == sorted(works, reverse=True) and works[0] > works[-1]
    assert sorted(ordered, key=points.index) == list(points)  # a permutation
    for a, b in itertools.pairwise(ordered):
        if work_tokens(a.scenario, False) == work_tokens(b.scenario, False):
            assert points.index(a) < points.index(b)


def test_rows_follow_the_grid_not_the_run_order(tmp_path):
    points = _points()
    assert heaviest_first(points, oracle=False) != list(points)
    returned = run_sweep(points, tmp_path / "o", workers=1)
    again = read_sweep(tmp_path / "o")
    assert [p.result.scenario_digest for p in returned] == [p.digest for p in points]
    assert [p.result.scenario_digest for p in again] == [p.digest for p in points]
