"""A :class:`~simspec.physics.models.ModelSpec` from a Hugging Face ``config.json``.

A model outside the catalog can be simulated from the ``config.json`` its checkpoint ships
with. This module reads the fields of the MoE families below (their names as the transformers
configuration classes define them) and maps them onto the catalog's vocabulary:

==================  =================================================================
``model_type``      experts, expert width, shared experts, dense layers
==================  =================================================================
mixtral             num_local_experts, num_experts_per_tok, intermediate_size (expert)
qwen2_moe           num_experts, num_experts_per_tok, moe_intermediate_size,
                    1 shared expert of shared_expert_intermediate_size,
                    decoder_sparse_step, mlp_only_layers (a leading run of layers)
qwen3_moe           as qwen2_moe, without the shared expert; head_dim
olmoe               num_experts, num_experts_per_tok, intermediate_size (expert)
deepseek_v2 / _v3   n_routed_experts, num_experts_per_tok, moe_intermediate_size,
                    n_shared_experts of the same width, first_k_dense_replace,
                    moe_layer_freq (1 only), MLA: q_lora_rank, kv_lora_rank,
                    qk_nope_head_dim, qk_rope_head_dim, v_head_dim
gpt_oss             num_local_experts, num_experts_per_tok, intermediate_size (expert),
                    layer_types (sliding / full attention), sliding_window, head_dim;
                    MXFP4 experts when quantization_config.quant_method = "mxfp4"
glm4_moe            n_routed_experts, num_experts_per_tok, moe_intermediate_size,
                    n_shared_experts, first_k_dense_replace, head_dim
phimoe              as mixtral (Phi-3.5-MoE)
minimax_m2          as mixtral, with head_dim; attn_type_list must be all 1 (softmax
                    attention; MiniMax's lightning linear attention, 0, is not described)
==================  =================================================================

Common to all: num_hidden_layers, hidden_size, vocab_size, num_attention_heads,
num_key_value_heads (default: the heads), head_dim (default: hidden_size / heads),
tie_word_embeddings, max_position_embeddings, intermediate_size (the dense-FFN width where the
family has dense layers). A sliding window at least as long as the context
(``max_position_embeddings``; Phi-3.5-MoE's 131072) never slides: such layers are full.
Per-head query/key normalisation (``qk_norm``) is the qwen3_moe and olmoe architectures' own (their
attention always carries ``q_norm`` / ``k_norm``; OLMoE's span all heads together, over the query
and the key widths) and the ``use_qk_norm`` of glm4_moe (true for GLM-4.5, false for GLM-4.5-Air)
and minimax_m2 (whose norm spans all heads together: the same two norm kernels). Weights are taken
as bf16 (2 bytes per parameter) apart from gpt-oss's MXFP4 experts (4.25 bits: 4-bit values plus one
8-bit scale per 32, OCP MX spec v1.0), as the catalog does, and an FP8 checkpoint's
(``quantization_config.quant_method = "fp8"``: DeepSeek-V3's, Qwen3's and GLM-4.5's FP8 releases),
whose experts, shared experts, dense FFNs and attention projections are read as fp8 with run-time
activation quantisation (:func:`simspec.physics.precision.with_precision`; embeddings, LM head and
router stay bf16); a scenario's ``[model] precision`` changes them. MiniMax-M2's config.json
declares MTP modules (``num_mtp_modules``) whose weights are not released: they are not read.
Multi-token prediction layers (``num_nextn_predict_layers``) are not counted in the layers, as in
the catalog; their number is kept (``mtp_layers``) for an MTP drafter. The headline parameter counts
are derived from the shapes (total, and active per token with ``experts_per_token`` of the routed
experts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from simspec.errors import FieldError, InputError, describe
from simspec.physics.models import AttentionSpec, FfnSpec, ModelSpec, MoeSpec, derive_shape
from simspec.physics.precision import with_precision

#: The ``model_type`` values :func:`model_spec_from_hf` reads.
FAMILIES = (
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "olmoe",
    "deepseek_v2",
    "deepseek_v3",
    "gpt_oss",
    "glm4_moe",
    "phimoe",
    "minimax_m2",
)
#: Bytes per parameter of MXFP4 weights: a 4-bit value plus an 8-bit scale per 32 values.
MXFP4_BYTES = (4 + 8 / 32) / 8


class _Fields:
    """Typed reads of config.json fields, each failure naming the file and the key."""

    def __init__(self, config: Mapping[str, Any], source: str) -> None:
        self.config, self.source = config, source

    def int(self, key: str, default: int | None = None, *, minimum: int = 0) -> int:
        value = self.config.get(key, default)
        if value is None and default is not None:
            value = default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InputError(
                self.source, key, f"an integer >= {minimum} (config.json field)", describe(value)
            )
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = self.config.get(key, default)
        return default if value is None else value


def _attention(f: _Fields, family: str, hidden: int, layers: int) -> AttentionSpec:
    heads = f.int("num_attention_heads", minimum=1)
    if family.startswith("deepseek"):
        nope, rope = f.int("qk_nope_head_dim", minimum=1), f.int("qk_rope_head_dim", minimum=1)
        return AttentionSpec(
            kind="mla",
            num_heads=heads,
            num_kv_heads=f.int("num_key_value_heads", heads, minimum=1),
            head_dim=nope + rope,
            q_lora_rank=f.int("q_lora_rank", 0),
            kv_lora_rank=f.int("kv_lora_rank", minimum=1),
            qk_nope_head_dim=nope,
            qk_rope_head_dim=rope,
            v_head_dim=f.int("v_head_dim", minimum=1),
        )
    shape: dict[str, Any] = {
        "qk_norm": family in ("qwen3_moe", "olmoe") or bool(f.get("use_qk_norm", False)),
        "num_heads": heads,
        "num_kv_heads": f.int("num_key_value_heads", heads, minimum=1),
        "head_dim": f.int("head_dim", hidden // heads, minimum=1),
    }
    window = f.get("sliding_window", 0)
    layer_types = f.get("layer_types")
    if layer_types is not None:
        shape.update(_layer_pattern(f, layer_types, layers))
        if shape.get("other_layers") == "sliding":
            shape["sliding_window"] = f.int("sliding_window", minimum=1)
    elif window and family in ("mixtral", "phimoe") and not _spans_context(f, window):
        # a sliding window of these families applies to every layer
        shape.update(
            full_attention_interval=layers + 1, other_layers="sliding", sliding_window=window
        )
    return AttentionSpec(**shape)


def _spans_context(f: _Fields, window: Any) -> bool:
    """A window at least as long as the context: every layer sees its whole context."""
    context = f.get("max_position_embeddings", 0)
    return isinstance(window, int) and isinstance(context, int) and 0 < context <= window


def _softmax_only(f: _Fields, layers: int) -> None:
    """MiniMax's ``attn_type_list``: 1 marks a softmax-attention layer, 0 a lightning
    (linear) attention layer, which simspec's AttentionSpec does not describe."""
    kinds = f.get("attn_type_list")
    if kinds is not None and kinds != [1] * layers:
        raise InputError(
            f.source,
            "attn_type_list",
            f"{layers} entries of 1 (softmax attention in every layer)",
            describe(kinds),
        )


