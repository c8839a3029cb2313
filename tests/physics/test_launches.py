"""Kernels per layer counted from the architecture (simspec.physics.launches)."""

from __future__ import annotations

import dataclasses

import pytest

from simspec import catalog
from simspec.physics.launches import QK_NORM_KERNELS, layer_kernels
from simspec.physics.models import derive_shape


def _pass_kernels(spec) -> int:
    shape = derive_shape(spec)
    return sum(g.count * g.kernels for g in shape.groups) + shape.pass_kernels


def test_qwen3_moe_pass_counts_its_query_and_key_norms():
    """Qwen3-30B-A3B: 48 layers of GQA (6) + q/k norms (2) + MoE (3), and 5 per pass."""
    spec = catalog.get_model("qwen3-30b-a3b")
    assert spec.attention.qk_norm
    assert _pass_kernels(spec) == 48 * (6 + 2 + 3) + 5


@pytest.mark.parametrize(
    ("name", "softmax_layers"),
    [("qwen3-30b-a3b", 48), ("qwen3-235b-a22b", 94), ("qwen3-next-80b-a3b", 12), ("glm-4.7", 92)],
)
def test_query_key_norms_add_two_kernels_per_softmax_attention_layer(name, softmax_layers):
    """Switching the norms off removes exactly 2 kernels from each softmax-attention layer;
    Qwen3-Next's 36 Gated DeltaNet layers have none to remove."""
    spec = catalog.get_model(name)
    off = dataclasses.replace(spec, attention=dataclasses.replace(spec.attention, qk_norm=False))
    assert _pass_kernels(spec) - _pass_kernels(off) == QK_NORM_KERNELS * softmax_layers


@pytest.mark.parametrize(
    "name", ["gpt-oss-120b", "mixtral-8x7b", "deepseek-v3", "glm-4.7-flash", "llama-3.1-8b"]
)
def test_models_without_query_key_norms_do_not_count_them(name):
    """config.json of these has no q_norm / k_norm (MLA's q_a / kv_a norms are its own 11)."""
    assert not catalog.get_model(name).attention.qk_norm


def test_mla_and_linear_attention_ignore_the_flag():
    assert layer_kernels("mla", True, True, qk_norm=True) == layer_kernels("mla", True, True)
    assert layer_kernels("linear", True, True, qk_norm=True) == layer_kernels("linear", True, True)
    assert layer_kernels("sliding", False, False, qk_norm=True) == 6 + 2 + 4


def test_fp8_deepseek_adds_a_quantisation_kernel_per_quantised_gemm_input():
    """DeepSeek-V3 in fp8 (W8A8): every one of its 61 layers quantises the inputs of MLA's
    fused q_a/kv_a, q_b and output GEMMs (3) and of its shared expert's or dense FFN's
    gate/up and down GEMMs (2); the routed experts quantise inside their fused kernel."""
    from simspec.physics.precision import with_precision

    spec = catalog.get_model("deepseek-v3")
    assert _pass_kernels(with_precision(spec, "fp8")) - _pass_kernels(spec) == 61 * (3 + 2)


def test_quantised_moe_layer_without_shared_experts_adds_only_its_attention_inputs():
    """Qwen3-30B-A3B has no shared experts: in fp8 each layer adds its QKV and output GEMMs'
    quantisation (2) and nothing for its routed experts."""
    from simspec.physics.precision import with_precision

    spec = catalog.get_model("qwen3-30b-a3b")
    assert _pass_kernels(with_precision(spec, "fp8")) - _pass_kernels(spec) == 48 * 2


@pytest.mark.parametrize("fmt", ["mxfp4", "int4", "q4_k", "bf16"])
def test_weight_only_formats_launch_no_quantisation_kernels(fmt):
    """Weight-only formats keep bf16 activations: the same kernels as the catalog model."""
    from simspec.physics.precision import with_precision

    spec = catalog.get_model("deepseek-v3")
    assert _pass_kernels(with_precision(spec, fmt)) == _pass_kernels(spec)


def test_quantisation_kernels_follow_the_part_not_the_experts():
    """Routed experts alone in nvfp4 (DeepSeek-R1-FP4 as simspec reads it) add nothing; the
    attention projections alone in fp8 add MLA's 3 per layer; a dense layer's FFN adds 2."""
    from simspec.physics.precision import with_precision

    spec = catalog.get_model("deepseek-v3")
    assert _pass_kernels(with_precision(spec, "bf16", expert="nvfp4")) == _pass_kernels(spec)
    attention_only = with_precision(spec, "bf16", attention="fp8")
    assert _pass_kernels(attention_only) - _pass_kernels(spec) == 61 * 3
    dense = layer_kernels("gqa", False, False, quantised_ffn=True)
    assert dense - layer_kernels("gqa", False, False) == 2
