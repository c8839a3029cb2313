"""Tensor / expert parallelism and alpha-beta collectives against their closed forms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simspec import catalog
from simspec.costs.parallel import (
    ACTIVATION_BYTES,
    Parallelism,
    all_to_all_s,
    allreduce_s,
    layer_collectives_s,
    max_rank_experts,
)
from simspec.costs.passes import target_pass_cost
from simspec.costs.roofline import RooflineCostModel
from simspec.params import RooflineParams
from simspec.physics.launches import VERIFY_KERNELS, draft_step_kernels
from simspec.physics.models import kv_bytes_for_context

H100 = catalog.get_gpu("h100-sxm")
QWEN = catalog.get_model("qwen3-30b-a3b")
ALPHA, BETA = H100.collective_latency_s, H100.link_bytes_per_s
STEP = H100.collective_step_latency_s


def test_parallelism_from_scenario_keys():
    assert Parallelism.of(4, 0, 1) == Parallelism(tensor=4, expert=1, expert_shards=4)
    assert Parallelism.of(8, 8, 8) == Parallelism(tensor=8, expert=8, expert_shards=1)
    assert Parallelism.of(8, 8, 2).expert_shards == 4
    assert not Parallelism.of(1, 0, 1).is_split
    assert Parallelism.of(2, 1, 2).is_split
    assert Parallelism.of(2, 1, 2).dispatches  # experts beyond the attention GPU
    assert not Parallelism.of(8, 8, 8).dispatches and not Parallelism.of(8, 8, 4).dispatches


def test_allreduce_and_all_to_all_closed_forms():
    m = 3.0e6
    assert allreduce_s(m, 8, ALPHA, BETA) == pytest.approx(ALPHA + 2 * 7 / 8 * m / BETA)
    assert all_to_all_s(m, 8, ALPHA, BETA) == pytest.approx(ALPHA + 7 / 8 * m / BETA)
    assert allreduce_s(m, 1, ALPHA, BETA) == 0.0 == all_to_all_s(m, 1, ALPHA, BETA)
    assert allreduce_s(m, 4, ALPHA, 0.0) == ALPHA  # no link stated: latency only


def test_layer_collectives_count_two_per_layer():
    n, h, k = 4.0, 2048, 8
    msg = n * h * ACTIVATION_BYTES
    tp2 = Parallelism.of(2, 0, 1)
    ar = allreduce_s(msg, 2, ALPHA, BETA)
    assert layer_collectives_s(n, h, k, True, tp2, ALPHA, BETA) == pytest.approx(2 * ar)
    assert layer_collectives_s(n, h, k, True, tp2, ALPHA, BETA, 3e-6) == pytest.approx(
        2 * ar + 3e-6
    )
    # Experts within the tensor-parallel group: the MoE output is summed by the all-reduce,
    # exactly as without expert parallelism.
    ep8 = Parallelism.of(8, 8, 8)
    two = 2 * allreduce_s(msg, 8, ALPHA, BETA)
    assert layer_collectives_s(n, h, k, True, ep8, ALPHA, BETA) == pytest.approx(two)
    assert layer_collectives_s(n, h, k, False, ep8, ALPHA, BETA) == pytest.approx(two)
    # Experts beyond it (8 attention groups of one GPU, 8 expert ranks): each rank dispatches
    # its own group's n tokens to their k experts and combines them back (two all-to-alls of
    # n·k·h elements per rank), the tokens of a group of one GPU being all on that GPU.
    wide = Parallelism.of(8, 1, 8)
    expected = 2 * all_to_all_s(msg * k, 8, ALPHA, BETA)
    assert layer_collectives_s(n, h, k, True, wide, ALPHA, BETA) == pytest.approx(expected)
    # Groups of two GPUs (TP2 attention, 4 groups, EP8): a rank sends half its group's rows.
    pairs = Parallelism.of(8, 2, 8)
    assert pairs.attention_groups == 4
    expected = allreduce_s(msg, 2, ALPHA, BETA) + 2 * all_to_all_s(msg * k / 2, 8, ALPHA, BETA)
    assert layer_collectives_s(n, h, k, True, pairs, ALPHA, BETA) == pytest.approx(expected)
    assert layer_collectives_s(n, h, k, False, wide, ALPHA, BETA) == 0.0  # a dense layer: 1 GPU
    assert layer_collectives_s(n, h, k, True, Parallelism(), ALPHA, BETA, 1.0) == 0.0


@settings(max_examples=80, deadline=None)
@given(u=st.integers(1, 256), ranks=st.sampled_from([1, 2, 4, 8, 16]))
def test_busiest_rank_bounds(u, ranks):
    n = 256
    busiest = max_rank_experts(float(u), n, ranks)
    assert u / ranks - 1e-12 <= busiest <= min(u, n / ranks) + 1e-12
    if ranks == 1:
        assert busiest == u


def test_busiest_rank_is_even_when_every_expert_is_touched():
    assert max_rank_experts(160.0, 160, 8) == pytest.approx(20.0)


def test_tensor_parallel_pass_splits_weights_and_adds_collectives():
    shape = QWEN.shape
    tokens, ctx, unique = np.array([1]), np.array([512]), np.full(48, 8.0)
    params = RooflineParams()
    one = target_pass_cost(shape, H100, params, tokens, ctx, unique, hidden_size=QWEN.hidden_size)
    two = target_pass_cost(
        shape, H100, params, tokens, ctx, unique, num_gpus=2, hidden_size=QWEN.hidden_size
    )
    # Launch MoE form: each GPU streams half the expert bytes; t0 and c_e per expert stay whole,
    # and so does the router, one replicated weight on every rank (memory-bound at one token).
    fixed = 48 * (params.moe_launch_s + 8.0 * params.moe_expert_s)
    router = 48 * shape.router_bytes / (H100.hbm_bytes_per_s * params.weight_efficiency)
    assert two.moe_s == pytest.approx(one.moe_s / 2 + fixed / 2 + router / 2, rel=1e-12)
    assert two.attention_s == pytest.approx(one.attention_s / 2, rel=1e-12)
    layers = sum(g.count for g in shape.groups)
    message = QWEN.hidden_size * ACTIVATION_BYTES
    comm = layers * 2 * allreduce_s(message, 2, ALPHA, BETA, STEP, H100.custom_allreduce)
    assert two.other_s == pytest.approx(one.other_s / 2, rel=1e-12)
    assert two.collectives_s == pytest.approx(comm, rel=1e-12) and one.collectives_s == 0.0
    assert (two.overhead_s, two.floors_s) == (one.overhead_s, one.floors_s)


def test_engine_software_time_per_layer_adds_once_per_layer():
    shape = QWEN.shape
    args = (np.array([2]), np.array([100]), np.full(48, 12.0))
    base = target_pass_cost(shape, H100, RooflineParams(), *args, num_gpus=4)
    extra = target_pass_cost(shape, H100, RooflineParams(comm_s_per_layer=1e-5), *args, num_gpus=4)
    layers = sum(g.count for g in shape.groups)
    assert extra.total_s - base.total_s == pytest.approx(layers * 1e-5, rel=1e-9)


def test_expert_parallel_waits_for_the_busiest_rank():
    shape = QWEN.shape
    args = (np.ones(16, dtype=int), np.full(16, 256), np.full(48, 60.0))
    # Bytes only (no per-expert fixed time, which TP pays for all 60 expert shards on every
    # GPU and EP only for its own experts): the busiest of 8 ranks holds more than 60 / 8
    # experts, so it is no faster than an even TP split.
    bytes_only = RooflineParams(moe_expert_s=0.0)
    tp = target_pass_cost(shape, H100, bytes_only, *args, num_gpus=8)
    ep = target_pass_cost(
        shape, H100, bytes_only, *args, num_gpus=8, parallel=Parallelism.of(8, 8, 8)
    )
    assert ep.moe_s >= tp.moe_s
    assert ep.attention_s == pytest.approx(tp.attention_s)


def test_drafter_runs_tensor_parallel_with_its_collectives():
    drafter = catalog.get_drafter("eagle3-qwen3-30b-a3b")
    params = RooflineParams(draft_step_overhead_s=1e-4)
    one = RooflineCostModel(target=QWEN, drafter=drafter, gpu=H100, params=params)
    two = dataclasses.replace(one, num_gpus=2)
    ctx = np.array([300, 700])
    # The floors and the sampling over the draft vocabulary (every rank samples whole rows)
    # do not shrink with the tensor degree.
    fixed = 1e-4 + draft_step_kernels(drafter.num_layers) * H100.kernel_floor_graph_s
    fixed += one.draft_sampling_s(len(ctx))
    body = one.draft_step(ctx) - fixed  # weights and KV: split over the GPUs
    message = len(ctx) * drafter.hidden_size * ACTIVATION_BYTES
    comm = (
        max(drafter.num_layers, 1)
        * 2
        * allreduce_s(message, 2, ALPHA, BETA, STEP, H100.custom_allreduce)
    )
    assert two.draft_step(ctx) == pytest.approx(fixed + body / 2 + comm, rel=1e-12)


def test_speculation_overhead_is_bookkeeping_floors_when_ideal_and_an_extend_otherwise():
    drafter = catalog.get_drafter("eagle3-qwen3-30b-a3b")
    ideal = RooflineCostModel(target=QWEN, drafter=drafter, gpu=H100)
    ctx = np.array([100, 200, 300])
    bookkeeping = VERIFY_KERNELS * H100.kernel_floor_graph_s  # its kernels' floors only
    assert ideal.speculation_overhead_s(np.array([1, 3, 2]), ctx) == pytest.approx(bookkeeping)
    params = RooflineParams(verify_overhead_s=2e-3, draft_extend_passes=1.0)
    engine = RooflineCostModel(target=QWEN, drafter=drafter, gpu=H100, params=params)
    # The extend is the draft phase's first step widened to the committed tokens: with one
    # committed token each it adds nothing to that step; with four it adds the head's KV reads
    # of the three extra rows per request (9 entries; the head's weights are read once either
    # way, and 12 rows leave it memory-bound).
    ones = np.ones(3, dtype=int)
    assert engine.speculation_overhead_s(ones, ctx) == pytest.approx(bookkeeping + 2e-3, rel=1e-12)
    kv = drafter.head_kv_bytes_per_token(QWEN.kv_cache_bytes)
    wider = 9 * kv / (params.kv_efficiency * H100.hbm_bytes_per_s)
    assert engine.speculation_overhead_s(np.array([4, 4, 4]), ctx) == pytest.approx(
        bookkeeping + 2e-3 + wider, rel=1e-9
    )
    # A second extend pass costs a full pass over the committed tokens: one draft step here.
    twice = dataclasses.replace(params, draft_extend_passes=2.0)
    engine2 = RooflineCostModel(target=QWEN, drafter=drafter, gpu=H100, params=twice)
    assert engine2.speculation_overhead_s(ones, ctx) == pytest.approx(
        bookkeeping + 2e-3 + engine.draft_step(ctx), rel=1e-12
    )


#: SGLang PR #2904's custom all-reduce on H100 (no CUDA graph): message bytes -> µs at TP2/4/8.
CUSTOM_ALLREDUCE_H100 = {
    4096: (3.9, 3.7, 5.7),
    524288: (12.5, 20.2, 22.1),
    1048576: (19.9, 31.1, 33.8),
}


@pytest.mark.parametrize("nbytes", sorted(CUSTOM_ALLREDUCE_H100))
def test_the_custom_allreduce_reproduces_its_published_latencies(nbytes):
    for ranks, measured in zip((2, 4, 8), CUSTOM_ALLREDUCE_H100[nbytes], strict=True):
        t = allreduce_s(nbytes, ranks, ALPHA, BETA, STEP, H100.custom_allreduce) * 1e6
        ring = allreduce_s(nbytes, ranks, ALPHA, BETA, STEP) * 1e6
        # small messages: the custom kernel's published latency; large ones: never above it
        # (the ring, cheaper there, is the engines' other path)
        if nbytes <= 4096:
            assert t == pytest.approx(measured, rel=0.25), (ranks, nbytes)
        else:
            assert t <= measured * 1.1, (ranks, nbytes)
        assert t <= ring


def test_the_custom_allreduce_is_the_cheaper_of_its_closed_form_and_the_ring():
    a, s, b = 3e-6, 4e-7, 3e10
    for ranks in (2, 4, 8):
        m = 4096.0  # a decode step's activations: the custom kernel
        expected = a + s * (ranks - 1) + (ranks - 1) / ranks * m / b
        assert expected < allreduce_s(m, ranks, ALPHA, BETA, STEP)
        assert allreduce_s(m, ranks, ALPHA, BETA, STEP, (a, s, b)) == pytest.approx(expected)
        big = 64.0 * 2**20  # a long prefill's activations: NCCL's ring
        ring = allreduce_s(big, ranks, ALPHA, BETA, STEP)
        assert allreduce_s(big, ranks, ALPHA, BETA, STEP, (a, s, b)) == ring
        both = allreduce_s(np.array([m, big]), ranks, ALPHA, BETA, STEP, (a, s, b))
        assert both[0] == pytest.approx(expected) and both[1] == pytest.approx(ring)
        # continuous and non-decreasing in the message size across the crossover
        sizes = np.linspace(0.0, 8e6, 4001)
        t = allreduce_s(sizes, ranks, ALPHA, BETA, STEP, (a, s, b))
        assert np.all(np.diff(t) >= 0) and np.max(np.diff(t)) < 1e-7
    # across nodes (16 GPUs): the ring alone
    assert allreduce_s(4096, 16, ALPHA, BETA, STEP, (a, s, b)) == allreduce_s(
        4096, 16, ALPHA, BETA, STEP
    )
    # one GPU: no collective; a GPU without a measurement: the ring alone
    assert allreduce_s(2.0**20, 1, ALPHA, BETA, STEP, (a, s, b)) == 0.0
    assert allreduce_s(4096, 8, ALPHA, BETA, STEP, (0.0, 0.0, 0.0)) == allreduce_s(
        4096, 8, ALPHA, BETA, STEP
    )


#: The engines' custom all-reduce on AMD's Infinity Fabric mesh, µs by message bytes: vLLM's at
#: TP2 and SGLang's at TP4 on MI300-series GPUs (ROCm/aiter PR #801, sgl-project/sglang PR
#: #6619) and vLLM's at TP8 on MI355X (vllm-project/vllm PR #39080).
KIB, MIB = 1024, 1024 * 1024
CUSTOM_ALLREDUCE_AMD = {
    ("mi300x", 2): {4 * KIB: 7.07, 64 * KIB: 7.66, 256 * KIB: 11.45, MIB: 28.15, 8 * MIB: 181.43},
    ("mi300x", 4): {2 * KIB: 7.18, 32 * KIB: 7.58, 512 * KIB: 14.65, MIB: 22.91, 8 * MIB: 118.31},
    ("mi355x", 8): {24 * KIB: 6.3, 96 * KIB: 7.6, 384 * KIB: 13.1, 768 * KIB: 16.0},
}


@pytest.mark.parametrize("gpu_ranks", sorted(CUSTOM_ALLREDUCE_AMD))
def test_the_amd_custom_allreduce_reproduces_its_published_latencies(gpu_ranks):
    name, ranks = gpu_ranks
    gpu = catalog.get_gpu(name)
    assert gpu.mesh
    for nbytes, measured in CUSTOM_ALLREDUCE_AMD[gpu_ranks].items():
        args = (gpu.collective_latency_s, gpu.link_bytes_per_s, gpu.collective_step_latency_s)
        t = allreduce_s(nbytes, ranks, *args, gpu.custom_allreduce, mesh=True) * 1e6
        ring = allreduce_s(nbytes, ranks, *args, mesh=True) * 1e6
        if nbytes <= MIB:  # decode-sized: the custom kernel's published latency
            assert t == pytest.approx(measured, rel=0.15), (name, ranks, nbytes)
        else:  # a prefill's: never above it; RCCL's ring is the engines' other path
            assert t <= measured * 1.15, (name, ranks, nbytes)
        if nbytes <= 256 * KIB:  # RCCL's ring (12 us + 0.8 us per step) is slower there
            assert t < ring, (name, ranks, nbytes)


#: The engines' one-shot all-reduce on Blackwell at world size 8, µs by message bytes (hidden
#: 7168, bf16): fused with RMSNorm on GB200 at 1 / 8 / 64 tokens (lightseekorg/tokenspeed PR
#: #860) and in a DeepSeek-R1 decode profile on 8 x B200 (sgl-project/sglang PR #7621, read at
#: one token: the profile states no batch).
CUSTOM_ALLREDUCE_BLACKWELL_WS8 = {
    "gb200": {7168 * 2: 10.9, 8 * 7168 * 2: 10.9, 64 * 7168 * 2: 19.1},
    "b200": {7168 * 2: 8.7},
}


@pytest.mark.parametrize("name", sorted(CUSTOM_ALLREDUCE_BLACKWELL_WS8))
def test_the_blackwell_custom_allreduce_reproduces_its_published_latencies(name):
    gpu = catalog.get_gpu(name)
    args = (gpu.collective_latency_s, gpu.link_bytes_per_s, gpu.collective_step_latency_s)
    for nbytes, measured in CUSTOM_ALLREDUCE_BLACKWELL_WS8[name].items():
        t = allreduce_s(nbytes, 8, *args, gpu.custom_allreduce) * 1e6
        assert t == pytest.approx(measured, rel=0.2), (name, nbytes)
        # below NCCL's ring at a decode step's size: the kernel the engines pick there
        if nbytes <= 8 * 7168 * 2:
            assert t < allreduce_s(nbytes, 8, *args) * 1e6, (name, nbytes)
    # 128 tokens (1.8 MB): measured 29.4 us fused; the model's cheaper path never exceeds it
    assert allreduce_s(128 * 7168 * 2, 8, *args, gpu.custom_allreduce) * 1e6 <= 29.4


def test_a_mesh_drives_one_link_per_peer():
    """On a mesh each GPU reaches r − 1 peers over r − 1 links at once: a collective's wire time
    is the switch form's over r − 1 (the same at r = 2, a seventh at r = 8); the latency terms
    do not change."""
    link, m = 6.4e10, 8.0 * MIB
    for ranks in (2, 4, 8):
        switch = allreduce_s(m, ranks, 0.0, link)
        assert allreduce_s(m, ranks, 0.0, link, mesh=True) == pytest.approx(switch / (ranks - 1))
        assert allreduce_s(0.0, ranks, ALPHA, link, STEP, mesh=True) == pytest.approx(
            allreduce_s(0.0, ranks, ALPHA, link, STEP)
        )
        a2a = all_to_all_s(m, ranks, 0.0, link)
        assert all_to_all_s(m, ranks, 0.0, link, mesh=True) == pytest.approx(a2a / (ranks - 1))
        custom = (3e-6, 5e-7, 2e10)
        expected = (
            custom[0] + custom[1] * (ranks - 1) + (ranks - 1) / ranks * m / (2e10 * (ranks - 1))
        )
        ring = allreduce_s(m, ranks, 1.0, link, mesh=True)  # a slow ring: the custom path
        assert allreduce_s(m, ranks, 1.0, link, 0.0, custom, mesh=True) == pytest.approx(expected)
        assert expected < ring


def test_every_catalog_gpu_states_what_a_collective_costs():
    """No catalog GPU prices a tensor-parallel all-reduce at zero: each states NCCL's (or RCCL's)
    latency or the engines' custom all-reduce, and a link bandwidth."""
    for name in catalog.gpu_names():
        gpu = catalog.get_gpu(name)
        assert gpu.collectives_stated and gpu.link_bytes_per_s > 0, name
        one = allreduce_s(
            4096.0,
            8,
            gpu.collective_latency_s,
            gpu.link_bytes_per_s,
            gpu.collective_step_latency_s,
            gpu.custom_allreduce,
            gpu.mesh,
        )
        assert 1e-6 < one < 1e-4, name


