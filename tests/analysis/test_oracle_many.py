"""The oracle's tables as array expressions: equal, bit for bit, to pricing pass by pass."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.analysis import oracle
from simspec.sim.setup import build_setup
from tests.analysis.test_oracle_tables import _step_cost_reference
from tests.helpers import tiny


def _alone_reference(setup, ctx: int, unique: np.ndarray, match: int) -> np.ndarray:
    """cost(i, k) at B = 1 written out: one draft step and one verify pass per call, plus the
    engine's speculation overhead when k >= 1 (the request commits min(k, m) + 1 tokens)."""
    costs, kmax = setup.cost_model, unique.shape[0] - 1
    draft = np.cumsum([0.0] + [costs.draft_step(np.array([ctx + j])) for j in range(kmax)])
    verify = [
        costs.verify_pass(np.array([k + 1]), np.array([ctx]), unique[k]).total_s
        for k in range(kmax + 1)
    ]
    extra = [0.0] + [
        costs.speculation_overhead_s(np.array([min(k, match) + 1]), np.array([ctx]))
        for k in range(1, kmax + 1)
    ]
    return (draft + np.array(verify)) + np.array(extra)


def _solve_reference(cost_s: np.ndarray, next_state: np.ndarray):
    """The DP with a numpy call per state (the original form)."""
    last = cost_s.shape[0]
    value, choice = np.zeros(last + 1), np.zeros(last, dtype=np.int64)
    for i in range(last - 1, 0, -1):
        totals = cost_s[i] + value[next_state[i]]
        choice[i] = int(np.argmin(totals))
        value[i] = totals[choice[i]]
    return value, choice


ROUTINGS = [(), ('routing.mode="analytic"',), ('costs.moe_kernel="launch"', "hardware.num_gpus=2")]


@pytest.mark.parametrize("overrides", ROUTINGS)
def test_alone_costs_equal_pricing_each_state(overrides):
    setup = build_setup(tiny("workload.output_tokens=24", *overrides))
    kmax = setup.max_draft_tokens
    for rid in (0, 2):
        seq = setup.references.sequence(rid)
        unique = oracle.unique_experts_table(setup, rid, kmax)
        table = oracle.request_tables(setup, rid, kmax).cost_s
        for i in range(1, seq.output_tokens):
            match = int(seq.match_lengths[i])
            want = _alone_reference(setup, seq.prompt_tokens + i, unique[i], match)
            assert np.array_equal(table[i], want)


@pytest.mark.parametrize("overrides", ROUTINGS)
@pytest.mark.parametrize("tokens_each", [1.0, 3.0])
def test_step_cost_table_equals_pricing_each_state(overrides, tokens_each):
    setup = build_setup(tiny("workload.output_tokens=24", *overrides))
    kmax, layers = setup.max_draft_tokens, setup.references.num_layers
    step = oracle.StepCost(setup, 5, tokens_each, 300.0, np.linspace(10.0, 50.0, layers))
    unique = oracle.unique_experts_table(setup, 1, kmax)
    contexts = 64 + np.arange(1, len(unique))
    table = step.table(contexts, unique[1:])
    for row, (ctx, u) in enumerate(zip(contexts, unique[1:], strict=True)):
        assert np.array_equal(table[row], _step_cost_reference(step, int(ctx), u))


def test_request_tables_many_equals_one_at_a_time():
    setup = build_setup(tiny("workload.output_tokens=30", "workload.length_jitter=0.5"))
    kmax, requests = setup.max_draft_tokens, range(setup.workload.num_requests)
    step = oracle.StepCost(setup, 3, 2.0, 200.0, np.full(setup.references.num_layers, 30.0))
    for cost in (None, step):
        many = oracle.request_tables_many(setup, requests, kmax, cost)
        for rid in requests:
            one = oracle.request_tables(setup, rid, kmax, cost)
            for field in ("cost_s", "next_state", "value_s", "choice"):
                assert np.array_equal(getattr(many[rid], field), getattr(one, field))


@pytest.mark.parametrize("seed", range(5))
def test_solve_and_solve_many_equal_the_per_state_numpy_dp(seed):
    rng = np.random.default_rng(seed)
    costs, nexts = [], []
    for _ in range(6):
        last, kmax = int(rng.integers(1, 40)), 3
        match = rng.integers(0, kmax + 1, size=last)
        states = np.arange(last)[:, None]
        nexts.append(np.minimum(states + np.minimum(np.arange(kmax + 1), match[:, None]) + 1, last))
        cost = rng.choice([0.5, 1.0, 1.5], size=(last, kmax + 1))  # many exact ties
        cost[0] = 0.0
        costs.append(cost)
    solved = oracle.solve_many(costs, nexts)
    for cost, nxt, (value, choice) in zip(costs, nexts, solved, strict=True):
        want_value, want_choice = _solve_reference(cost, nxt)
        got_value, got_choice = oracle.solve(cost, nxt)
        assert np.array_equal(got_value, want_value) and np.array_equal(got_choice, want_choice)
        assert np.array_equal(value, want_value) and np.array_equal(choice, want_choice)
    assert oracle.solve_many([], []) == []