def _layer_pattern(f: _Fields, layer_types: Any, layers: int) -> dict[str, Any]:
    """``layer_types`` as a period n: layer l is full iff (l + 1) % n == 0, others sliding."""
    valid = {"full_attention", "sliding_attention"}
    if (
        not isinstance(layer_types, list)
        or len(layer_types) != layers
        or not set(layer_types) <= valid
    ):
        raise InputError(
            f.source,
            "layer_types",
            f"a list of {layers} 'full_attention' / 'sliding_attention' entries",
            describe(layer_types),
        )
    if all(t == "full_attention" for t in layer_types):
        return {}
    for period in range(1, layers + 2):
        pattern = [
            "full_attention" if (i + 1) % period == 0 else "sliding_attention"
            for i in range(layers)
        ]
        if pattern == layer_types:
            return {"full_attention_interval": period, "other_layers": "sliding"}
    raise InputError(
        f.source,
        "layer_types",
        "full attention on every n-th layer (layer l full iff (l + 1) % n == 0), the rest "
        "sliding: the pattern simspec's AttentionSpec describes",
        "another pattern",
    )


def _dense_prefix(f: _Fields, key: str, layers: int) -> int:
    """A leading run of dense layers given as a list of layer indices (qwen mlp_only_layers)."""
    listed = f.get(key, [])
    if not isinstance(listed, list) or sorted(listed) != list(range(len(listed))):
        raise InputError(
            f.source, key, "an empty list or the leading layers [0, 1, ..., n-1]", describe(listed)
        )
    return min(len(listed), layers)


