"""Tree-aware policies: fixed trees, engine presets, the cost-aware shape rule, their prices."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.config.speculation import DEFAULT_RANK_DECAY
from simspec.costs.batch import tree_draft_phase_s
from simspec.errors import FieldError
from simspec.policies import POLICIES, BatchView
from simspec.policies.fixed import FixedPolicy
from simspec.policies.fixed_tree import FixedTreePolicy
from simspec.policies.tree_cost_aware import RANK_DECAY, TreeCostAwarePolicy
from simspec.sim.engine import run_policy
from simspec.sim.marginal import UnionModel, shape_shares_s
from simspec.sim.setup import build_setup
from simspec.text.shapes import (
    PRESETS,
    TreeShape,
    alpha_for_accepted,
    expected_lengths,
    grid_family,
    validate,
)
from simspec.text.tree import expected_acceptance_length
from tests.helpers import tiny


def test_the_policy_default_rank_decay_is_the_scenario_default():
    assert RANK_DECAY == DEFAULT_RANK_DECAY


@pytest.mark.parametrize("mode", ["analytic", "monte_carlo"])
def test_a_fixed_tree_of_width_one_is_the_fixed_chain(mode):
    setup = build_setup(tiny(f'routing.mode="{mode}"'))
    chain = run_policy(setup, FixedPolicy(draft_tokens=3))
    tree = run_policy(setup, FixedTreePolicy(steps=3, topk=1, num_draft_tokens=4))
    assert tree.mean_tpot_s() == pytest.approx(chain.mean_tpot_s(), rel=1e-12)
    assert [r.accepted for r in tree.requests] == [r.accepted for r in chain.requests]


def test_a_fixed_tree_verifies_its_budget_and_commits_every_token():
    setup = build_setup(tiny())
    log = run_policy(setup, FixedTreePolicy(preset="sglang_eagle"))
    steps = log.steps
    # (5, 4, 8): 7 verified nodes a request, fewer only where the request's depth is capped
    assert steps.column("fed_tokens").max() == 8 * steps.column("batch_size").max()
    assert all(r.committed == r.output_tokens for r in log.requests)


def test_presets_are_shapes_the_engines_can_run():
    for shape in PRESETS.values():
        assert validate(shape) is None


@pytest.mark.parametrize("shape", [(3, 2, 12), (1, 4, 6), (2, 1, 4)])
def test_a_budget_the_tree_cannot_fill_is_refused(shape):
    steps, topk, budget = shape
    with pytest.raises(FieldError, match="num_draft_tokens"):
        FixedTreePolicy(steps=steps, topk=topk, num_draft_tokens=budget)


def test_grid_family_holds_every_chain_and_only_runnable_trees():
    shapes = grid_family(4, (1, 2, 4), (4, 8, 16))
    assert shapes[0].steps == 0 and len(set(shapes)) == len(shapes)
    assert all(TreeShape(k, 1, k + 1) in shapes for k in range(1, 5))
    assert all(validate(s) is None for s in shapes)


@pytest.mark.parametrize("alpha", [0.05, 0.33, 0.71, 0.97])
def test_alpha_for_accepted_inverts_the_expected_length(alpha):
    shapes = [TreeShape(3, 2, 6), TreeShape(4, 1, 5)]
    accepted = float((expected_lengths(shapes, alpha, 0.5) - 1).sum())
    assert alpha_for_accepted(shapes, accepted, 0.5) == pytest.approx(alpha, abs=1e-9)
    # on a grid point the table is the exact E[AL] of simspec.text.tree
    exact = expected_acceptance_length(0.5, 3, 2, 6, 0.5)
    assert expected_lengths(shapes[:1], 0.5, 0.5)[0] == pytest.approx(exact, rel=1e-12)


def test_shape_shares_at_batch_size_one_are_the_step_it_would_run():
    setup = build_setup(tiny())
    costs, refs = setup.cost_model, setup.references
    union = UnionModel(
        refs.num_experts, refs.shape.experts_per_token, refs.num_layers, setup.mean_draft_overlap
    )
    ctx = np.array([300])
    shapes = grid_family(3, (1, 2), (4, 6))
    shares = shape_shares_s(costs, union, ctx, shapes)
    plain = costs.verify_pass(np.array([1]), ctx, union.base(1)).total_s
    assert shares[0] == 0
    for shape, share in zip(shapes[1:], shares[1:], strict=True):
        n = shape.verified_drafts
        verify = costs.verify_pass(np.array([n + 1]), ctx, union.after(union.base(1), n)).total_s
        draft = tree_draft_phase_s(costs, ctx, np.array([shape.steps]), shape.topk)
        assert share == pytest.approx(verify - plain + draft, rel=1e-9)
    # more verified nodes of the same depth and width cost more
    assert shares[shapes.index(TreeShape(3, 2, 6))] > shares[shapes.index(TreeShape(3, 2, 4))]


def _view(prices: np.ndarray, g: float, memory: float) -> BatchView:
    return BatchView(
        batch_size=2,
        cap=6,
        max_draft_tokens=6,
        request_id=np.arange(2),
        position=np.full(2, 5),
        context_tokens=np.full(2, 100),
        time_per_token_s=g,
        memory=memory,
        shape_prices=lambda: prices,
    )


def test_tree_cost_aware_follows_its_rule():
    policy = TreeCostAwarePolicy(max_steps=4, topks=(1, 2), budgets=(4, 6))
    shapes = policy.tree_family()
    free = policy.decide(_view(np.zeros(len(shapes)), 1e-3, 0.8))
    gains = expected_lengths(shapes, 0.8, policy.rank_decay)
    assert (free == int(np.argmax(gains))).all()  # free shapes: the longest expected AL
    dear = policy.decide(_view(np.full(len(shapes), 1.0), 1e-3, 0.8))
    assert (dear == 0).all()  # every shape costs more than its tokens are worth
    prices = np.linspace(0, 1e-3, len(shapes))
    chosen = policy.decide(_view(prices, 2e-3, 0.6))[0]
    net = 2e-3 * (expected_lengths(shapes, 0.6, policy.rank_decay) - 1) - prices
    net[0] = 0
    assert chosen == int(np.argmax(net))


def test_tree_cost_aware_forgets_a_hard_stretch():
    policy = TreeCostAwarePolicy()
    from simspec.policies.base import StepFeedback

    low = policy.observe(0.1, StepFeedback(1, 0, 0, 1e-3, np.array([0])))
    assert 0.1 < low < policy.initial_alpha  # nobody drafted: back towards the prior


def test_tree_policies_are_registered():
    assert {"fixed_tree", "tree_cost_aware"} <= set(POLICIES.names())
