"""ModelSpec from Hugging Face config.json: published configs against the catalog's entries."""

from __future__ import annotations

import pytest

from simspec import catalog
from simspec.errors import InputError
from simspec.physics.hf_config import MXFP4_BYTES, model_spec_from_hf

# Fields as published in each checkpoint's config.json (huggingface.co/<repo>/blob/main/...).
QWEN3_30B_A3B = {  # Qwen/Qwen3-30B-A3B
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "sliding_window": None,
    "use_sliding_window": False,
}
MIXTRAL_8X7B = {  # mistralai/Mixtral-8x7B-v0.1
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
    "sliding_window": None,
    "tie_word_embeddings": False,
}
OLMOE = {  # allenai/OLMoE-1B-7B-0924
    "model_type": "olmoe",
    "hidden_size": 2048,
    "intermediate_size": 1024,
    "num_experts": 64,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 16,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "vocab_size": 50304,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}
DEEPSEEK_V3 = {  # deepseek-ai/DeepSeek-V3
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "max_position_embeddings": 163840,
    "num_nextn_predict_layers": 1,
    "tie_word_embeddings": False,
}
GPT_OSS_20B = {  # openai/gpt-oss-20b
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_local_experts": 32,
    "num_experts_per_tok": 4,
    "experts_per_token": 4,
    "num_hidden_layers": 24,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "vocab_size": 201088,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]},
}
GLM_45 = {  # zai-org/GLM-4.5
    "model_type": "glm4_moe",
    "hidden_size": 5120,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "n_routed_experts": 160,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "num_hidden_layers": 92,
    "num_attention_heads": 96,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151552,
    "max_position_embeddings": 131072,
    "num_nextn_predict_layers": 1,
    "tie_word_embeddings": False,
    "use_qk_norm": True,
}
GLM_46 = {  # zai-org/GLM-4.6: GLM-4.5's fields, a longer context
    **GLM_45,
    "max_position_embeddings": 202752,
}
DEEPSEEK_V2_LITE = {  # deepseek-ai/DeepSeek-V2-Lite
    "model_type": "deepseek_v2",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "q_lora_rank": None,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 102400,
    "max_position_embeddings": 163840,
    "tie_word_embeddings": False,
}
MINIMAX_M2 = {  # MiniMaxAI/MiniMax-M2
    "model_type": "minimax_m2",
    "hidden_size": 3072,
    "intermediate_size": 1536,
    "num_local_experts": 256,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 62,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "attn_type_list": [1] * 62,
    "vocab_size": 200064,
    "max_position_embeddings": 196608,
    "tie_word_embeddings": False,
    "use_qk_norm": True,
    "qk_norm_type": "per_layer",
    "use_mtp": True,
    "num_mtp_modules": 3,  # declared, but no MTP weights are released
    "shared_intermediate_size": 0,
}
PHI_35_MOE = {  # microsoft/Phi-3.5-MoE-instruct
    "model_type": "phimoe",
    "hidden_size": 4096,
    "intermediate_size": 6400,
    "num_local_experts": 16,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32064,
    "max_position_embeddings": 131072,
    "sliding_window": 131072,
    "attention_bias": True,
    "lm_head_bias": True,
    "tie_word_embeddings": False,
}
QWEN15_MOE = {  # Qwen/Qwen1.5-MoE-A2.7B-Chat
    "model_type": "qwen2_moe",
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "tie_word_embeddings": False,
}

CASES = [
    ("qwen3-30b-a3b", QWEN3_30B_A3B),
    ("mixtral-8x7b", MIXTRAL_8X7B),
    ("olmoe-1b-7b-0924", OLMOE),
    ("deepseek-v3", DEEPSEEK_V3),
    ("gpt-oss-20b", GPT_OSS_20B),
    ("glm-4.5", GLM_45),
    ("qwen1.5-moe-a2.7b", QWEN15_MOE),
    ("glm-4.6", GLM_46),
    ("deepseek-v2-lite", DEEPSEEK_V2_LITE),
    ("minimax-m2", MINIMAX_M2),
    ("phi-3.5-moe", PHI_35_MOE),
]


@pytest.mark.parametrize(("name", "config"), CASES, ids=[c[0] for c in CASES])
def test_config_json_gives_the_catalog_shape(name, config):
    """What the cost model reads (bytes per pass, KV per token, experts) equals the catalog's."""
    ours, theirs = model_spec_from_hf(config, name), catalog.get_model(name)
    a, b = ours.shape, theirs.shape
    assert a.groups == b.groups
    assert a.num_moe_layers == b.num_moe_layers
    assert (a.num_experts, a.experts_per_token) == (b.num_experts, b.experts_per_token)
    assert a.expert_bytes == b.expert_bytes
    assert a.shared_expert_bytes == b.shared_expert_bytes
    assert a.kv_bytes_per_token == b.kv_bytes_per_token
    assert a.total_weight_bytes == pytest.approx(b.total_weight_bytes, rel=1e-12)
    assert ours.attention == theirs.attention
    assert ours.ffn == theirs.ffn
    assert ours.max_context_tokens == theirs.max_context_tokens
    assert ours.mtp_layers == theirs.mtp_layers  # num_nextn_predict_layers (0 when absent)