def _moe(f: _Fields, family: str, layers: int) -> tuple[MoeSpec, int]:
    """The experts and the dense-FFN width as config.json declares it (used by dense layers)."""
    if family in ("mixtral", "olmoe", "gpt_oss", "phimoe", "minimax_m2"):
        experts = f.int("num_local_experts" if family != "olmoe" else "num_experts", minimum=1)
        per_token = f.int("num_experts_per_tok", f.get("experts_per_token"), minimum=1)
        width = f.int("intermediate_size", minimum=1)
        return MoeSpec(
            num_experts=experts, experts_per_token=per_token, expert_intermediate_size=width
        ), width
    if family in ("qwen2_moe", "qwen3_moe"):
        shared = f.int("shared_expert_intermediate_size", 0) if family == "qwen2_moe" else 0
        dense = _dense_prefix(f, "mlp_only_layers", layers)
        spec = MoeSpec(
            num_experts=f.int("num_experts", minimum=1),
            experts_per_token=f.int("num_experts_per_tok", minimum=1),
            expert_intermediate_size=f.int("moe_intermediate_size", minimum=1),
            num_shared_experts=1 if shared else 0,
            shared_expert_intermediate_size=shared,
            first_dense_layers=dense,
            moe_layer_interval=f.int("decoder_sparse_step", 1, minimum=1),
        )
        return spec, f.int("intermediate_size", 0)
    # deepseek_v2 / deepseek_v3 / glm4_moe: DeepSeek's layout of shared experts and dense prefix
    if f.int("moe_layer_freq", 1, minimum=1) != 1:
        raise InputError(
            f.source,
            "moe_layer_freq",
            "1 (every layer after the dense prefix is MoE)",
            describe(f.get("moe_layer_freq")),
        )
    width = f.int("moe_intermediate_size", minimum=1)
    shared = f.int("n_shared_experts", 0)
    dense = min(f.int("first_k_dense_replace", 0), layers)
    spec = MoeSpec(
        num_experts=f.int("n_routed_experts", minimum=1),
        experts_per_token=f.int("num_experts_per_tok", minimum=1),
        expert_intermediate_size=width,
        num_shared_experts=shared,
        shared_expert_intermediate_size=width if shared else 0,
        first_dense_layers=dense,
    )
    return spec, f.int("intermediate_size", 0)


def _parameters_b(spec: ModelSpec) -> tuple[float, float]:
    """(total, active) parameters in billions, counted from the shapes (1 byte = 1 parameter)."""
    ones = dataclasses.replace(
        spec,
        weight_bytes=1.0,
        expert_weight_bytes=1.0,
        shared_weight_bytes=0.0,
        attention_weight_bytes=0.0,
    )
    shape = derive_shape(ones)
    idle = shape.num_moe_layers * (shape.num_experts - shape.experts_per_token)
    total = shape.total_weight_bytes
    return round(total / 1e9, 2), round((total - idle * shape.expert_params) / 1e9, 2)


