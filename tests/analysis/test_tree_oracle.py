"""The tree oracle: exact against exhaustive search, and what a DP over shapes must satisfy."""

from __future__ import annotations

import pytest

from simspec.analysis.oracle import oracle_plan
from simspec.analysis.tree_oracle import FixedShapePolicy, shape_tables, tree_oracle_plan
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup
from simspec.text.shapes import TreeShape, chain, family
from tests.helpers import tiny
from tests.reference.oracle_dp import plain_solve
from tests.reference.tree_oracle import decode_s, exhaustive_best

MICRO = family([chain(1), chain(2), TreeShape(2, 2, 4), TreeShape(3, 2, 5)])


def _one_request(*overrides: str):
    return build_setup(
        tiny(
            "workload.concurrency=1",
            "workload.num_requests=1",
            "workload.output_tokens=6",
            *overrides,
        )
    )


@pytest.mark.parametrize("mode", ["analytic", "monte_carlo"])
@pytest.mark.parametrize("seed", [1, 5])
def test_tree_oracle_is_exact_against_every_plan_run_through_the_engine(mode, seed):
    setup = _one_request(f"seed={seed}", f'routing.mode="{mode}"', "acceptance.alpha=0.6")
    found = tree_oracle_plan(setup, MICRO)
    assert found.exact
    value = found.tables[0].value_s[1]
    brute, _ = exhaustive_best(setup, MICRO)
    assert value == pytest.approx(brute, rel=1e-12)
    assert decode_s(found.log) == pytest.approx(value, rel=1e-12)  # the engine replays it


def test_tree_dp_matches_a_plain_solver_and_beats_every_fixed_shape():
    setup = build_setup(
        tiny("workload.concurrency=1", "workload.num_requests=2", "workload.output_tokens=40")
    )
    found = tree_oracle_plan(setup, MICRO)
    for table in found.tables.values():
        value, choice = plain_solve(table.cost_s, table.next_state)
        assert value[1] == pytest.approx(table.value_s[1], rel=1e-12)
        assert (choice[1:] == table.choice[1:]).all()
    oracle_s = decode_s(found.log)
    for s in range(len(MICRO)):
        assert oracle_s <= decode_s(run_policy(setup, FixedShapePolicy(MICRO, s))) * (1 + 1e-12)


def test_a_family_of_every_chain_reproduces_the_chain_oracle():
    """Chains (k, 1, k + 1) accept what the chain does and cost the same, so over the family of
    every chain the tree oracle is the chain oracle."""
    setup = build_setup(
        tiny(
            "workload.concurrency=1",
            "workload.num_requests=2",
            "workload.output_tokens=40",
            'acceptance.process="bursty"',
        )
    )
    chains = family(chain(k) for k in range(1, setup.max_draft_tokens + 1))
    tree = tree_oracle_plan(setup, chains)
    chain_oracle = oracle_plan(setup)
    assert decode_s(tree.log) == pytest.approx(decode_s(chain_oracle.log), rel=1e-9)


def test_wider_families_never_lose_and_trees_can_win():
    """Adding shapes to the family can only lower V(1); on a drafter whose runner-up candidates
    often hit (rank decay 1) some tree beats every chain somewhere."""
    setup = _one_request("workload.output_tokens=60", "speculation.rank_decay=1.0")
    chains = family([chain(1), chain(2), chain(3)])
    wider = family([*chains[1:], TreeShape(2, 2, 4), TreeShape(3, 4, 8)])
    v_chain = shape_tables(setup, chains, [0])[0].value_s[1]
    tables = shape_tables(setup, wider, [0])[0]
    assert tables.value_s[1] <= v_chain * (1 + 1e-12)
    assert any(int(c) >= len(chains) for c in tables.choice[1:])


def test_a_shape_deeper_than_the_drafter_is_refused():
    setup = _one_request()
    with pytest.raises(ValueError, match="deeper than the drafter"):
        shape_tables(setup, family([chain(setup.max_draft_tokens + 1)]), [0])


def test_an_experiment_with_a_tree_policy_plans_trees_in_its_oracle():
    from tests.helpers import simulate

    policies = [
        {"name": "fixed", "draft_tokens": 2},
        {"name": "fixed_tree", "steps": 3, "topk": 2, "num_draft_tokens": 6},
    ]
    over = ("workload.concurrency=1", "workload.num_requests=2", "workload.output_tokens=40")
    trees = simulate(tiny(*over, "speculation.rank_decay=1.0", policies=policies), oracle=True)
    rows = {row["label"]: row for row in trees["policies"]}
    oracle_row = next(row for row in trees["policies"] if row["is_oracle"])
    assert "tree shapes" in trees["oracle"]["method"]
    assert all(oracle_row["tpot_ms"] <= row["tpot_ms"] * (1 + 1e-12) for row in rows.values())
    chains = simulate(tiny(*over, policies=policies[:1]), oracle=True)
    assert "tree" not in chains["oracle"]["method"]  # chain policies only: the chain oracle