@pytest.mark.parametrize(
    ("config", "total_b", "active_b"),
    [
        (QWEN3_30B_A3B, 30.5, 3.3),
        (MIXTRAL_8X7B, 46.7, 12.9),
        (DEEPSEEK_V3, 671.0, 37.0),
        (GLM_46, 355.0, 32.0),
        (PHI_35_MOE, 42.0, 6.6),
    ],
)
def test_derived_parameter_counts_match_the_headlines(config, total_b, active_b):
    """Counted from the shapes, within 3 % of the published totals and active counts."""
    spec = model_spec_from_hf(config, "m")
    assert spec.total_params_b == pytest.approx(total_b, rel=0.03)
    assert spec.active_params_b == pytest.approx(active_b, rel=0.06)


def test_qwen3_shape_by_hand():
    """Closed forms: one expert = 3·h·i·2 bytes; KV = 48 layers · 2 · 4 heads · 128 · 2 bytes."""
    shape = model_spec_from_hf(QWEN3_30B_A3B, "q").shape
    assert shape.expert_bytes == 3 * 2048 * 768 * 2
    assert shape.kv_bytes_per_token == 48 * 2 * 4 * 128 * 2


def test_gpt_oss_reads_mxfp4_and_the_sliding_pattern():
    spec = model_spec_from_hf(GPT_OSS_20B, "g")
    assert spec.expert_weight_bytes == MXFP4_BYTES == 0.53125
    assert (spec.attention.full_attention_interval, spec.attention.other_layers) == (2, "sliding")
    assert spec.attention.sliding_window == 128


def test_text_config_wrapper_is_read():
    wrapped = {"model_type": "some_vlm", "text_config": QWEN3_30B_A3B}
    assert model_spec_from_hf(wrapped, "q").shape == model_spec_from_hf(QWEN3_30B_A3B, "q").shape


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"model_type": "llama"}, "model_type"),
        ({"num_experts": "many"}, "num_experts"),
        ({"num_hidden_layers": 0}, "num_hidden_layers"),
        ({"mlp_only_layers": [3, 7]}, "mlp_only_layers"),
        ({"num_experts_per_tok": 200}, "experts_per_token"),
    ],
)
def test_bad_configs_name_the_field(change, key):
    with pytest.raises(InputError) as err:
        model_spec_from_hf({**QWEN3_30B_A3B, **change}, "q", "my/config.json")
    assert err.value.key_path == key
    assert "my/config.json" in str(err.value)


def test_a_window_spanning_the_context_is_full_attention_and_a_shorter_one_slides():
    """Phi-3.5-MoE's sliding_window equals its context: every layer sees all of it."""
    assert model_spec_from_hf(PHI_35_MOE, "p").attention.other_layers == "full"
    short = model_spec_from_hf({**PHI_35_MOE, "sliding_window": 4096}, "p").attention
    assert (short.other_layers, short.sliding_window) == ("sliding", 4096)
    assert short.full_attention_interval > PHI_35_MOE["num_hidden_layers"]


def test_minimax_lightning_attention_layers_are_refused():
    """attn_type_list 0 marks MiniMax's lightning (linear) attention, which is not described."""
    config = {**MINIMAX_M2, "attn_type_list": [0] + [1] * 61}
    with pytest.raises(InputError) as err:
        model_spec_from_hf(config, "m")
    assert err.value.key_path == "attn_type_list"


def test_unrepresentable_layer_pattern_is_refused():
    config = {**GPT_OSS_20B, "layer_types": ["full_attention"] * 2 + ["sliding_attention"] * 22}
    with pytest.raises(InputError, match="layer_types"):
        model_spec_from_hf(config, "g")


@pytest.mark.parametrize(
    ("config", "qk_norm"),
    [
        (QWEN3_30B_A3B, True),  # the qwen3_moe attention always carries q_norm / k_norm
        (GLM_45, True),  # use_qk_norm: true
        ({**GLM_45, "use_qk_norm": False}, False),  # GLM-4.5-Air's
        (MIXTRAL_8X7B, False),
        (GPT_OSS_20B, False),
        (QWEN15_MOE, False),
        (MINIMAX_M2, True),  # use_qk_norm, over all heads together (per_layer)
        (PHI_35_MOE, False),
    ],
)
def test_query_key_norms_come_from_the_architecture_and_use_qk_norm(config, qk_norm):
    """Per-head query/key RMSNorm is read from config.json: the qwen3_moe family's own,
    glm4_moe's ``use_qk_norm``; absent elsewhere."""
    assert model_spec_from_hf(config, "m").attention.qk_norm is qk_norm


def test_an_fp8_checkpoint_is_read_as_fp8_with_quantised_activations():
    """deepseek-ai/DeepSeek-V3's config.json declares quant_method fp8 (128x128 blocks): the
    linear weights are 1 byte per parameter, embeddings / LM head / router stay bf16."""
    config = {
        **DEEPSEEK_V3,
        "quantization_config": {
            "activation_scheme": "dynamic",
            "fmt": "e4m3",
            "quant_method": "fp8",
            "weight_block_size": [128, 128],
        },
    }
    spec = model_spec_from_hf(config, "d")
    assert (spec.expert_weight_bytes, spec.shared_weight_bytes) == (1.0, 1.0)
    assert (spec.attention_weight_bytes, spec.weight_bytes) == (1.0, 2.0)
    assert spec.attention_activation_quant and spec.shared_activation_quant
    bf16 = model_spec_from_hf(DEEPSEEK_V3, "d")
    assert spec.shape.expert_bytes == bf16.shape.expert_bytes / 2
    assert spec.total_params_b == bf16.total_params_b
    assert spec.active_params_b == bf16.active_params_b