def model_spec_from_hf(
    config: Mapping[str, Any], name: str, source: str = "config.json"
) -> ModelSpec:
    """The :class:`ModelSpec` of a Hugging Face ``config.json`` (module docstring).

    Parameters
    ----------
    config : mapping
        The parsed config.json (a multimodal wrapper's ``text_config`` is read when present).
    name : str
        The model's name in the scenario (``model.target``).
    source : str
        The file, for error messages and the spec's ``source``.

    Raises
    ------
    InputError
        An unknown ``model_type`` (the message lists :data:`FAMILIES`), a missing or mistyped
        field, or a layer pattern simspec cannot describe.
    """
    if isinstance(config.get("text_config"), Mapping):
        config = {
            **config["text_config"],
            "model_type": config["text_config"].get("model_type", config.get("model_type")),
        }
    f = _Fields(config, source)
    family = config.get("model_type")
    if family not in FAMILIES:
        raise InputError(
            source,
            "model_type",
            "one of " + ", ".join(FAMILIES) + " (MoE families simspec "
            "reads; for others write the model's table as in simspec/catalog/models)",
            describe(family),
        )
    try:
        spec = _spec(f, str(family), name, source)
    except FieldError as err:  # e.g. more experts per token than experts
        raise InputError(source, err.key, err.expected, describe(err.found)) from None
    _check_bounds(spec, source)
    total, active = _parameters_b(spec)
    return dataclasses.replace(spec, total_params_b=total, active_params_b=active)


#: The config.json fields behind a ModelSpec key, for messages (the families' usual names).
_HF_NAMES = {
    "num_layers": "num_hidden_layers",
    "max_context_tokens": "max_position_embeddings",
    "mtp_layers": "num_nextn_predict_layers",
    "moe.num_experts": "num_experts / num_local_experts / n_routed_experts",
    "moe.experts_per_token": "num_experts_per_tok",
    "moe.expert_intermediate_size": "moe_intermediate_size / intermediate_size",
    "moe.num_shared_experts": "n_shared_experts",
    "moe.first_dense_layers": "first_k_dense_replace / mlp_only_layers",
    "ffn.dense_intermediate_size": "intermediate_size",
    "attention.num_heads": "num_attention_heads",
    "attention.num_kv_heads": "num_key_value_heads",
}


def _check_bounds(spec: ModelSpec, source: str) -> None:
    """Hold a spec read from config.json to the bounds of a ``[model.custom]`` table (the
    ModelSpec fields' own), before anything loops over its layers or sizes an array by it:
    ``num_hidden_layers = 10**9`` would otherwise hang in the shape derivation."""
    from simspec.errors import ScenarioError
    from simspec.schema import build, to_dict

    data = to_dict(spec)
    try:
        build(ModelSpec, data, source=source)
    except ScenarioError as err:
        named = _HF_NAMES.get(err.key_path, err.key_path.rpartition(".")[2])
        key = f"{named} (simspec's {err.key_path})" if named != err.key_path else named
        raise InputError(source, key, err.expected, err.found) from None


def _spec(f: _Fields, family: str, name: str, source: str) -> ModelSpec:
    layers, hidden = f.int("num_hidden_layers", minimum=1), f.int("hidden_size", minimum=1)
    if family == "minimax_m2":
        _softmax_only(f, layers)
    moe, dense_width = _moe(f, family, layers)
    quant = f.get("quantization_config", {})
    method = quant.get("quant_method") if isinstance(quant, Mapping) else None
    mxfp4 = method == "mxfp4"
    spec = ModelSpec(
        name=name,
        display_name=str(f.get("_name_or_path", name)),
        family=family,
        source=source,
        notes="read from a Hugging Face config.json by simspec.physics.hf_config",
        num_layers=layers,
        hidden_size=hidden,
        vocab_size=f.int("vocab_size", minimum=1),
        tie_word_embeddings=bool(f.get("tie_word_embeddings", False)),
        expert_weight_bytes=MXFP4_BYTES if mxfp4 else 2.0,
        max_context_tokens=f.int("max_position_embeddings", 0),
        mtp_layers=f.int("num_nextn_predict_layers", 0),
        ffn=FfnSpec(dense_intermediate_size=dense_width),
        moe=moe,
        attention=_attention(f, family, hidden, layers),
    )
    return with_precision(spec, "fp8") if method == "fp8" else spec
