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
