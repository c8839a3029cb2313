"""StepPlan's reuse of cost-model answers within a step changes no price."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simspec import catalog
from simspec.costs.roofline import RooflineCostModel
from simspec.sim.marginal import StepPlan, UnionModel

COSTS = RooflineCostModel(
    target=catalog.get_model("qwen3-30b-a3b"),
    drafter=catalog.get_drafter("eagle3-qwen3-30b-a3b"),
    gpu=catalog.get_gpu("h100-sxm"),
)
UNION = UnionModel(128, 8, 48, 0.38)


def _plan(contexts: np.ndarray, alpha: float | None) -> StepPlan:
    return StepPlan(COSTS, UNION, contexts, None, alpha, 6)


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 12),
    alpha=st.one_of(st.none(), st.floats(0.05, 0.95)),
    seed=st.integers(0, 2**32 - 1),
)
def test_memoised_prices_equal_fresh_prices(batch, alpha, seed):
    """The engine's question pattern (who joins without the fixed part, then who pays with it,
    then add the drafts) on one plan, against the same questions with every memo emptied."""
    rng = np.random.default_rng(seed)
    contexts = rng.integers(10, 4000, batch)
    kept, fresh = _plan(contexts, alpha), _plan(contexts, alpha)
    drafting = list(range(batch))
    for _ in range(4):
        extend = [b for b in drafting if rng.random() < 0.7]
        for ids, overhead in ((drafting, False), (extend, True), (extend, True)):
            fresh._memo.clear()
            fresh._overheads.clear()
            got = kept.share_cost_s(ids, step_overhead=overhead)
            assert got == fresh.share_cost_s(ids, step_overhead=overhead)
        kept.add_drafts(extend)
        fresh.add_drafts(extend)
        drafting = extend


def _old_add_drafts(plan: StepPlan, requests) -> tuple[list[int], list[list[int]]]:
    """The per-request loop add_drafts replaced, on copies."""
    tokens = plan.tokens.copy()
    depth_contexts = [list(d) for d in plan.depth_contexts]
    for b in requests:
        depth = int(tokens[b])
        while len(depth_contexts) < depth:
            depth_contexts.append([])
        depth_contexts[depth - 1].append(int(plan.contexts[b]) + depth - 1)
        tokens[b] += 1
    return tokens.tolist(), depth_contexts


@settings(max_examples=60, deadline=None)
@given(
    batch=st.integers(1, 10),
    rounds=st.lists(st.lists(st.integers(0, 9), max_size=12), max_size=5),
)
def test_add_drafts_equals_the_per_request_loop(batch, rounds):
    """Same depths, distinct requests (the vectorised case) or not (repeats, mixed depths)."""
    plan = _plan(np.arange(batch) * 100 + 7, 0.5)
    for requests in rounds:
        requests = [r % batch for r in requests]
        want = _old_add_drafts(plan, requests)
        plan.add_drafts(requests)
        assert (plan.tokens.tolist(), plan.depth_contexts) == want
