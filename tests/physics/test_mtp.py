"""MTP drafters (issue 28, item 1): the module's bytes from the layer shapes, its step's cost.

The closed forms below are written from the published config.json numbers of DeepSeek-V3
(arXiv 2412.19437 §2.2 for the module's structure), not from simspec's derivations.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simspec import catalog
from simspec.config.checks import compatible_drafters
from simspec.costs.roofline import RooflineCostModel
from simspec.errors import FieldError
from simspec.physics.mtp import mtp_module, mtp_weight_bytes, projection_bytes
from simspec.physics.precision import with_precision

# DeepSeek-V3 config.json (e815299b): hidden, vocab, MLA ranks, experts.
H, V = 7168, 129280
HEADS, Q_LORA, KV_LORA, NOPE, ROPE, V_HEAD = 128, 1536, 512, 128, 64, 128
EXPERTS, TOP_K, EXPERT_WIDTH, SHARED = 256, 8, 2048, 1


def _deepseek_module_params() -> dict[str, float]:
    """One DeepSeek-V3 MTP module's parameters by part, from the config numbers."""
    attention = (
        H * Q_LORA  # q_a
        + Q_LORA * HEADS * (NOPE + ROPE)  # q_b
        + H * (KV_LORA + ROPE)  # kv_a (with the rotary key)
        + KV_LORA * HEADS * (NOPE + V_HEAD)  # kv_b
        + HEADS * V_HEAD * H  # o
    )
    expert = 3 * H * EXPERT_WIDTH
    return {
        "attention": attention,
        "routed": EXPERTS * expert,
        "expert": expert,
        "shared": SHARED * expert,
        "router": H * EXPERTS,
        "projection": 2 * H * H,
        "lm_head": V * H,
    }


def test_module_weights_match_the_layer_shapes():
    target = catalog.get_model("deepseek-v3")  # bf16: 2 bytes per parameter everywhere
    p = _deepseek_module_params()
    held = p["attention"] + p["routed"] + p["shared"] + p["router"] + p["projection"]
    assert mtp_weight_bytes(target, 1) == pytest.approx(2.0 * held, rel=1e-12)
    assert mtp_weight_bytes(target, 2) == pytest.approx(4.0 * held, rel=1e-12)
    assert projection_bytes(target) == 2.0 * p["projection"]
    # The model card's "14B MTP module" counts the shared embedding and head: 2·V·h more.
    assert (held + 2 * p["lm_head"]) / 1e9 == pytest.approx(14.0, rel=0.05)


def test_module_is_one_moe_layer_of_the_target_with_its_head():
    target = catalog.get_model("deepseek-v3")
    shape = mtp_module(target).shape
    (group,) = shape.groups
    assert group.count == 1 and group.is_moe  # the dense prefix is not the module's
    assert group.kv_bytes_per_token == target.shape.groups[-1].kv_bytes_per_token  # MLA latent
    assert shape.lm_head_bytes == 2.0 * V * H  # the full vocabulary, not a draft vocabulary
    assert shape.num_experts == EXPERTS and shape.experts_per_token == TOP_K
    hybrid = mtp_module(catalog.get_model("qwen3-next-80b-a3b")).shape
    assert [g.count for g in hybrid.groups] == [1] and hybrid.kv_bytes_per_token > 0


def _costs(drafter: str, **params) -> RooflineCostModel:
    target = with_precision(catalog.get_model("deepseek-v3"), "fp8")
    d = catalog.get_drafter(drafter)
    base = RooflineCostModel(
        target=target,
        drafter=d,
        gpu=catalog.get_gpu("h200"),
        num_gpus=8,
        draft_model=mtp_module(target) if d.kind == "mtp" else None,
    )
    if params:
        base = dataclasses.replace(base, params=dataclasses.replace(base.params, **params))
    return base


