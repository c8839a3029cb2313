"""The verify pass's attention mask and the draft steps' sampling, each against its closed form.

Mask: SGLang's target-verify mask has n_b·(c_b + n_b) entries per request; its build kernel
writes one byte each, FlashInfer packs them into bits (one read, an eighth written) and every
attention layer reads the packed bits. Sampling: softmax and top-k read and write 3 · V · 4
bytes per row at one SM's share of HBM bandwidth, rows in waves of one per SM.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from simspec import catalog
from simspec.costs.passes import pass_constants, pass_cost, pass_cost_many
from simspec.costs.roofline import RooflineCostModel
from simspec.params import RooflineParams
from simspec.physics.precision import with_cache_dtypes

H100 = catalog.get_gpu("h100-sxm")
QWEN = catalog.get_model("qwen3-30b-a3b")
DRAFTER = catalog.get_drafter("eagle3-qwen3-30b-a3b")
KV_EFFICIENCY = RooflineParams().kv_efficiency


def _mask_closed_form(model, gpu, params, tokens, ctx) -> float:
    """Entries x (1 byte built + 1 read and 1/8 written by the packing + 1/8 read per
    attention layer) at one GPU's KV bandwidth, plus one packing kernel's floor."""
    layers = sum(g.count for g in model.shape.groups if g.kv_bytes_per_token > 0)
    entries = float(np.sum(tokens * (ctx + tokens)))
    per_entry = 1.0 + (1.0 + 1.0 / 8.0) + layers / 8.0
    bandwidth = gpu.hbm_bytes_per_s * params.kv_efficiency
    return entries * per_entry / bandwidth + gpu.kernel_floor_s(params.cuda_graphs)


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b"])
@pytest.mark.parametrize("gpus", [1, 4])
def test_a_verify_pass_pays_its_mask_by_its_entries(name, gpus):
    model, params = catalog.get_model(name), RooflineParams()
    c = pass_constants(model.shape, H100, params, gpus)
    tokens, ctx = np.array([4, 4, 2]), np.array([1000, 50, 7000])
    unique = np.full(model.shape.num_moe_layers, 20.0)
    cost = pass_cost(c, tokens, ctx, unique)
    # Every rank builds and reads the whole mask: the tensor degree does not divide it.
    assert cost.tree_attention_s == pytest.approx(
        _mask_closed_form(model, H100, params, tokens, ctx), rel=1e-12
    )
    assert cost.total_s == pytest.approx(
        cost.overhead_s
        + cost.moe_s
        + cost.attention_s
        + cost.other_s
        + cost.floors_s
        + cost.collectives_s
        + cost.tree_attention_s,
        rel=1e-15,
    )
    # The array form prices the same pass the same (bit for bit).
    many = pass_cost_many(c, tokens[None], ctx[None], unique[None])
    assert many[0] == cost.total_s


def test_a_plain_decode_and_a_prefill_have_no_mask():
    model = RooflineCostModel(target=QWEN, drafter=DRAFTER, gpu=H100)
    ctx = np.array([100, 200])
    unique = np.full(QWEN.shape.num_moe_layers, 8.0)
    assert model.verify_pass(np.array([1, 1]), ctx, unique).tree_attention_s == 0.0
    assert model.prefill(np.array([500, 300])).tree_attention_s == 0.0
    assert model.verify_pass(np.array([2, 1]), ctx, unique).tree_attention_s > 0.0


def test_the_mask_grows_with_context_times_draft_tokens():
    """n·(c + n): doubling the context at a fixed tree nearly doubles the bytes part."""
    c = pass_constants(QWEN.shape, H100, RooflineParams())
    unique = np.full(QWEN.shape.num_moe_layers, 8.0)
    floor = H100.kernel_floor_graph_s
    one = pass_cost(c, np.array([8]), np.array([1000]), unique).tree_attention_s - floor
    two = pass_cost(c, np.array([8]), np.array([2000]), unique).tree_attention_s - floor
    assert two / one == pytest.approx(8 * 2008 / (8 * 1008), rel=1e-12)


def _draft_wave(gpu, vocab) -> float:
    return 3 * vocab * 4.0 * gpu.num_sms / gpu.hbm_bytes_per_s


@pytest.mark.parametrize("rows", [1, 7, 132, 133, 300])
def test_draft_sampling_runs_in_waves_of_one_row_per_sm(rows):
    model = RooflineCostModel(target=QWEN, drafter=DRAFTER, gpu=H100)
    vocab = DRAFTER.draft_vocab_size
    expected = math.ceil(rows / H100.num_sms) * _draft_wave(H100, vocab)
    assert model.draft_sampling_s(rows) == pytest.approx(expected, rel=1e-12)


def test_a_draft_step_pays_its_sampling_and_a_head_without_its_own_vocab_uses_the_targets():
    ctx = np.array([100, 200, 300])
    model = RooflineCostModel(target=QWEN, drafter=DRAFTER, gpu=H100)
    wider = dataclasses.replace(DRAFTER, draft_vocab_size=0)  # samples the target vocabulary
    other = RooflineCostModel(target=QWEN, drafter=wider, gpu=H100)
    # The LM head's bytes grow with the vocabulary too: compare the sampling parts alone.
    assert other.draft_sampling_s(3) / model.draft_sampling_s(3) == pytest.approx(
        QWEN.shape.vocab_size / DRAFTER.draft_vocab_size, rel=1e-12
    )
    one_sm = dataclasses.replace(H100, num_sms=1)
    slow = RooflineCostModel(target=QWEN, drafter=DRAFTER, gpu=one_sm)
    # One SM: every row is a wave. Three rows cost two waves more than one row would, on top
    # of what the head's weights, KV and floors add for the two extra requests.
    wave = _draft_wave(one_sm, DRAFTER.draft_vocab_size)
    assert slow.draft_sampling_s(3) - slow.draft_sampling_s(1) == pytest.approx(2 * wave)
    assert slow.draft_step(ctx) - model.draft_step(ctx) == pytest.approx(
        3 * wave - model.draft_sampling_s(3), rel=1e-9
    )


def test_a_draft_extend_samples_one_row_per_request():
    """A draft extend samples one row per request, as the one-row first draft step it widens
    does, so it adds no sampling to that step; a second extend pass samples in full. On one
    SM every sampled row is a wave: 2 requests against 1 (same tokens fed) differ by one."""
    one_sm = dataclasses.replace(H100, num_sms=1)
    wave = _draft_wave(one_sm, DRAFTER.draft_vocab_size)
    kv = DRAFTER.head_kv_bytes_per_token(QWEN.kv_cache_bytes)
    entry = kv / (RooflineParams().kv_efficiency * one_sm.hbm_bytes_per_s)  # one KV entry read
    for passes, waves in ((1.0, 0), (2.0, 1)):
        params = RooflineParams(draft_extend_passes=passes)
        model = RooflineCostModel(target=QWEN, drafter=DRAFTER, gpu=one_sm, params=params)
        two = model.speculation_overhead_s(np.array([3, 3]), np.array([100, 100]))
        one = model.speculation_overhead_s(np.array([6]), np.array([200]))
        # The widened step: 2 x 2 extra rows against 5 (KV entries beyond the one-row step's).
        assert two - one == pytest.approx(waves * wave - entry, rel=1e-9)


NEXT = catalog.get_model("qwen3-next-80b-a3b")


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_a_verify_pass_keeps_a_linear_attention_state_per_verified_token(gpus):
    """Gated DeltaNet layers fold each token into a float32 state of value heads × key dim ×
    value dim, split over the tensor ranks with the value heads. A decode step reads and
    writes one per request; a verify of n_b tokens reads it, writes the state after each
    token and then copies the accepted one into the request's slot (a read and a write):
    n_b + 1 states more."""
    a, params = NEXT.attention, RooflineParams()
    linear_layers = NEXT.num_layers - NEXT.num_layers // a.full_attention_interval  # 3 in 4
    state = 4.0 * a.linear_num_value_heads * a.linear_key_head_dim * a.linear_value_head_dim
    c = pass_constants(NEXT.shape, H100, params, gpus)
    tokens, ctx = np.array([4, 1, 3]), np.array([1000, 50, 7000])
    unique = np.full(NEXT.shape.num_moe_layers, 30.0)
    masked = dataclasses.replace(c, verify_state_bytes=0.0)
    extra = pass_cost(c, tokens, ctx, unique).tree_attention_s
    extra -= pass_cost(masked, tokens, ctx, unique).tree_attention_s
    bandwidth = H100.hbm_bytes_per_s * gpus * params.kv_efficiency
    assert extra == pytest.approx((5 + 2 + 4) * linear_layers * state / bandwidth, rel=1e-12)
    # A decode step and a prefill keep no more than their one state.
    drafter = catalog.get_drafter("eagle3-qwen3-next-80b-a3b")
    model = RooflineCostModel(target=NEXT, drafter=drafter, gpu=H100)
    assert model.verify_pass(np.array([1, 1]), ctx[:2], unique).tree_attention_s == 0.0
    assert model.prefill(np.array([500, 300])).tree_attention_s == 0.0
    # A model without linear attention keeps none.
    assert pass_constants(QWEN.shape, H100, params, gpus).verify_state_bytes == 0.0


def test_an_fp8_kv_cache_halves_the_heads_kv_reads_too():
    """The engine's --kv-cache-dtype sets the draft head's cache as the target's: at a context
    long enough for KV reads to matter, a draft step reads half the head's KV bytes."""
    ctx = np.full(4, 32_000.0)
    bf16 = RooflineCostModel(target=QWEN, drafter=DRAFTER, gpu=H100)
    fp8 = RooflineCostModel(target=with_cache_dtypes(QWEN, "fp8"), drafter=DRAFTER, gpu=H100)
    seen = (ctx + 1).sum()  # each drafted token attends to itself as well
    kv_s = seen * DRAFTER.head_kv_bytes_per_token() / (H100.hbm_bytes_per_s * KV_EFFICIENCY)
    assert bf16.draft_step(ctx) - fp8.draft_step(ctx) == pytest.approx(kv_s / 2, rel=1e-9)
