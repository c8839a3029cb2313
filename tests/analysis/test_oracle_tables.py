"""The oracle's cost tables: vectorised builders against per-state references and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from simspec.analysis import oracle
from simspec.routing.sets import to_sets
from simspec.sim.setup import build_setup
from tests.helpers import tiny


@pytest.mark.parametrize(
    "overrides",
    [
        (),
        ('routing.popularity="zipf"', "routing.overlaps=[0.38, 0.3]"),
        ('routing.mode="analytic"',),
    ],
)
def test_unique_table_equals_per_state_unions(overrides):
    setup = build_setup(tiny("workload.output_tokens=30", *overrides))
    refs, kmax = setup.references, setup.max_draft_tokens
    for rid in (0, 3):
        table = oracle.unique_experts_table(setup, rid, kmax)
        assert table.shape == (refs.sequence(rid).output_tokens, kmax + 1, refs.num_layers)
        for i in range(1, len(table)):
            assert np.array_equal(table[i], oracle.unique_experts_by_k(setup, rid, i, kmax))
            if refs.routing.mode == "monte_carlo":  # the k-draft pass: union of k + 1 tokens
                for k in (0, kmax):
                    fed = to_sets(refs.fed_routing(rid, i, k), refs.num_experts)
                    assert np.array_equal(table[i, k], fed.any(axis=0).sum(axis=-1))


def test_state_routing_is_fed_routing_at_every_state():
    refs = build_setup(tiny("workload.output_tokens=30", "acceptance.alpha=0.5")).references
    for k in (0, 2, refs.max_draft_tokens):
        got = refs.state_routing(1, k)
        for i in range(len(got)):
            assert np.array_equal(got[i], refs.fed_routing(1, i, k))


@pytest.mark.parametrize("alpha", [0.2, 0.9])
def test_state_tokens_hold_what_state_routing_gathers(alpha):
    refs = build_setup(tiny("workload.output_tokens=30", f"acceptance.alpha={alpha}")).references
    kmax = refs.max_draft_tokens
    for k in (0, 1, kmax):
        true, rejected, accepted = refs.state_tokens(2, k)
        gathered = refs.state_routing(2, k)
        assert len(true) == len(accepted) == len(gathered)
        assert len(rejected) == k - accepted.min()
        for i in range(len(gathered)):
            a = int(accepted[i])
            fed = [true[i + j] for j in range(a + 1)] + [rejected[r][i] for r in range(k - a)]
            assert np.array_equal(np.stack(fed), gathered[i])


def test_unique_table_of_a_replayed_trace(tmp_path):
    import simspec
    from tests.config.test_traces import synthetic_trace, write_scenario

    setup = build_setup(simspec.load_scenario(write_scenario(tmp_path, synthetic_trace())))
    refs, kmax = setup.references, setup.max_draft_tokens
    for rid in range(3):
        table = oracle.unique_experts_table(setup, rid, kmax)
        assert np.issubdtype(table.dtype, np.integer)  # counts: each priced once
        for i in range(len(table)):
            for k in range(kmax + 1):
                fed = to_sets(refs.fed_routing(rid, i, k), refs.num_experts)
                assert np.array_equal(table[i, k], fed.any(axis=0).sum(axis=-1))


def _step_cost_reference(step: oracle.StepCost, ctx: int, unique: np.ndarray) -> np.ndarray:
    """The attribution cost written out plainly: every draft step priced afresh."""
    costs, n = step.setup.cost_model, step.setup.references.num_experts
    kmax = unique.shape[0] - 1
    tokens = np.full(step.others + 1, step.tokens_each, dtype=np.int64)
    contexts = np.full(step.others + 1, step.context, dtype=np.int64)
    contexts[-1] = ctx
    covered = step.others_union / n
    out = np.zeros(kmax + 1)
    for k in range(kmax + 1):
        tokens[-1] = k + 1
        union = step.others_union + unique[k] * (1.0 - covered)
        out[k] = costs.verify_pass(tokens, contexts, union).total_s
    out = out[0] / (step.others + 1) + (out - out[0])
    others = step.others if step.tokens_each >= 2 else 0
    for j in range(1, kmax + 1):
        with_me = np.full(others + 1, step.context + j - 1)
        with_me[-1] = ctx + j - 1
        extra = costs.draft_step(with_me)
        if others and j <= step.tokens_each - 1:
            extra -= costs.draft_step(with_me[:-1])
        out[j:] += extra
    return out


@pytest.mark.parametrize("tokens_each", [1.0, 2.6, 6.0])
def test_step_cost_with_cached_draft_steps_equals_the_plain_sum(tokens_each):
    setup = build_setup(tiny("workload.output_tokens=30"))
    kmax, layers = setup.max_draft_tokens, setup.references.num_layers
    step = oracle.StepCost(setup, 7, tokens_each, 600.0, np.full(layers, 60.0))
    table = oracle.unique_experts_table(setup, 0, kmax)
    for i in (1, 5, 9, 5, 1):  # repeated states hit the cache
        ctx = 64 + i
        assert np.array_equal(step(ctx, table[i]), _step_cost_reference(step, ctx, table[i]))


def _brute_force(cost: np.ndarray, nxt: np.ndarray) -> float:
    """Least total cost over every sequence of choices from state 1 (exhaustive)."""
    last, best = cost.shape[0], np.inf
    for plan in itertools.product(range(cost.shape[1]), repeat=last - 1):
        i, total, step = 1, 0.0, 0
        while i < last:
            total += cost[i, plan[step]]
            i, step = int(nxt[i, plan[step]]), step + 1
        best = min(best, total)
    return best


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_dp_equals_brute_force_enumeration(seed):
    rng = np.random.default_rng(seed)
    last, kmax = 7, 2
    match = rng.integers(0, kmax + 1, size=last)
    states = np.arange(last)[:, None]
    nxt = np.minimum(states + np.minimum(np.arange(kmax + 1), match[:, None]) + 1, last)
    cost = rng.uniform(0.5, 2.0, size=(last, kmax + 1))
    value, choice = oracle.solve(cost, nxt)
    assert value[1] == pytest.approx(_brute_force(cost, nxt), rel=1e-12)
    i, total = 1, 0.0
    while i < last:  # following the choices costs exactly V(1)
        total += cost[i, choice[i]]
        i = int(nxt[i, choice[i]])
    assert total == pytest.approx(value[1], rel=1e-12)
