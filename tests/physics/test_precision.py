"""Weight precision per scenario: bytes per parameter by part, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from simspec import catalog
from simspec.config.load import load_scenario
from simspec.costs.kernels import attention_core_s
from simspec.costs.passes import target_pass_cost
from simspec.errors import ScenarioError
from simspec.params import RooflineParams
from simspec.physics.models import attention_params
from simspec.physics.precision import BYTES_PER_PARAM, with_cache_dtypes, with_precision


def test_bytes_per_parameter_of_each_format():
    # OCP MX: 4-bit values + one 8-bit scale per 32; NVFP4: 4-bit values + one 8-bit per 16.
    assert BYTES_PER_PARAM == {
        "bf16": 2.0,
        "fp8": 1.0,
        "mxfp4": (32 * 4 + 8) / 32 / 8,
        "nvfp4": (16 * 4 + 8) / 16 / 8,
        # HQQ: nbits + an 8-bit scale and zero per group + fp16 scale/zero per 128 groups.
        "int2": (2 * 16 + 8 + 8 + 64 / 128) / 16 / 8,
        "int3": (32 / 10 * 32 + 8 + 8 + 64 / 128) / 32 / 8,  # ten 3-bit values per int32
        "int4": (4 * 64 + 8 + 8 + 64 / 128) / 64 / 8,
        # GGUF blocks (ggml-common.h): values + scales in bytes per block of weights.
        "q4_0": (32 * 4 / 8 + 2) / 32,  # 32 nibbles + fp16 d
        "q8_0": (32 + 2) / 32,  # 32 int8 + fp16 d
        "q4_k": (256 * 4 / 8 + 12 + 2 + 2) / 256,  # nibbles, 6-bit scales/mins, fp16 d/dmin
        "q5_k": (256 * 4 / 8 + 256 / 8 + 12 + 2 + 2) / 256,  # + one high bit per weight
        "q6_k": (256 * 4 / 8 + 256 * 2 / 8 + 16 + 2) / 256,  # low nibbles, high 2 bits, scales
        "iq4_xs": (256 * 4 / 8 + 4 + 2 + 2) / 256,  # nibbles, 6-bit scales (4 + 2 B), fp16 d
    }


def test_gguf_bits_per_weight():
    """llama.cpp's documented bits per weight: Q4_K 4.5, Q5_K 5.5, Q6_K 6.5625, Q8_0 8.5."""
    bits = {k: v * 8 for k, v in BYTES_PER_PARAM.items()}
    assert (bits["q4_k"], bits["q5_k"], bits["q6_k"], bits["q8_0"]) == (4.5, 5.5, 6.5625, 8.5)


def test_hqq_sizes_reproduce_mixtral_offloadings_two_model_sizes():
    """arXiv 2312.17238: 4-bit attention with 2-bit experts is 17.54 GB, with 3-bit experts
    21.37 GB; their ratio fixes the 3-bit overhead (the unit, GB or GiB, cancels)."""
    spec = catalog.get_model("mixtral-8x7b")

    def size(experts: str) -> float:
        s = with_precision(spec, "bf16", expert=experts, attention="int4").shape
        return s.total_weight_bytes

    assert size("int3") / size("int2") == pytest.approx(21.37 / 17.54, rel=0.01)
    assert size("int2") == pytest.approx(17.54e9, rel=0.05)  # ~3.5 % above, in decimal GB


def test_catalog_precision_is_the_catalog_spec_itself():
    spec = catalog.get_model("deepseek-v3")
    assert with_precision(spec) is spec
    assert with_precision(spec, "catalog", expert="", shared="", attention="") is spec


def test_fp8_halves_every_quantised_part_and_keeps_the_rest():
    spec = catalog.get_model("deepseek-v3")  # MLA, dense prefix, shared expert: every part
    bf16, fp8 = spec.shape, with_precision(spec, "fp8").shape
    h, m = spec.hidden_size, spec.moe
    assert fp8.expert_bytes == 3 * h * m.expert_intermediate_size * 1.0
    assert fp8.shared_expert_bytes == 3 * h * m.shared_expert_intermediate_size * 1.0
    for g8, g16 in zip(fp8.groups, bf16.groups, strict=True):
        assert g8.attention_weight_bytes == attention_params(spec, "full") * 1.0
        assert g8.ffn_weight_bytes == g16.ffn_weight_bytes / 2
        assert g8.kv_bytes_per_token == g16.kv_bytes_per_token  # the KV cache stays bf16
    assert (fp8.router_bytes, fp8.lm_head_bytes, fp8.embedding_bytes) == (
        bf16.router_bytes,
        bf16.lm_head_bytes,
        bf16.embedding_bytes,
    )
    # Everything but embeddings, LM head and routers halves.
    kept = bf16.embedding_bytes + bf16.lm_head_bytes + bf16.num_moe_layers * bf16.router_bytes
    assert fp8.total_weight_bytes == pytest.approx(kept + (bf16.total_weight_bytes - kept) / 2)