def test_mtp_step_is_dearer_than_an_eagle3_step():
    """Same target, same GPUs: the module (MLA + a MoE layer loading the batch's expert union +
    the 129k-row LM head) costs more than an EAGLE-3 head (a dense GQA layer + a 32k-row head),
    and ever more so as the batch's union of experts grows."""
    ratios = []
    for batch in (1, 8, 64):
        ctx = np.full(batch, 2048)
        mtp = _costs("mtp-deepseek-v3").draft_step(ctx)
        eagle = _costs("eagle3-deepseek-v3").draft_step(ctx)
        assert mtp > eagle, (batch, mtp, eagle)
        ratios.append(mtp / eagle)
    assert ratios == sorted(ratios) and ratios[-1] > 2.0, ratios


def test_mtp_step_reads_the_module_bytes_at_bandwidth():
    """One GPU, bf16, no host time and no kernel floors: a one-token step with no context
    reads its own KV latent, the module's attention projections, shared expert, router,
    2h -> h projection and full-vocabulary LM head at the dense-weight bandwidth, plus the
    routed-expert kernel over the token's top-k experts (the kernel's own model,
    :mod:`simspec.costs.moe_kernel`)."""
    from simspec.costs.kernels import routed_experts_s

    target = catalog.get_model("deepseek-v3")
    gpu = dataclasses.replace(catalog.get_gpu("h200"), kernel_floor_graph_s=0.0)
    costs = RooflineCostModel(
        target=target,
        drafter=catalog.get_drafter("mtp-deepseek-v3"),
        gpu=gpu,
        draft_model=mtp_module(target),
    )
    costs = dataclasses.replace(
        costs, params=dataclasses.replace(costs.params, draft_step_overhead_s=0.0)
    )
    p = _deepseek_module_params()
    dense = 2.0 * (p["attention"] + p["shared"] + p["router"] + p["projection"] + p["lm_head"])
    params = costs.params
    bw = gpu.hbm_bytes_per_s
    flops = gpu.bf16_flops_per_s * params.compute_efficiency
    shape = mtp_module(target).shape
    routed = routed_experts_s(
        shape, params, np.array([float(TOP_K)]), TOP_K, bw, flops, gpu.l2_bytes
    )
    kv = 2.0 * (KV_LORA + ROPE) / (params.kv_efficiency * bw)  # the token's own latent
    expected = dense / (params.weight_efficiency * bw) + float(routed[0]) + kv
    assert costs.draft_step(np.array([0])) == pytest.approx(expected, rel=1e-9)


def test_mtp_batched_steps_equal_single_steps():
    costs = _costs("mtp-deepseek-v3")
    ctx = np.array([[100, 2000, 0], [5, 5, 5], [7000, 1, 30]])
    many = costs.draft_step_totals(ctx)
    assert list(many) == [costs.draft_step(row) for row in ctx]
    # the union of the drafting tokens' experts grows with the batch: a dearer step per token
    assert costs.draft_step(np.full(32, 100)) > costs.draft_step(np.full(1, 100))


def test_the_default_drafter_of_an_mtp_target_stays_its_eagle3_head():
    for target in ("deepseek-v3", "glm-4.5", "glm-4.7", "glm-4.7-flash", "qwen3-next-80b-a3b"):
        names = compatible_drafters(target)
        assert names[0].startswith("eagle3-") and f"mtp-{target}" in names


# MiMo-V2-Flash config.json: hidden, dense FFN width, heads, KV heads of the full and the
# sliding-window layers, query/key and value head dims.
MIMO_H, MIMO_DENSE, MIMO_HEADS, MIMO_KV, MIMO_SWA_KV = 4096, 16384, 64, 4, 8
MIMO_QK, MIMO_V = 192, 128


