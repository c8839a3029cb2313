"""Resolving a sweep's points in workers: the same points and errors as one process, and the
workers' routing fits handed back to the parent."""

from __future__ import annotations

import tomllib

import pytest

import simspec.sweep.resolve as resolve_module
from simspec.config.checks import _routing_problem
from simspec.errors import ScenarioError
from simspec.routing.memo import FIT_MEMOS
from simspec.sweep.spec import expand, read_spec
from simspec.sweep.workers import worker_context

CASES = """
name = "fits"
seed = 3
[routing]
mode = "analytic"
overlaps = [0.4, 0.3]
[workload]
concurrency = 1
num_requests = 1
prompt_tokens = 16
output_tokens = 8
[[policies]]
name = "fixed"
draft_tokens = 2
[sweep]
cases = [
  { label = "A", "model.target" = "mixtral-8x7b", "hardware.num_gpus" = 2 },
  { label = "B", "model.target" = "qwen3-30b-a3b" },
  { label = "C", "model.target" = "olmoe-1b-7b-0924" },
]
grid = { "workload.concurrency" = [1, 2] }
"""


@pytest.fixture
def forked():
    """Skip where this process cannot fork workers (not Linux, or threads running: xdist)."""
    if worker_context().get_start_method() != "fork":
        pytest.skip("workers resolve points only when this process can fork them")


def _fresh_fits():
    """Forget every routing fit (and the checks that would skip them) in this process."""
    _routing_problem.cache_clear()
    for memo in FIT_MEMOS.values():
        memo.cache_clear()


def _summary(points):
    return [(p.index, p.case, p.values, p.replication, p.digest) for p in points]


def test_cases_with_routing_fits_are_resolved_in_workers_and_their_fits_come_back(
    monkeypatch, forked
):
    monkeypatch.setattr(resolve_module, "POOL_COST_S", 0.0)  # whatever the fits cost
    data = tomllib.loads(CASES)
    spec = read_spec(data, "fits.toml")
    _fresh_fits()
    start = {name: memo.computed for name, memo in FIT_MEMOS.items()}
    one = expand(data, "fits.toml", spec, workers=1)
    computed_alone = {name: memo.computed - start[name] for name, memo in FIT_MEMOS.items()}
    sizes = {name: len(memo) for name, memo in FIT_MEMOS.items()}
    assert sizes["routing.predictor.node_log_silent"] == 3  # one fit per case (model)
    _fresh_fits()
    before = {name: memo.computed for name, memo in FIT_MEMOS.items()}
    two = expand(data, "fits.toml", spec, workers=2)
    assert _summary(one) == _summary(two)
    assert [p.scenario for p in one] == [p.scenario for p in two]
    for name, memo in FIT_MEMOS.items():
        if sizes[name]:
            # Every case's fit is here, but this process computed only the first case's.
            assert len(memo) == sizes[name], name
            assert 0 < memo.computed - before[name] < computed_alone[name], name


def test_cheap_fits_keep_the_resolution_in_this_process(monkeypatch, forked):
    monkeypatch.setattr(resolve_module, "POOL_COST_S", 1e9)
    data = tomllib.loads(CASES)
    spec = read_spec(data, "fits.toml")
    _fresh_fits()
    before = {name: memo.computed for name, memo in FIT_MEMOS.items()}
    expand(data, "fits.toml", spec, workers=2)
    assert (
        FIT_MEMOS["routing.predictor.node_log_silent"].computed
        - before["routing.predictor.node_log_silent"]
        == 3
    )


@pytest.mark.parametrize(
    ("bad", "key"),
    [
        (
            '{ label = "C", "model.target" = "olmoe-1b-7b-0924", "workload.prompt_tokens" = -1 }',
            "workload.prompt_tokens",
        ),
        ('{ label = "C", "model.target" = "no-such-model" }', "model.target"),
    ],
)
def test_a_bad_point_in_a_later_case_is_the_serial_error(monkeypatch, forked, bad, key):
    monkeypatch.setattr(resolve_module, "POOL_COST_S", 0.0)
    good = '{ label = "C", "model.target" = "olmoe-1b-7b-0924" }'
    data = tomllib.loads(CASES.replace(good, bad))
    spec = read_spec(data, "fits.toml")
    errors = []
    for workers in (1, 2):
        _fresh_fits()
        with pytest.raises(ScenarioError) as info:
            expand(data, "fits.toml", spec, workers=workers)
        errors.append((str(info.value), info.value.key_path))
    assert errors[0] == errors[1]
    assert errors[0][1] == key
