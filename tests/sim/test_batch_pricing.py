"""Batch pricing of shared draft/verify costs, and the probe step a confidence read costs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simspec import catalog
from simspec.costs.roofline import RooflineCostModel
from simspec.policies import POLICIES, BatchView, CostAwarePolicy, FixedPolicy, ThresholdPolicy
from simspec.sim.engine import run_policy
from simspec.sim.marginal import StepPlan, UnionModel
from simspec.sim.setup import build_setup
from tests.helpers import tiny

H100 = catalog.get_gpu("h100-sxm")


def _moe() -> RooflineCostModel:
    return RooflineCostModel(
        target=catalog.get_model("qwen3-30b-a3b"),
        drafter=catalog.get_drafter("eagle3-qwen3-30b-a3b"),
        gpu=H100,
    )


@settings(max_examples=100, deadline=None)
@given(
    union=st.floats(0, 128),
    drafts=st.integers(0, 40),
    overlap=st.floats(0, 1),
)
def test_union_after_n_drafts_is_the_recursion_in_closed_form(union, drafts, overlap):
    model = UnionModel(128, 8, 1, overlap)
    step = np.array([union])
    for _ in range(drafts):
        step = step + model.added(step)
    assert model.after(np.array([union]), drafts) == pytest.approx(step, abs=1e-9)


def test_dense_share_splits_the_draft_step_and_the_verify_growth_evenly():
    dense = RooflineCostModel(
        target=catalog.get_model("qwen3-8b"),
        drafter=catalog.get_drafter("eagle3-qwen3-8b"),
        gpu=H100,
    )
    contexts = np.array([500, 600, 700, 800])
    plan = StepPlan(dense, UnionModel(0, 0, 0, 0.0), contexts)
    none = np.zeros(0)
    group = [0, 2, 3]
    verify = dense.verify_pass(np.array([2, 1, 2, 2]), contexts, none).total_s
    verify -= dense.verify_pass(np.ones(4, dtype=np.int64), contexts, none).total_s
    draft = dense.draft_step(contexts[group])
    assert plan.share_cost_s(group) == pytest.approx((verify + draft) / 3, rel=1e-12)
    plan.add_draft(0)  # request 0 now drafts at depth 2; 2 and 3 join its depth-1 step
    draft = dense.draft_step(np.array([501])) + dense.draft_step(contexts[[0, 2, 3]])
    draft -= dense.draft_step(contexts[[0]])
    verify = dense.verify_pass(np.array([3, 1, 2, 2]), contexts, none).total_s
    verify -= dense.verify_pass(np.array([2, 1, 1, 1]), contexts, none).total_s
    assert plan.share_cost_s(group) == pytest.approx((verify + draft) / 3, rel=1e-12)


def test_sharing_the_draft_step_makes_each_share_cheaper_than_going_alone():
    moe = _moe()
    contexts = np.full(32, 640)
    union = UnionModel(128, 8, 48, overlap=0.38)
    plan = StepPlan(moe, union, contexts)
    alone = plan.marginal_cost_s(0)
    assert alone > moe.draft_step(contexts[:1])  # the whole step and more
    assert plan.share_cost_s(range(32)) < alone / 4
    # At batch size 1 the share is the request's own marginal cost, whole draft step included.
    single = StepPlan(moe, union, contexts[:1])
    assert single.share_cost_s([0]) == single.marginal_cost_s(0) > moe.draft_step(contexts[:1])


def test_expected_drafts_price_the_verify_at_the_step_end():
    """Experts are shared across depths: a token's marginal is taken at the expected end union."""
    moe, union = _moe(), UnionModel(128, 8, 48, overlap=0.38)
    contexts = np.full(8, 640)
    now = StepPlan(moe, union, contexts)
    later = StepPlan(moe, union, contexts, expected_drafts=6)
    assert later.share_cost_s(range(8)) < now.share_cost_s(range(8))
    ahead = 6 * 7 // 8  # the other 7 of 8 requests' share of 6 drafts each: 5 per request
    end = union.after(now.union, 8 * ahead)
    tokens = np.full(8, 1 + ahead)
    verify = moe.verify_pass(tokens + 1, contexts, union.after(end, 8)).total_s
    verify -= moe.verify_pass(tokens, contexts, end).total_s
    draft = moe.draft_step(contexts)
    assert later.share_cost_s(range(8)) == pytest.approx((verify + draft) / 8, rel=1e-12)
    # Alone in the batch, a request's own later drafts are not assumed: its plain marginal cost.
    single = StepPlan(moe, union, contexts[:1], expected_drafts=6)
    assert single.share_cost_s([0]) == StepPlan(moe, union, contexts[:1]).share_cost_s([0])


