"""The deferred driver (decide every step, then price) against the SimPy driver: one scheduler
loop (:func:`simspec.sim.schedule.schedule`) and one step under two clocks, so their records must
be the same bytes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import simspec
from simspec.policies.adaptive_ema import AdaptiveEmaPolicy
from simspec.policies.cost_aware import CostAwarePolicy
from simspec.policies.fixed import FixedPolicy
from simspec.policies.threshold import ThresholdPolicy
from simspec.sim.deferred import deferrable, in_lanes
from simspec.sim.engine import run_policy
from simspec.sim.records import _FLOATS, _INTS, RunLog
from simspec.sim.setup import build_setup
from simspec.sim.state import RequestTable

POLICIES = [
    FixedPolicy(draft_tokens=0),
    FixedPolicy(draft_tokens=3),
    ThresholdPolicy(tau=0.6),
    ThresholdPolicy(tau=0.3, mode="cumulative"),
    AdaptiveEmaPolicy(),
]


def _setup(concurrency: int, mode: str, *extra: str):
    """The default scenario on 12 requests of 96 output tokens give or take its length jitter
    (requests finish at different steps and the next are admitted mid-run)."""
    overrides = [
        f"workload.concurrency={concurrency}",
        "workload.num_requests=12",
        "workload.output_tokens=96",
    ]
    return build_setup(simspec.load_scenario(None, [*overrides, f'routing.mode="{mode}"', *extra]))


@pytest.mark.parametrize("mode", ["analytic", "monte_carlo"])
@pytest.mark.parametrize("concurrency", [1, 4, 32])
def test_deferred_and_timed_schedules_record_the_same_run(concurrency: int, mode: str) -> None:
    setup = _setup(concurrency, mode)
    for policy in POLICIES:
        assert deferrable(setup, policy)
        timed, deferred = run_policy(setup, policy, timed=True), run_policy(setup, policy)
        assert len(timed.steps) > 0
        assert deferred.steps == timed.steps, policy
        assert deferred.prefills == timed.prefills, policy
        assert deferred.requests == timed.requests, policy
        assert _same_bytes(deferred, timed)


def test_deferred_schedule_with_engine_overheads_and_a_kv_limit() -> None:
    """Speculation overheads (an engine preset's extend passes) and admission held back by the
    KV capacity: both are decided without a clock, so the records still agree."""
    extra = (
        "costs.draft_extend_passes=1",
        "costs.verify_overhead_s=2e-4",
        "workload.length_jitter=0",
    )
    setup = _setup(8, "analytic", *extra)
    need = RequestTable(setup.references, 12, setup.max_draft_tokens).kv_bytes
    setup = dataclasses.replace(setup, kv_capacity_bytes=2.5 * max(need))  # 2 of the 8 at once
    for policy in POLICIES[1:3]:
        timed, deferred = run_policy(setup, policy, timed=True), run_policy(setup, policy)
        assert max(record.batch_size for record in timed.steps) == 2
        assert timed.steps[0].speculation_overhead_s > 2e-4
        assert deferred.steps == timed.steps
        assert deferred.requests == timed.requests


def test_policies_that_read_costs_and_open_loops_keep_the_timed_schedule() -> None:
    setup = _setup(4, "analytic")
    assert not deferrable(setup, CostAwarePolicy())
    with pytest.raises(ValueError):
        run_policy(setup, CostAwarePolicy(), timed=False)
    open_loop = _setup(4, "analytic", 'workload.loop="open"', "workload.arrival_rate_per_s=5.0")
    assert not deferrable(open_loop, FixedPolicy(draft_tokens=3))


@pytest.mark.parametrize(
    ("concurrency", "mode", "extra"),
    [
        (3, "monte_carlo", ("workload.max_batch_size=1",)),  # clients beyond the cap wait
        (1, "analytic", ("costs.draft_extend_passes=1", "costs.verify_overhead_s=2e-4")),
    ],
)
def test_batches_of_one_run_as_lanes_and_record_the_timed_run(
    concurrency: int, mode: str, extra: tuple[str, ...]
) -> None:
    """Batches of one are advanced as lanes (every request stepped at once, the steps then laid
    out request by request): the records are still the SimPy run's, byte for byte, and a
    second run gives the same bytes."""
    setup = _setup(concurrency, mode, *extra)
    for policy in POLICIES:
        assert in_lanes(setup, policy) == policy.per_request, policy
        timed, deferred = run_policy(setup, policy, timed=True), run_policy(setup, policy)
        assert max(record.batch_size for record in timed.steps) == 1
        assert deferred.steps == timed.steps, policy
        assert deferred.prefills == timed.prefills, policy
        assert deferred.requests == timed.requests, policy
        assert _same_bytes(deferred, timed)
        again = run_policy(setup, policy)
        assert again.steps == deferred.steps and again.requests == deferred.requests


def _same_bytes(a: RunLog, b: RunLog) -> bool:
    """Every step column the same bytes (``==`` on floats would let -0.0 pass for 0.0)."""
    names = (*_FLOATS, *_INTS)
    return all(a.steps.column(n).tobytes() == b.steps.column(n).tobytes() for n in names)


def test_lanes_need_batches_of_one_analytic_routing_and_a_per_request_policy() -> None:
    fixed = FixedPolicy(draft_tokens=3)
    assert in_lanes(_setup(1, "analytic"), fixed)
    assert not in_lanes(_setup(2, "analytic"), fixed)
    assert in_lanes(_setup(1, "monte_carlo"), fixed)
    assert not in_lanes(_setup(1, "analytic"), AdaptiveEmaPolicy())  # its memory spans requests


def test_expected_unique_alone_is_each_request_priced_alone() -> None:
    """Row n is the expectation of a pass that request n feeds alone, and a pass of one
    request of T tokens uses between k_e and min(N, T k_e) experts per layer."""
    refs = _setup(1, "analytic").references
    fed = np.array([1, 4, 3, 4, 1, 5])
    true = np.array([1, 2, 3, 4, 1, 0])
    rows = refs.expected_unique_alone(fed, true)
    assert rows.shape == (len(fed), refs.num_layers)
    for n in range(len(fed)):
        alone = refs.expected_unique(fed[n : n + 1], true[n : n + 1])
        assert rows[n].tobytes() == alone.tobytes()
    k_e, experts = refs.shape.experts_per_token, refs.shape.num_experts
    assert np.allclose(rows[0], k_e)  # one token: its k_e experts
    assert (rows >= k_e - 1e-9).all()
    assert (rows <= np.minimum(experts, fed[:, None] * k_e) + 1e-9).all()


def test_a_dense_target_runs_as_lanes_and_records_the_timed_run() -> None:
    """No MoE layer: each lane's pass routes nothing (zero columns), the rest as above."""
    path = Path(__file__).parents[2] / "scenarios" / "dense-sanity-qwen3-8b.toml"
    scenario = simspec.load_scenario(path, ["workload.num_requests=4", 'routing.mode="analytic"'])
    setup = build_setup(scenario)
    assert setup.references.num_layers == 0
    for policy in (FixedPolicy(draft_tokens=0), FixedPolicy(draft_tokens=4), POLICIES[2]):
        assert in_lanes(setup, policy)
        timed, deferred = run_policy(setup, policy, timed=True), run_policy(setup, policy)
        assert deferred.steps == timed.steps
        assert deferred.prefills == timed.prefills
        assert deferred.requests == timed.requests
        assert _same_bytes(deferred, timed)
