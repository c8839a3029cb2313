"""Budget policies: their rules, their contracts, and the cost oracle behind cost_aware."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simspec import catalog
from simspec.costs.roofline import RooflineCostModel
from simspec.policies import (
    POLICIES,
    AdaptiveEmaPolicy,
    BatchTablePolicy,
    BatchView,
    CostAwarePolicy,
    FixedPolicy,
    StepFeedback,
    ThresholdPolicy,
)
from simspec.sim.engine import run_policy
from simspec.sim.marginal import StepPlan, UnionModel
from simspec.sim.setup import build_setup
from tests.helpers import tiny


def _constant_price(price: float):
    """A depth decider at one price for every share (the batch protocol's two questions)."""

    def decide(batch):
        def by_depth(limit, agree):
            ks = np.zeros(batch, dtype=np.int64)
            drafting = np.arange(batch)
            for k in range(limit):
                drafting = drafting[np.asarray(agree(drafting, k, lambda: price), dtype=bool)]
                ks[drafting] += 1
            return ks

        return by_depth

    return decide


def _view(confidences, *, price: float | None = None, cap: int = 8, **kw) -> BatchView:
    """A view of requests whose draft-slot confidences are the rows of ``confidences``."""
    conf = np.atleast_2d(np.asarray(confidences, dtype=float))
    n = len(conf)
    pad = np.ones((n, max(cap + 1 - conf.shape[1], 0)))  # slots past the given ones
    fields = {
        "batch_size": n,
        "cap": cap,
        "max_draft_tokens": 8,
        "request_id": np.arange(n),
        "position": np.full(n, 5),
        "context_tokens": np.full(n, 100),
        "confidences": np.hstack([conf, pad])[:, : cap + 1],
        "depth_decider": None if price is None else _constant_price(price)(n),
    }
    fields.update(kw)
    return BatchView(**fields)


def _drafts(policy, confidences, **kw) -> int:
    """Drafts one request makes given its slot confidences (then confidence 0: it stops)."""
    conf = [*confidences, 0.0]
    cap = min(policy.budget_cap(8), len(confidences))
    return int(policy.decide(_view([conf], cap=cap, **kw))[0])


def test_per_token_threshold_stops_before_a_low_confidence_draft():
    p = ThresholdPolicy(tau=0.5)
    assert _drafts(p, [0.9, 0.8, 0.4, 0.9]) == 2
    assert _drafts(p, [0.3, 0.9]) == 0


def test_cumulative_threshold_uses_the_product():
    p = ThresholdPolicy(tau=0.6, mode="cumulative")
    # Products 0.9, 0.72, 0.648, then 0.583 < 0.6: three drafts; per-token would take all four.
    assert _drafts(p, [0.9, 0.8, 0.9, 0.9]) == 3
    assert _drafts(ThresholdPolicy(tau=0.6), [0.9, 0.8, 0.9, 0.9]) == 4


@settings(max_examples=200, deadline=None)
@given(conf=st.lists(st.floats(0, 1), min_size=1, max_size=8), tau=st.floats(0, 1))
def test_cumulative_never_drafts_more_than_per_token(conf, tau):
    per_token = _drafts(ThresholdPolicy(tau=tau), conf)
    cumulative = _drafts(ThresholdPolicy(tau=tau, mode="cumulative"), conf)
    assert cumulative <= per_token
    assert cumulative == sum(
        1
        for j in range(len(conf))
        if math.prod(conf[: j + 1]) >= tau
        and all(math.prod(conf[: i + 1]) >= tau for i in range(j))
    )


def test_threshold_tau_zero_equals_fixed_max_tokens_step_by_step():
    setup = build_setup(tiny("workload.num_requests=3", "acceptance.alpha=0.6"))
    a = run_policy(setup, ThresholdPolicy(tau=0.0, max_tokens=5))
    b = run_policy(setup, FixedPolicy(draft_tokens=5))
    assert a.steps == b.steps
    assert a.requests == b.requests


def test_cumulative_drafts_less_than_per_token_in_the_engine():
    setup = build_setup(tiny("workload.num_requests=4", "acceptance.alpha=0.7"))
    per = run_policy(setup, ThresholdPolicy(tau=0.5))
    cum = run_policy(setup, ThresholdPolicy(tau=0.5, mode="cumulative"))
    mean = lambda log: sum(s.drafted for s in log.steps) / sum(s.batch_size for s in log.steps)  # noqa: E731
    assert mean(cum) < mean(per)


def test_batch_table_lookup():
    p = BatchTablePolicy(batch_sizes=(1, 8, 32), draft_tokens=(5, 3, 1))
    assert [p.draft_length(b) for b in (1, 7, 8, 31, 32, 500)] == [5, 5, 3, 3, 1, 1]
    assert _drafts(p, [0.9] * 8) == 5
    assert p.budget_cap(8) == 5 and p.budget_cap(2) == 2


def test_adaptive_ema_tiers_with_warmup_interval_and_hysteresis():
    p = AdaptiveEmaPolicy(
        tiers=(1, 3, 7),
        initial_tier=3,
        ema_weight=0.5,
        warmup_steps=2,
        update_interval=2,
        down_hysteresis=0.25,
    )
    assert [p.tier_for(x) for x in (0.0, 0.4, 1.0, 1.6, 2.0, 5.0, 9.0)] == [1, 1, 3, 3, 3, 7, 7]
    mem = p.initial_memory()
    # Every request accepts 6 drafts: EMA 6 -> tier 7, but only at step 2 (warm-up).
    mem = p.observe(mem, StepFeedback(batch_size=2, drafted=6, accepted=12, step_s=1.0))
    assert (mem.ema, mem.steps, mem.tier) == (6.0, 1, 3)
    mem = p.observe(mem, StepFeedback(2, 6, 12, 1.0))
    assert (mem.steps, mem.tier) == (2, 7)
    # Nothing accepted: EMA 3.0 at step 3 (no update allowed), 1.5 at step 4 -> round(1.5)+1 = 3.
    mem = p.observe(mem, StepFeedback(2, 14, 0, 1.0))
    assert (mem.ema, mem.tier) == (3.0, 7)
    mem = p.observe(mem, StepFeedback(2, 14, 0, 1.0))
    assert (mem.ema, mem.tier) == (1.5, 3)
    assert p.decide(_view([[0.5] * 9, [0.5] * 9], memory=mem)).tolist() == [3, 3]


def test_adaptive_ema_hysteresis_blocks_a_marginal_move_down():
    p = AdaptiveEmaPolicy(
        tiers=(1, 3),
        initial_tier=3,
        ema_weight=1.0,
        warmup_steps=0,
        update_interval=1,
        down_hysteresis=0.25,
    )
    mem = p.initial_memory()
    # EMA 0.4: round(0.4) + 1 = 1 -> tier 1 wanted, but round(0.4 + 0.25) + 1 = 2 -> tier 3 kept.
    mem = p.observe(mem, StepFeedback(10, 30, 4, 1.0))
    assert mem.tier == 3
    mem = p.observe(mem, StepFeedback(10, 30, 1, 1.0))  # EMA 0.1 -> 0.35 rounds to 0 -> tier 1
    assert mem.tier == 1


def test_adaptive_ema_parameters_are_validated():
    from simspec.errors import FieldError

    with pytest.raises(FieldError):
        AdaptiveEmaPolicy(tiers=(3, 1))
    with pytest.raises(FieldError):
        AdaptiveEmaPolicy(tiers=(1, 3), initial_tier=2)
    with pytest.raises(FieldError):
        BatchTablePolicy(batch_sizes=(1, 8), draft_tokens=(2,))


def test_cost_aware_rule():
    p = CostAwarePolicy()
    conf = [0.9, 0.9, 0.9, 0.9]  # chain products 0.9, 0.81, 0.729, 0.656
    assert _drafts(p, conf, price=0.7e-3, time_per_token_s=1e-3) == 3  # 0.729 ms > 0.7 ms
    assert _drafts(p, conf, price=0.5e-3, time_per_token_s=1e-3) == 4
    assert _drafts(p, conf, price=0.95e-3, time_per_token_s=1e-3) == 0
    assert _drafts(p, conf, price=0.0, time_per_token_s=0.0) == 0  # no price of a token yet


def test_union_model_closed_forms():
    indep = UnionModel(128, 8, 2, overlap=8 / 128)
    u = np.array([8.0, 64.0])
    assert indep.added(u) == pytest.approx(8 * (128 - u) / 128)
    assert indep.base(4) == pytest.approx(128 * (1 - (1 - 8 / 128) ** 4))
    sticky = UnionModel(128, 8, 2, overlap=1.0)
    assert sticky.added(u) == pytest.approx([0.0, 0.0])
    assert indep.added(np.array([128.0, 128.0])) == pytest.approx([0.0, 0.0])


def test_marginal_cost_dense_is_a_draft_step_and_moe_adds_experts():
    h100 = catalog.get_gpu("h100-sxm")
    dense = RooflineCostModel(
        target=catalog.get_model("qwen3-8b"),
        drafter=catalog.get_drafter("eagle3-qwen3-8b"),
        gpu=h100,
    )
    plan = StepPlan(dense, UnionModel(0, 0, 0, 0.0), np.array([512]))
    step = dense.draft_step(np.array([512]))
    assert plan.marginal_cost_s(0) == pytest.approx(step, rel=0.05)
    moe_model = catalog.get_model("qwen3-30b-a3b")
    moe = RooflineCostModel(
        target=moe_model, drafter=catalog.get_drafter("eagle3-qwen3-30b-a3b"), gpu=h100
    )
    union = UnionModel(128, 8, 48, overlap=0.38)
    plan = StepPlan(moe, union, np.array([512]))
    assert plan.marginal_cost_s(0) > 2 * moe.draft_step(np.array([512]))
    saturated = StepPlan(moe, union, np.full(256, 512))  # 256 tokens cover every expert
    draft_alone = moe.draft_step(np.array([512]))
    assert saturated.marginal_cost_s(0) < 1.5 * draft_alone
    before = plan.union.copy()
    plan.add_draft(0)
    assert (plan.union > before).all() and plan.tokens[0] == 2


@pytest.mark.parametrize("name", POLICIES.names())
def test_every_policy_conserves_tokens_and_respects_its_cap(name):
    policy = POLICIES.create(name)
    setup = build_setup(tiny("workload.num_requests=3", "workload.concurrency=2"))
    cap = min(policy.budget_cap(setup.max_draft_tokens), setup.max_draft_tokens)
    log = run_policy(setup, policy)
    family = policy.tree_family()  # a tree-aware policy's cap is on depth: its nodes may be more
    nodes = cap if family is None else max(s.verified_drafts for s in family if s.steps <= cap)
    assert all(0 <= s.drafted <= nodes * s.batch_size for s in log.steps)
    assert all(r.committed == r.output_tokens for r in log.requests)
    assert all(0 <= r.accepted <= r.drafted for r in log.requests)


def _reference_threshold(policy: ThresholdPolicy, conf: list[float], cap: int) -> int:
    """The threshold rule for one request, straight from its definition."""
    k = 0
    while k < min(cap, policy.max_tokens):
        value = math.prod(conf[: k + 1]) if policy.mode == "cumulative" else conf[k]
        if value < policy.tau:
            break
        k += 1
    return k


_POLICY = st.one_of(
    st.sampled_from(POLICIES.names()).map(POLICIES.create),
    st.builds(
        ThresholdPolicy,
        tau=st.floats(0, 1),
        mode=st.sampled_from(["per_token", "cumulative"]),
        max_tokens=st.integers(0, 8),
    ),
    st.builds(CostAwarePolicy, max_tokens=st.integers(0, 8), margin=st.floats(0.01, 100)),
    st.builds(FixedPolicy, draft_tokens=st.integers(0, 12)),
)


@settings(max_examples=300, deadline=None)
@given(
    policy=_POLICY,
    n=st.integers(1, 12),
    max_draft=st.integers(0, 10),
    g=st.sampled_from([0.0, 1e-3, 2e-2]),
    price=st.floats(0, 3e-2),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_decision_is_within_the_caps_and_thresholds_follow_their_definition(
    policy, n, max_draft, g, price, seed
):
    rng = np.random.default_rng(seed)
    cap = min(policy.budget_cap(max_draft), max_draft)
    conf = rng.random((n, cap + 1))
    conf[rng.random((n, cap + 1)) < 0.1] = 1.0  # products of ones
    if isinstance(policy, ThresholdPolicy):  # confidences exactly at the threshold
        conf[rng.random((n, cap + 1)) < 0.2] = policy.tau
    view = _view(conf, price=price, cap=cap, max_draft_tokens=max_draft, time_per_token_s=g)
    ks = np.asarray(policy.decide(view))
    assert ks.shape == (n,) and ks.dtype.kind == "i"
    family = policy.tree_family()
    if family is None:
        assert ((ks >= 0) & (ks <= cap)).all()
    else:  # indices into its shapes (the engine clips a shape's depth to the cap)
        assert ((ks >= 0) & (ks < len(family))).all()
        assert cap > 0 or all(family[k].steps == 0 for k in ks.tolist())
    if isinstance(policy, ThresholdPolicy):
        want = [_reference_threshold(policy, conf[b].tolist(), cap) for b in range(n)]
        assert ks.tolist() == want