def test_joining_a_running_step_is_priced_without_its_fixed_part():
    moe, union = _moe(), UnionModel(128, 8, 48, overlap=0.38)
    contexts = np.full(8, 640)
    plan = StepPlan(moe, union, contexts)
    one, two = moe.draft_step(contexts[:1]), moe.draft_step(contexts[:2])
    overhead = plan.step_overhead_s(640)
    assert overhead == pytest.approx(2 * one - two, rel=1e-12) and 0 < overhead <= one
    group = [1, 3, 4]
    joined = plan.share_cost_s(group, step_overhead=False)
    assert joined == pytest.approx(plan.share_cost_s(group) - overhead / 3, rel=1e-12)
    plan.add_drafts([0])  # depth 1 now has a runner: nothing fixed is left to leave out
    assert plan.share_cost_s(group, step_overhead=False) == plan.share_cost_s(group)


def test_anchor_is_the_best_uniform_draft_length_for_the_acceptance():
    moe, union = _moe(), UnionModel(128, 8, 48, overlap=0.38)
    plan = StepPlan(moe, union, np.full(8, 640))
    assert plan.anchor_drafts(0.0, 8) == 0  # nothing is ever accepted: drafting only costs
    assert plan.anchor_drafts(1.0, 8) == 8  # everything is accepted: draft to the cap
    ks = [plan.anchor_drafts(a, 8) for a in np.linspace(0, 1, 21)]
    assert ks == sorted(ks)  # more acceptance never asks for shorter drafts
    # By hand at alpha = 0.7: argmin over k of estimated seconds per committed token.
    per_token = []
    for k in range(9):
        cost = moe.verify_pass(np.full(8, k + 1), plan.contexts, union.after(plan.union, 8 * k))
        steps = sum(moe.draft_step(plan.contexts + j) for j in range(k))
        per_token.append((cost.total_s + steps) / (8 * (1 - 0.7 ** (k + 1)) / 0.3))
    assert plan.anchor_drafts(0.7, 8) == int(np.argmin(per_token))


def test_policies_that_do_not_declare_a_confidence_read_are_not_shown_one():
    for name in POLICIES.names():
        policy = POLICIES.create(name)
        view = BatchView(
            batch_size=3,
            cap=min(policy.budget_cap(8), 8),
            max_draft_tokens=8,
            request_id=np.arange(3),
            position=np.full(3, 5),
            context_tokens=np.full(3, 100),
            time_per_token_s=1e-3,
        )
        if policy.reads_confidence:  # it needs them: the engine shows them
            with pytest.raises((AssertionError, TypeError)):
                policy.decide(view)
        else:
            ks = policy.decide(view)
            assert ks.shape == (3,) and (ks >= 0).all() and (ks <= view.cap).all()


def test_confidence_readers_are_declared():
    assert ThresholdPolicy.reads_confidence and CostAwarePolicy.reads_confidence
    assert not FixedPolicy.reads_confidence


def test_a_declined_confidence_read_is_charged_one_draft_step_and_not_verified():
    """B = 1, per-token threshold: exact trace of drafts, probes and draft time per step."""
    s = tiny(
        "acceptance.alpha=0.6",
        "workload.concurrency=1",
        "workload.num_requests=1",
        "workload.output_tokens=60",
        "workload.prompt_tokens=10",
    )
    setup = build_setup(s)
    costs, seq = setup.cost_model, setup.references.sequence(0)
    policy = ThresholdPolicy(tau=0.6, max_tokens=4)
    log = run_policy(setup, policy)
    position, probes = 1, 0
    for step in log.steps:
        conf = seq.confidences[position]
        k = next((j for j in range(4) if conf[j] < 0.6), 4)
        probe = int(k < 4)
        ctx = 10 + position
        draft = sum(costs.draft_step(np.array([ctx + j])) for j in range(k + probe))
        assert (step.drafted, step.probes, step.fed_tokens) == (k, probe, k + 1)
        assert step.draft_s == pytest.approx(draft, rel=1e-12)
        position += min(k, int(seq.match_lengths[position])) + 1
        probes += probe
    assert probes > 0
    fixed = run_policy(setup, FixedPolicy(draft_tokens=3))
    assert all(step.probes == 0 for step in fixed.steps)


def test_cost_aware_drafts_at_batch_32():
    """The issue: with the whole draft step charged to the first request, nobody drafted."""
    s = tiny(
        "acceptance.alpha=0.8",
        "workload.concurrency=32",
        "workload.num_requests=32",
        "workload.output_tokens=24",
    )
    log = run_policy(build_setup(s), CostAwarePolicy())
    mean_k = sum(st.drafted for st in log.steps) / sum(st.batch_size for st in log.steps)
    assert mean_k > 3


@pytest.mark.parametrize("batch", [8, 32])
def test_cost_aware_is_within_two_percent_of_the_best_fixed_k(batch):
    from simspec.analysis.experiment import run_experiment

    s = tiny(
        "acceptance.alpha=0.8",
        f"workload.concurrency={batch}",
        f"workload.num_requests={2 * batch}",
        "workload.prompt_tokens=512",
        "workload.output_tokens=128",
        policies=[{"name": "fixed", "draft_tokens": k} for k in range(9)]
        + [{"name": "cost_aware"}],
    )
    rows = {r.label: r.speedup_vs_no_spec for r in run_experiment(s).policies}
    best = max(v for label, v in rows.items() if label.startswith("fixed-"))
    assert rows["cost_aware"] >= 0.98 * best