def test_mla_latent_projections_are_read_whole_on_every_tensor_rank():
    """MLA's down-projections to the latents are one replicated weight on every rank (SGLang's
    and vLLM's ``fused_qkv_a_proj_with_mqa``): at TP t a rank reads (A − R)/t + R of a layer's
    attention weights, R = hidden x (q_lora + kv_lora + rope); and it reads the whole latent KV
    cache (one latent for every query head), so the KV reads do not shrink with t."""
    model = catalog.get_model("deepseek-v3")
    a, h = model.attention, model.hidden_size
    shape = model.shape
    replicated = h * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim) * model.weight_bytes
    assert all(g.replicated_attention_bytes == replicated for g in shape.groups)
    tokens, ctx = np.array([1]), np.array([512])
    unique = np.full(shape.num_moe_layers, 8.0)
    params, gpu = RooflineParams(), catalog.get_gpu("h200")
    one = target_pass_cost(shape, gpu, params, tokens, ctx, unique, hidden_size=h)
    for t in (2, 8):
        split = target_pass_cost(shape, gpu, params, tokens, ctx, unique, num_gpus=t, hidden_size=h)
        bandwidth = gpu.hbm_bytes_per_s * params.weight_efficiency
        weights = sum(
            g.count * ((g.attention_weight_bytes - replicated) / t + replicated) / bandwidth
            for g in shape.groups
        )
        cores = one.attention_s - sum(
            g.count * g.attention_weight_bytes / bandwidth for g in shape.groups
        )  # KV reads at one token are memory-bound; the latent cache is whole on every rank
        assert split.attention_s == pytest.approx(weights + cores, rel=1e-12)
        assert split.attention_s > one.attention_s / t  # more than an even split


