"""Data-parallel attention (simspec.costs.parallel): every part of a pass but the routed experts
runs on the busiest attention group's requests, the routed experts on every token.

The checks compare a pass of B requests over d groups with the same model on one group alone
serving ceil(B / d) of those requests, which is what the busiest group runs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simspec import catalog
from simspec.costs.parallel import Parallelism, attention_share
from simspec.costs.passes import pass_constants, pass_cost
from simspec.costs.roofline import RooflineCostModel
from simspec.params import RooflineParams

GPU = catalog.get_gpu("h200")
MODEL = catalog.get_model("deepseek-v3")


def _constants(parallel: Parallelism):
    return pass_constants(
        MODEL.shape, GPU, RooflineParams(), 8, parallel=parallel, hidden_size=MODEL.hidden_size
    )


@pytest.mark.parametrize(("requests", "groups"), [(1, 8), (7, 8), (8, 8), (9, 8), (64, 4), (3, 1)])
def test_the_share_is_the_busiest_groups_requests(requests, groups):
    split = Parallelism(tensor=8 // groups, expert=8, attention_groups=groups)
    share = attention_share(split, float(requests))
    assert share * requests == pytest.approx(math.ceil(requests / groups))
    assert share == 1.0 or groups > 1


def test_scenario_keys_make_groups_only_when_experts_leave_the_group():
    assert Parallelism.of(8, 1, 8).attention_groups == 8
    assert Parallelism.of(8, 2, 8).attention_groups == 4
    assert Parallelism.of(8, 8, 8).attention_groups == 1  # EP inside the TP group
    assert Parallelism.of(8, 2, 1).attention_groups == 1  # replicas: not modelled


@pytest.mark.parametrize("batch", [8, 16, 64])
def test_attention_of_a_balanced_batch_is_one_groups(batch):
    """Equal requests spread over 8 one-GPU groups: the attention (KV reads, projections) of
    the pass is that of one GPU serving batch / 8 of them; the routed experts still see the
    whole batch's union."""
    dp = _constants(Parallelism.of(8, 1, 8))
    alone = _constants(Parallelism(tensor=1, expert=8, attention_groups=1))
    tokens, ctx = np.ones(batch), np.full(batch, 4000.0)
    unique = np.full(MODEL.shape.num_moe_layers, 100.0)
    per_group = batch // 8
    whole = pass_cost(dp, tokens, ctx, unique)
    group = pass_cost(alone, tokens[:per_group], ctx[:per_group], unique)
    assert whole.attention_s == pytest.approx(group.attention_s, rel=1e-12)
    assert whole.other_s == pytest.approx(group.other_s, rel=1e-12)
    # The routed experts: all batch·k rows over the 8 ranks' experts, more than one group's.
    assert whole.moe_s >= group.moe_s
    # Without the groups one GPU would read every request's KV cache: the KV part of the
    # attention, beyond one group's, grows with the batch.
    crowded = pass_cost(alone, tokens, ctx, unique)
    assert crowded.attention_s - group.attention_s > 0.5 * (batch / per_group - 1) * (
        group.attention_s - pass_cost(alone, tokens[:0], ctx[:0], unique).attention_s
    )


def test_one_request_runs_on_one_group_whatever_the_groups():
    dp = _constants(Parallelism.of(8, 1, 8))
    alone = _constants(Parallelism(tensor=1, expert=8, attention_groups=1))
    args = (np.ones(1), np.array([2000.0]), np.full(MODEL.shape.num_moe_layers, 8.0))
    assert pass_cost(dp, *args).total_s == pass_cost(alone, *args).total_s


def test_draft_steps_run_on_the_busiest_group():
    """An EAGLE-3 head under data-parallel attention drafts the busiest group's requests: the
    same time as the head on one GPU drafting ceil(B / d) of them."""

    def model(gpus, tp, ep):
        return RooflineCostModel(
            target=MODEL,
            drafter=catalog.get_drafter("eagle3-deepseek-v3"),
            gpu=GPU,
            num_gpus=gpus,
            tensor_parallel=tp,
            expert_parallel=ep,
        )

    dp, one = model(8, 1, 8), model(1, 1, 1)
    ctx = np.full(24, 3000, dtype=np.int64)
    assert dp.draft_step(ctx) == pytest.approx(one.draft_step(ctx[:3]), rel=1e-12)
    ks = np.full(24, 3, dtype=np.int64)
    assert dp.draft_phase_s(ctx, ks) == pytest.approx(one.draft_phase_s(ctx[:3], ks[:3]), rel=1e-12)
    assert dp.draft_phase_s(ctx, ks) < one.draft_phase_s(ctx, ks)
