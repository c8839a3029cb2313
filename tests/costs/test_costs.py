"""Roofline cost model: closed forms, limits and monotonicity."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simspec import catalog
from simspec.costs.passes import target_pass_cost
from simspec.costs.roofline import RooflineCostModel
from simspec.params import RooflineParams
from simspec.physics.experts import independent_union as independent_unique_experts

H100 = catalog.get_gpu("h100-sxm")
QWEN_MOE = catalog.get_model("qwen3-30b-a3b")
NO_OVERHEAD = RooflineParams(pass_overhead_s=0.0)


@pytest.mark.parametrize("model", ["qwen3-8b", "llama-3.1-8b"])
@pytest.mark.parametrize("draft_tokens", [0, 1, 2, 3, 4])
def test_dense_memory_bound_verify_costs_about_one_decode(model, draft_tokens):
    shape = catalog.get_model(model).shape
    ctx = np.array([1024])
    decode = target_pass_cost(shape, H100, NO_OVERHEAD, np.array([1]), ctx, np.zeros(0)).total_s
    verify = target_pass_cost(
        shape, H100, NO_OVERHEAD, np.array([draft_tokens + 1]), ctx, np.zeros(0)
    ).total_s
    assert verify / decode == pytest.approx(1.0, abs=0.05)


def test_dense_decode_time_is_weight_bytes_over_bandwidth():
    """At one token and no context, a dense pass reads its weights once: bytes / (eta * BW)."""
    m = catalog.get_model("llama-3.1-8b")
    shape = m.shape
    cost = target_pass_cost(shape, H100, NO_OVERHEAD, np.array([1]), np.array([0]), np.zeros(0))
    read = shape.total_weight_bytes - shape.embedding_bytes  # the embedding is gathered, not read
    # Only the one token's KV (tiny) comes on top of the weights.
    kv = shape.kv_bytes_per_token * 1 / (NO_OVERHEAD.kv_efficiency * H100.hbm_bytes_per_s)
    expected = read / (NO_OVERHEAD.weight_efficiency * H100.hbm_bytes_per_s) + kv
    # Every kernel's floor on top: 32 layers of 6 attention + 4 FFN kernels, 5 per pass.
    floors = (32 * 10 + 5) * H100.kernel_floor_graph_s
    assert cost.total_s == pytest.approx(expected + floors, rel=1e-9)


def test_moe_efficiency_curve_closed_form():
    p = RooflineParams()
    eb = QWEN_MOE.shape.expert_bytes
    u = np.array([1.0, 8.0, 22.0, 128.0])
    eta = p.moe_efficiency(u, eb)
    assert eta == pytest.approx(0.8 * (1 - np.exp(-u * eb / 94e6)))
    # U0 = 10 for Qwen3-30B-A3B: eta(8) ~ 0.44, eta(22) ~ 0.71 (the curve's documented anchors).
    assert eta[1] == pytest.approx(0.44, abs=0.01)
    assert eta[2] == pytest.approx(0.71, abs=0.01)


def test_routed_expert_term_is_unique_bytes_over_effective_bandwidth():
    shape = QWEN_MOE.shape
    p = dataclasses.replace(NO_OVERHEAD, moe_kernel="saturation")  # the occupancy curve
    one = np.array([1])
    u_small, u_big = np.full(48, 8.0), np.full(48, 40.0)
    small = target_pass_cost(shape, H100, p, one, one, u_small).moe_s
    big = target_pass_cost(shape, H100, p, one, one, u_big).moe_s
    eb = shape.expert_bytes
    expected = 48 * (
        40 * eb / (p.moe_efficiency(np.array(40.0), eb) * H100.hbm_bytes_per_s)
        - 8 * eb / (p.moe_efficiency(np.array(8.0), eb) * H100.hbm_bytes_per_s)
    )
    assert big - small == pytest.approx(float(expected), rel=1e-9)


def test_launch_form_routed_term_grows_by_a_fixed_time_per_expert():
    """Default (launch) form: each distinct expert adds c_e + b / (eta_bw·BW); t0 cancels."""
    shape = QWEN_MOE.shape
    p = NO_OVERHEAD
    assert p.moe_kernel == "launch"
    one = np.array([1])
    small = target_pass_cost(shape, H100, p, one, one, np.full(48, 8.0)).moe_s
    big = target_pass_cost(shape, H100, p, one, one, np.full(48, 40.0)).moe_s
    per_expert = p.moe_expert_s + shape.expert_bytes / (
        p.moe_bandwidth_efficiency * H100.hbm_bytes_per_s
    )
    assert big - small == pytest.approx(48 * 32 * per_expert, rel=1e-9)


def test_independent_unique_experts_formula():
    assert independent_unique_experts(128, 8, 1) == pytest.approx(8.0)
    assert independent_unique_experts(128, 8, 4) / 8 == pytest.approx(3.64, abs=0.01)
    assert independent_unique_experts(0, 0, 10) == 0.0


def test_overhead_and_num_gpus():
    shape = QWEN_MOE.shape
    args = (np.array([4]), np.array([512]), np.full(48, 20.0))
    one = target_pass_cost(shape, H100, RooflineParams(), *args)
    # 48 layers of 6 attention + 2 query/key norms + 3 MoE kernels and 5 per pass, each at the
    # floor; no host time.
    assert one.floors_s == pytest.approx((48 * 11 + 5) * H100.kernel_floor_graph_s)
    assert one.overhead_s == 0.0
    p = RooflineParams(comm_s_per_layer=0.0)
    two = target_pass_cost(shape, H100, p, *args, num_gpus=2)
    # Launch form: bytes halve over two GPUs; the per-layer t0 and per-expert c_e do not, nor
    # does the router, replicated on every rank (memory-bound at 4 tokens).
    fixed = 48 * (p.moe_launch_s + 20.0 * p.moe_expert_s)
    router = 48 * shape.router_bytes / (H100.hbm_bytes_per_s * p.weight_efficiency)
    assert two.moe_s == pytest.approx(one.moe_s / 2 + fixed / 2 + router / 2, rel=1e-12)
    saturation = dataclasses.replace(p, moe_kernel="saturation")  # expert bytes: all halve
    one = target_pass_cost(shape, H100, saturation, *args)
    two = target_pass_cost(shape, H100, saturation, *args, num_gpus=2)
    assert two.moe_s == pytest.approx(one.moe_s / 2 + router / 2, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.lists(st.integers(1, 64), min_size=1, max_size=16),
    ctx=st.integers(0, 8192),
    u=st.integers(1, 127),
)
def test_pass_cost_is_positive_and_monotone(tokens, ctx, u):
    shape = QWEN_MOE.shape
    t = np.array(tokens)
    c = np.full(len(t), ctx)
    base = target_pass_cost(shape, H100, RooflineParams(), t, c, np.full(48, float(u)))
    assert base.moe_s > 0 and base.attention_s > 0 and base.other_s > 0
    more_tokens = target_pass_cost(shape, H100, RooflineParams(), t + 1, c, np.full(48, float(u)))
    more_experts = target_pass_cost(shape, H100, RooflineParams(), t, c, np.full(48, float(u + 1)))
    more_ctx = target_pass_cost(shape, H100, RooflineParams(), t, c + 100, np.full(48, float(u)))
    assert more_tokens.total_s >= base.total_s
    assert more_experts.total_s >= base.total_s  # equal once the experts are compute-bound
    assert more_ctx.total_s > base.total_s


def test_draft_step_costs():
    d = catalog.get_drafter("eagle3-qwen3-30b-a3b")
    model = RooflineCostModel(target=QWEN_MOE, drafter=d, gpu=H100)
    assert model.draft_step(np.array([], dtype=int)) == 0.0
    one = model.draft_step(np.array([512]))
    p = RooflineParams()
    floor = p.draft_step_overhead_s + d.head_weight_bytes() / (
        p.weight_efficiency * H100.hbm_bytes_per_s
    )
    assert one >= floor
    assert model.draft_step(np.array([512] * 8)) > one
    dense = RooflineCostModel(
        target=QWEN_MOE,
        drafter=catalog.get_drafter("qwen3-0.6b-draft"),
        gpu=H100,
        draft_model=catalog.get_model("qwen3-0.6b"),
    )
    # A 0.6B dense draft model reads more bytes per step than a ~0.3 GB head.
    assert dense.draft_step(np.array([512])) > one


def test_prefill_is_compute_heavy_for_long_prompts():
    model = RooflineCostModel(
        target=QWEN_MOE, drafter=catalog.get_drafter("eagle3-qwen3-30b-a3b"), gpu=H100
    )
    short = model.prefill(np.array([16])).total_s
    long = model.prefill(np.array([8192])).total_s
    assert long > 5 * short


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.integers(1, 300),
    ctx=st.integers(0, 5000),
    window=st.one_of(st.just(float("inf")), st.integers(1, 4000).map(float)),
)
def test_attended_pairs_is_the_causal_sum_over_query_tokens(tokens, ctx, window):
    """Query i of t (i = 1..t) after c cached tokens scores min(c + i, window) keys."""
    from simspec.costs.kernels import attended_pairs

    brute = sum(min(ctx + i, window) for i in range(1, tokens + 1))
    got = attended_pairs(np.array([float(tokens)]), np.array([float(ctx)]), window)
    assert float(got[0]) == pytest.approx(brute, rel=1e-12)


def test_mla_prefills_score_in_the_decompressed_form_and_decodes_in_the_absorbed_one():
    """DeepSeek-V3 (128 heads, nope 128, rope 64, v 128, kv_lora 512): a prefill's QK^T and
    PV cost 2·128·(128 + 64 + 128) FLOPs per pair, an absorbed decode's 2·128·(512 + 64 + 512);
    a GQA model costs the same either way."""
    groups = catalog.get_model("deepseek-v3").shape.groups
    assert {g.prefill_flops_per_pair for g in groups} == {2.0 * 128 * (128 + 64 + 128)}
    assert {g.attention_flops_per_pair for g in groups} == {2.0 * 128 * (512 + 64 + 512)}
    for g in QWEN_MOE.shape.groups:
        assert g.prefill_flops_per_pair == g.attention_flops_per_pair > 0


def test_a_long_prefill_scores_half_the_square_of_its_prompt():
    """Compute-bound, a prompt of L tokens attends L(L + 1)/2 pairs per layer (causal), so
    doubling L nearly quadruples the attention core, and its time is those FLOPs at the
    pass's compute rate."""
    from simspec.costs.kernels import attention_core_s

    (group,) = [g for g in catalog.get_model("deepseek-v3").shape.groups if g.is_moe]
    flops = 1e15
    for prompt in (4096.0, 8192.0):
        t = np.array([prompt])
        core = attention_core_s(group, t, 0 * t, 1e30, flops, prefill=True)
        pairs = prompt * (prompt + 1) / 2
        assert core == pytest.approx(pairs * group.prefill_flops_per_pair / flops)
    decode = attention_core_s(group, np.array([1.0]), np.array([8191.0]), 1e30, flops)
    assert decode == pytest.approx(8192 * group.attention_flops_per_pair / flops)
