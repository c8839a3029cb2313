"""The deferred driver (decide every step, then price) against the SimPy driver: one scheduler
loop (:func:`simspec.sim.schedule.schedule`) and one step under two clocks, so their records must
be the same bytes."""

from __future__ import annotations

import dataclasses

import pytest

import simspec
from simspec.policies.adaptive_ema import AdaptiveEmaPolicy
from simspec.policies.cost_aware import CostAwarePolicy
from simspec.policies.fixed import FixedPolicy
from simspec.policies.threshold import ThresholdPolicy
from simspec.sim.deferred import deferrable
from simspec.sim.engine import run_policy
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
    overrides = [f"workload.concurrency={concurrency}", "workload.num_requests=12"]
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