def test_mimo_modules_are_a_sliding_layer_and_a_dense_ffn_of_the_published_size():
    """MiMo-V2-Flash's MTP module (0.33B parameters on its model card, 329M in SGLang's
    cookbook): one sliding-window attention layer with 128-wide values, a dense FFN of the
    target's width, the projection; no routed expert, so a draft step loads none."""
    target = catalog.get_model("mimo-v2-flash")
    drafter = catalog.get_drafter("mtp-mimo-v2-flash")
    assert (drafter.mtp_attention, drafter.mtp_ffn) == ("sliding", "dense")
    module = mtp_module(target, drafter.mtp_attention, drafter.mtp_ffn)
    (layer,) = module.shape.groups
    assert not layer.is_moe and layer.window_tokens == 128
    attention = (
        MIMO_H * MIMO_HEADS * MIMO_QK  # q
        + MIMO_H * MIMO_SWA_KV * (MIMO_QK + MIMO_V)  # k and v of a sliding layer
        + MIMO_HEADS * MIMO_V * MIMO_H  # o, from the 128-wide values
    )
    ffn = 3 * MIMO_H * MIMO_DENSE
    assert layer.attention_weight_bytes == pytest.approx(2.0 * attention, rel=1e-12)
    assert layer.ffn_weight_bytes == pytest.approx(2.0 * ffn, rel=1e-12)
    assert layer.kv_bytes_per_token == pytest.approx(2.0 * MIMO_SWA_KV * (MIMO_QK + MIMO_V))
    added = mtp_weight_bytes(target, 1, module) / 2.0  # bf16 parameters
    assert added == pytest.approx(attention + ffn + 2 * MIMO_H * MIMO_H, rel=1e-9)
    assert added == pytest.approx(329e6, rel=0.005)  # SGLang's cookbook: 329M
    # The three modules' memory is what the drafter adds.
    from simspec.physics.mtp import drafter_weight_bytes

    assert drafter_weight_bytes(target, drafter, module) == pytest.approx(3 * 2.0 * added)


def test_mimo_headline_parameters():
    """309B total, 15B activated (the SGLang Day-0 blog), from the catalog's layer shapes."""
    target = catalog.get_model("mimo-v2-flash")
    assert target.shape.total_weight_bytes / 2.0 == pytest.approx(309e9, rel=0.01)


def test_values_narrower_than_keys_shrink_the_gqa_layer_and_its_cache():
    """v_head_dim = 0 means head_dim; a narrower value width cuts the V and output
    projections and the values' half of the KV cache by exactly its share."""
    target = catalog.get_model("mimo-v2-flash")
    wide = dataclasses.replace(
        target, attention=dataclasses.replace(target.attention, v_head_dim=0)
    )
    narrow_layer, wide_layer = target.shape.groups[0], wide.shape.groups[0]
    saved = (MIMO_QK - MIMO_V) * (MIMO_KV + MIMO_HEADS) * MIMO_H * 2.0
    assert wide_layer.attention_weight_bytes - narrow_layer.attention_weight_bytes == (
        pytest.approx(saved, rel=1e-12)
    )
    per_token = MIMO_KV * (MIMO_QK - MIMO_V) * 2.0
    assert wide_layer.kv_bytes_per_token - narrow_layer.kv_bytes_per_token == pytest.approx(
        per_token
    )
    assert wide_layer.attention_flops_per_pair == pytest.approx(4.0 * MIMO_HEADS * MIMO_QK)


def test_sliding_layers_may_have_their_own_kv_heads():
    """MiMo-V2-Flash's sliding-window layers have 8 KV heads, its full layers 4: each kind's
    K/V projections and KV cache follow its own count; 0 means the full layers' count."""
    target = catalog.get_model("mimo-v2-flash")
    groups = {(g.window_tokens, g.is_moe): g for g in target.shape.groups}
    full, sliding = groups[(float("inf"), True)], groups[(128.0, True)]
    assert full.kv_bytes_per_token == pytest.approx(2.0 * MIMO_KV * (MIMO_QK + MIMO_V))
    assert sliding.kv_bytes_per_token == pytest.approx(2.0 * MIMO_SWA_KV * (MIMO_QK + MIMO_V))
    extra = MIMO_H * (MIMO_SWA_KV - MIMO_KV) * (MIMO_QK + MIMO_V) * 2.0
    assert sliding.attention_weight_bytes - full.attention_weight_bytes == pytest.approx(extra)
    same = dataclasses.replace(
        target, attention=dataclasses.replace(target.attention, sliding_num_kv_heads=0)
    )
    alike = {(g.window_tokens, g.is_moe): g for g in same.shape.groups}
    assert alike[(128.0, True)].kv_bytes_per_token == full.kv_bytes_per_token
    with pytest.raises(FieldError, match="sliding_num_kv_heads"):
        dataclasses.replace(target.attention, sliding_num_kv_heads=5)
