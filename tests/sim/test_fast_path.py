"""The batch fast path (``draft_lengths``) decides exactly what the per-token loop decides."""

from __future__ import annotations

import dataclasses
import json

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
    ThresholdPolicy,
    batch_draft_lengths,
    initial_memory,
    reads_confidence,
)
from simspec.policies.adaptive_ema import EmaMemory
from simspec.sim.decide import StepRequests, decide_step
from simspec.sim.engine import run_policy
from simspec.sim.marginal import StepPlan, UnionModel
from simspec.sim.setup import build_setup
from tests.helpers import tiny

COSTS = RooflineCostModel(
    target=catalog.get_model("qwen3-30b-a3b"),
    drafter=catalog.get_drafter("eagle3-qwen3-30b-a3b"),
    gpu=catalog.get_gpu("h100-sxm"),
)


def _offering() -> list[str]:
    return [n for n in POLICIES.names() if batch_draft_lengths(POLICIES.create(n)) is not None]


def test_fixed_batch_table_and_adaptive_ema_offer_the_fast_path():
    assert {"fixed", "batch_table", "adaptive_ema"} <= set(_offering())
    assert batch_draft_lengths(POLICIES.create("threshold")) is None  # reads confidences


def _per_token(policy, view: BatchView, rng: np.random.Generator) -> np.ndarray:
    batch = view.batch_size
    position = rng.integers(1, 50, batch)
    contexts = rng.integers(1, 500, batch) + position
    requests = StepRequests(
        np.arange(batch),
        position,
        contexts,
        rng.random((batch, view.cap + 1)),
        [()] * batch,
        [()] * batch,
    )
    plan = StepPlan(COSTS, UnionModel(128, 8, 48, 0.38), contexts, None, 0.7, view.cap)
    ks, probes = decide_step(policy, requests, plan, view)
    assert not probes.any()
    return ks


_POLICY = st.one_of(
    st.sampled_from(_offering()).map(POLICIES.create),
    st.builds(FixedPolicy, draft_tokens=st.integers(0, 12)),
    st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True).flatmap(
        lambda tiers: st.builds(
            AdaptiveEmaPolicy,
            tiers=st.just(tuple(sorted(tiers))),
            initial_tier=st.sampled_from(sorted(tiers)),
        )
    ),
    st.lists(st.integers(1, 64), min_size=1, max_size=4, unique=True).flatmap(
        lambda sizes: st.builds(
            BatchTablePolicy,
            batch_sizes=st.just(tuple(sorted(sizes))),
            draft_tokens=st.tuples(*[st.integers(0, 9) for _ in sizes]),
        )
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    policy=_POLICY,
    batch=st.integers(1, 40),
    max_draft=st.integers(0, 10),
    seed=st.integers(0, 2**32 - 1),
)
def test_draft_lengths_equal_the_per_token_loop(policy, batch, max_draft, seed):
    cap = min(policy.budget_cap(max_draft), max_draft)
    rng = np.random.default_rng(seed)
    history = tuple(float(x) for x in rng.random(int(rng.integers(0, 5))) * 3)
    memory = initial_memory(policy)
    if isinstance(policy, AdaptiveEmaPolicy):  # any tier the policy may be in
        memory = EmaMemory(1.0, 12, int(rng.choice(policy.tiers)))
    view = BatchView(batch, history, 1e-3, memory, max_draft, cap)
    fast = batch_draft_lengths(policy)
    assert fast is not None
    got = fast(view)
    assert got.shape == (batch,)
    np.testing.assert_array_equal(got, _per_token(policy, view, rng))


@dataclasses.dataclass(frozen=True)
class _PerTokenOnly:
    """The same policy without its fast path (the engine's per-token loop)."""

    inner: object

    @property
    def reads_confidence(self):
        return reads_confidence(self.inner)

    def continue_drafting(self, state):
        return self.inner.continue_drafting(state)

    def budget_cap(self, max_draft_tokens):
        return self.inner.budget_cap(max_draft_tokens)


@pytest.mark.parametrize(
    "policy",
    [
        FixedPolicy(draft_tokens=0),
        FixedPolicy(draft_tokens=3),
        BatchTablePolicy(),
        AdaptiveEmaPolicy(warmup_steps=2, update_interval=1),
        ThresholdPolicy(tau=0.6),
        ThresholdPolicy(mode="cumulative", tau=0.4),
        CostAwarePolicy(),
        CostAwarePolicy(margin=3.0),
    ],
    ids=repr,
)
def test_engine_run_is_the_same_with_and_without_the_fast_path(policy):
    """Batch fast path / per-depth path against one DecodeState per request and depth."""
    setup = build_setup(
        tiny("workload.concurrency=3", "workload.num_requests=6", "workload.output_tokens=40")
    )
    fast = run_policy(setup, policy)
    slow = run_policy(setup, _PerTokenOnly(policy))
    assert fast.steps and repr(fast.steps) == repr(slow.steps)
    assert json.dumps([dataclasses.asdict(r) for r in fast.requests]) == json.dumps(
        [dataclasses.asdict(r) for r in slow.requests]
    )
