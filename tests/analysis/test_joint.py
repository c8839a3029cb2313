"""The exact joint oracle of tiny closed batches, and the approximate oracle measured against it.

At B > 1 every fixed k is among the approximate oracle's candidates, so "never worse than the
best fixed k" cannot fail; these checks can: the joint DP against an exhaustive search over all
plans, the engine replaying the DP's plan at exactly its value, and the approximate oracle's gap.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simspec.analysis import oracle
from simspec.analysis.oracle import OraclePolicy
from simspec.policies import FixedPolicy
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup
from tests.helpers import tiny
from tests.reference.joint_oracle import exact_joint_plan
from tests.reference.oracle_dp import shortest_path_networkx


def _pair(seed, output_tokens, *extra):
    return build_setup(
        tiny(
            f"seed={seed}",
            "workload.concurrency=2",
            "workload.num_requests=2",
            f"workload.output_tokens={output_tokens}",
            *extra,
        )
    )


def test_joint_dp_equals_an_exhaustive_search_over_every_plan():
    setup, kmax = _pair(3, 4, 'acceptance.process="bursty"'), 2
    positions = [
        range(1, setup.references.sequence(r).output_tokens) for r in range(2)
    ]  # every state a request can be in
    keys = [(r, i) for r in range(2) for i in positions[r]]
    best = min(
        run_policy(setup, OraclePolicy(dict(zip(keys, ks, strict=True)), kmax)).mean_tpot_s()
        for ks in itertools.product(range(kmax + 1), repeat=len(keys))
    )
    assert exact_joint_plan(setup, kmax).mean_tpot_s == pytest.approx(best, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_engine_replays_the_joint_plan_at_exactly_its_value(seed):
    setup = _pair(seed, 8)
    opt = exact_joint_plan(setup, 3)
    replay = run_policy(setup, OraclePolicy(opt.plan, 3)).mean_tpot_s()
    assert replay == pytest.approx(opt.mean_tpot_s, rel=1e-12)
    for k in range(4):  # the optimum is at least as good as every fixed k within its cap
        assert opt.mean_tpot_s <= run_policy(setup, FixedPolicy(draft_tokens=k)).mean_tpot_s()


@pytest.mark.parametrize("seed", [0, 2])
def test_the_approximate_batched_oracle_is_within_five_percent_of_the_optimum(seed):
    setup = _pair(seed, 14, 'acceptance.process="bursty"')
    opt = exact_joint_plan(setup)
    approx = oracle.oracle_plan(setup).log.mean_tpot_s()
    assert opt.mean_tpot_s <= approx * (1 + 1e-12)  # nothing beats the exact optimum
    assert approx <= 1.05 * opt.mean_tpot_s  # studies/oracle_gap.py: gaps 0-3 % at B = 2


def test_the_exact_oracle_refuses_what_it_cannot_solve():
    with pytest.raises(ValueError, match="closed batch"):
        exact_joint_plan(build_setup(tiny("workload.concurrency=1", "workload.num_requests=2")))


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.integers(3, 12),
    kmax=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_b1_dp_equals_networkx_on_random_instances(lengths, kmax, seed):
    """Random DAGs of the oracle's shape (random costs, random match lengths)."""
    rng = np.random.default_rng(seed)
    cost = rng.uniform(0.1, 5.0, size=(lengths, kmax + 1))
    match = rng.integers(0, kmax + 1, size=lengths)
    nxt = np.arange(lengths)[:, None] + np.minimum(np.arange(kmax + 1), match[:, None]) + 1
    nxt = np.minimum(nxt, lengths)  # the last state is absorbing
    value, choice = oracle.solve(cost, nxt)
    assert value[1] == pytest.approx(shortest_path_networkx(cost, nxt), rel=1e-12)
    i, walked = 1, 0.0  # following the choices costs exactly V(1)
    while i < lengths:
        walked += cost[i, choice[i]]
        i = int(nxt[i, choice[i]])
    assert walked == pytest.approx(value[1], rel=1e-12)