def test_attention_without_a_latent_splits_evenly_bit_for_bit():
    for name in ("qwen3-30b-a3b", "gpt-oss-120b", "qwen3-next-80b-a3b"):
        shape = catalog.get_model(name).shape
        assert all(g.replicated_attention_bytes == 0.0 for g in shape.groups), name
        assert all(g.attention_bytes_read(8) == g.attention_weight_bytes for g in shape.groups)


@pytest.mark.parametrize(
    ("name", "tensor", "copies"),
    [
        ("deepseek-v3", 8, 8),  # MLA: one latent, whole on every rank
        ("deepseek-v3", 1, 1),
        ("qwen3-235b-a22b", 8, 2),  # 4 KV heads over 8 ranks: each head on 2
        ("qwen3-235b-a22b", 4, 1),
        ("gpt-oss-120b", 8, 1),  # 8 KV heads, one per rank
    ],
)
def test_kv_heads_beyond_their_count_are_replicated(name, tensor, copies):
    """A rank holds the KV heads its query heads read: past the KV-head count each head sits on
    tensor / heads ranks, and those ranks read it, so the KV reads of a memory-bound pass and
    the KV cache a request holds grow by that factor; linear-attention state never."""
    shape = catalog.get_model(name).shape
    softmax = [g for g in shape.groups if g.kv_bytes_per_token > 0]
    assert softmax and all(g.kv_copies(tensor) == copies for g in softmax)
    assert kv_bytes_for_context(shape, 1000, tensor) == pytest.approx(
        copies * kv_bytes_for_context(shape, 1000), rel=1e-12
    )
    tokens, ctx = np.array([1]), np.array([32_000])  # a long context: KV reads dominate
    unique = np.full(shape.num_moe_layers, 8.0)
    params, gpu = RooflineParams(), catalog.get_gpu("h200")
    split = target_pass_cost(shape, gpu, params, tokens, ctx, unique, num_gpus=tensor)
    one = target_pass_cost(shape, gpu, params, tokens, ctx, unique)
    weights = sum(g.count * g.attention_bytes_read(tensor) / tensor for g in shape.groups) / (
        gpu.hbm_bytes_per_s * params.weight_efficiency
    )
    one_weights = sum(g.count * g.attention_weight_bytes for g in shape.groups) / (
        gpu.hbm_bytes_per_s * params.weight_efficiency
    )
    cores = one.attention_s - one_weights
    assert split.attention_s == pytest.approx(weights + cores * copies / tensor, rel=1e-9)


def test_linear_attention_state_is_not_replicated():
    shape = catalog.get_model("qwen3-next-80b-a3b").shape
    assert all(g.kv_copies(16) == 1 for g in shape.groups if g.kv_bytes_per_token == 0)
