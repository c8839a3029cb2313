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