def test_mixed_formats_reproduce_gpt_oss_as_released():
    # gpt-oss ships MXFP4 routed experts and bf16 everything else: the catalog's numbers.
    spec = catalog.get_model("gpt-oss-120b")
    mixed = with_precision(spec, "bf16", expert="mxfp4")
    assert mixed.shape.total_weight_bytes == pytest.approx(spec.shape.total_weight_bytes)
    assert mixed.shape.expert_bytes == 3 * 2880 * 2880 * 4.25 / 8
    only_attention = with_precision(spec, attention="fp8")
    assert only_attention.expert_weight_bytes == spec.expert_weight_bytes
    assert only_attention.shape.attention_bytes_per_param == 1.0


def test_unknown_format_is_rejected():
    with pytest.raises(ValueError, match="fp9"):
        with_precision(catalog.get_model("qwen3-30b-a3b"), "fp9")


def test_flops_do_not_depend_on_the_format_when_compute_bound():
    # 2 FLOPs per parameter per token whatever the bytes: far above the ridge point the
    # attention projections cost the same in bf16 and fp8.
    spec = catalog.get_model("qwen3-8b")
    gpu, params = catalog.get_gpu("h100-sxm"), RooflineParams()
    tokens, ctx = np.array([65536]), np.array([0])
    costs = [
        target_pass_cost(with_precision(spec, p).shape, gpu, params, tokens, ctx, np.zeros(0))
        for p in ("bf16", "fp8")
    ]
    assert costs[1].other_s == pytest.approx(costs[0].other_s, rel=1e-12)


def test_scenario_key_changes_the_target_and_default_does_not():
    default = load_scenario()
    assert default.model.precision == "catalog"
    assert default.target is catalog.get_model(default.model.target)
    fp8 = load_scenario(overrides={"model.precision": "fp8", "model.shared_precision": "bf16"})
    assert fp8.target.expert_weight_bytes == 1.0
    assert fp8.target.shared_weight_bytes == 2.0
    assert fp8.target.shape.total_weight_bytes < default.target.shape.total_weight_bytes


@pytest.mark.parametrize(
    ("key", "value"), [("model.precision", "int8"), ("model.expert_precision", "fp16")]
)
def test_bad_precision_names_the_key(key, value):
    with pytest.raises(ScenarioError) as err:
        load_scenario(overrides={key: value})
    assert err.value.key_path == key
    assert "mxfp4" in err.value.expected


def test_shared_experts_and_router_flops_do_not_depend_on_the_format():
    # DeepSeek-V3: quantised shared experts next to a bf16 router in one roofline term; far
    # above the ridge point every MoE term is FLOP-bound, so fp8 costs what bf16 costs once the
    # routed kernel's exposed share of its (format-dependent) expert stream is set aside.
    spec = catalog.get_model("deepseek-v3")
    gpu, params = catalog.get_gpu("h200"), RooflineParams(moe_exposed_fraction=0.0)
    tokens, ctx = np.array([262144]), np.array([0])
    costs = []
    for p in ("bf16", "fp8"):
        shape = with_precision(spec, p).shape
        unique = np.full(shape.num_moe_layers, float(shape.num_experts))
        costs.append(target_pass_cost(shape, gpu, params, tokens, ctx, unique))
    assert costs[1].moe_s == pytest.approx(costs[0].moe_s, rel=1e-12)


@pytest.mark.parametrize(
    ("fmt", "quantised"),
    [("fp8", True), ("nvfp4", True), ("mxfp4", False), ("int4", False), ("q8_0", False)],
)
def test_activation_quantisation_follows_the_format(fmt, quantised):
    """W8A8 fp8 and W4A4 NVFP4 quantise activations at run time; weight-only formats do not."""
    spec = with_precision(catalog.get_model("qwen3-30b-a3b"), fmt)
    assert spec.attention_activation_quant is quantised
    assert spec.shared_activation_quant is quantised


def test_expert_precision_alone_sets_no_activation_flag():
    spec = with_precision(catalog.get_model("deepseek-v3"), "bf16", expert="fp8")
    assert not spec.attention_activation_quant and not spec.shared_activation_quant


def test_fp8_pass_pays_the_floor_of_each_activation_quantisation():
    """A decode pass of DeepSeek-V3 in fp8 costs 61 x 5 more kernel floors than in bf16 (one per
    quantised GEMM input: MLA's 3, the shared expert's or dense FFN's 2), at the GPU's floor."""
    spec, gpu = catalog.get_model("deepseek-v3"), catalog.get_gpu("h200")
    params = RooflineParams()
    tokens, ctx = np.array([1]), np.array([1024])
    floors = [
        target_pass_cost(
            with_precision(spec, p).shape, gpu, params, tokens, ctx, np.full(58, 8.0)
        ).floors_s
        for p in ("bf16", "fp8")
    ]
    assert floors[1] - floors[0] == pytest.approx(61 * 5 * gpu.kernel_floor_s(True), rel=1e-12)


NEXT = catalog.get_model("qwen3-next-80b-a3b")


@pytest.mark.parametrize(
    ("model", "values"),
    [
        # GQA: K and V of each KV head per full-attention layer (Qwen3-30B-A3B: 4 heads x 128).
        ("qwen3-30b-a3b", 48 * 2 * 4 * 128),
        # MLA: the latent (512) and the RoPE key (64) per layer, shared by all heads.
        ("deepseek-v3", 61 * (512 + 64)),
    ],
)
def test_an_fp8_kv_cache_stores_one_byte_per_value(model, values):
    spec = catalog.get_model(model)
    assert spec.shape.kv_bytes_per_token == values * spec.weight_bytes  # auto: bf16
    fp8 = with_cache_dtypes(spec, "fp8")
    assert fp8.shape.kv_bytes_per_token == values * 1.0
    assert with_cache_dtypes(spec, "fp8_e5m2").shape == fp8.shape


def test_a_bfloat16_state_halves_what_a_linear_attention_layer_moves():
    a = NEXT.attention
    values = a.linear_num_value_heads * a.linear_key_head_dim * a.linear_value_head_dim
    (linear,) = [g for g in NEXT.shape.groups if g.state_bytes > 0]
    assert linear.state_bytes == 2 * 4.0 * values  # read and written, float32 by default
    (half,) = [g for g in with_cache_dtypes(NEXT, state="bfloat16").shape.groups if g.state_bytes]
    assert half.state_bytes == 2 * 2.0 * values


def test_default_cache_dtypes_keep_the_catalog_spec_and_unknown_ones_are_refused():
    assert with_cache_dtypes(NEXT) is NEXT
    with pytest.raises(ValueError, match="KV-cache dtype"):
        with_cache_dtypes(NEXT, "int4")
    with pytest.raises(ValueError, match="state dtype"):
        with_cache_dtypes(NEXT, state="fp8")


def test_the_engines_kv_and_state_flags_reach_the_target():
    s = load_scenario(
        None,
        {
            "kv_cache_dtype": "fp8",
            "model.target": "qwen3-next-80b-a3b",
            "model.drafter": "eagle3-qwen3-next-80b-a3b",
            "hardware.gpu": "h200",
            "model.precision": "fp8",
            "mamba_ssm_cache_dtype": "bfloat16",
        },
    )
    assert (s.target.kv_cache_bytes, s.target.state_value_bytes) == (1.0, 2.0)
    with pytest.raises(ScenarioError, match="kv_cache_dtype"):
        load_scenario(None, {"model.kv_cache_dtype": "fp4"})


#: vLLM PR #31722 (https://github.com/vllm-project/vllm/pull/31722), H200:
#: fused_recurrent_gated_delta_rule_fwd with Qwen3-Next's shapes after the PR, µs per call (one
#: layer's decode step), by tensor-parallel degree and batch. The states were bfloat16 (vLLM's
#: default then, the model dtype): in float32 the 1024-request TP2 call would move 2 GB in
#: 420 µs, above the H200's 4.8 TB/s.
GDN_DECODE_US = {
    2: {256: 111.14, 512: 212.70, 1024: 420.22},
    4: {256: 60.29, 512: 113.28, 1024: 215.12},
}


@pytest.mark.parametrize("tensor", [2, 4])
def test_a_linear_attention_decode_step_moves_its_states_at_the_kv_efficiency(tensor):
    """Each request's state is read and written once per layer at the KV efficiency over the
    tensor ranks' share of the value heads: within 10 % of vLLM's measured kernel where the
    states' bytes dominate (256+ requests; below that the kernel's launch floor, priced apart
    in simspec.physics.launches, dominates)."""
    spec = with_cache_dtypes(NEXT, state="bfloat16")
    (linear,) = [g for g in spec.shape.groups if g.state_bytes > 0]
    h200, eff = catalog.get_gpu("h200"), RooflineParams().kv_efficiency
    for batch, measured_us in GDN_DECODE_US[tensor].items():
        requests = np.ones(batch)
        bandwidth = h200.hbm_bytes_per_s * eff * tensor / linear.kv_copies(tensor)
        predicted = attention_core_s(linear, requests, 0 * requests, bandwidth, 1e18)
        assert predicted * 1e6 == pytest.approx(measured_us, rel=0.10)
