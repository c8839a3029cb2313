"""Weight precision: bytes per parameter of each kind of weight, per scenario.

A checkpoint's linear weights may be stored in one of a few formats; the bytes a pass reads per
parameter are what the roofline needs (block scales included):

- ``bf16``: 2 bytes.
- ``fp8`` (e4m3, per-channel or 128x128 block scales): 1 byte; the scales (one fp32 per 128x128
  block, < 0.03 %) are ignored.
- ``mxfp4`` (OCP Microscaling v1.0: 4-bit E2M1 values, one 8-bit E8M0 scale per block of 32):
  4.25 bits = 0.53125 bytes (gpt-oss ships its routed experts this way).
- ``nvfp4`` (NVIDIA NVFP4: 4-bit E2M1 values, one FP8 E4M3 scale per block of 16, plus one fp32
  scale per tensor): 4.5 bits = 0.5625 bytes.
- ``int2``, ``int3``, ``int4``: integer weights with a scale and a zero point per group, as HQQ
  stores them (https://github.com/mobiusml/hqq; ``quant_scale`` / ``quant_zero``: the group's
  scale and zero are themselves quantised to 8 bits, with an fp16 scale and zero per 128 of
  them, i.e. 64 bits per 128 groups). The group sizes are Mixtral-offloading's (arXiv
  2312.17238; its configuration: experts ``nbits=2, group_size=16``, attention ``nbits=4,
  group_size=64``, https://github.com/dvmazur/mixtral-offloading):

  * ``int2``: 2 + 16/16 + 0.5/16 = 3.03125 bits (group 16);
  * ``int3``: HQQ packs ten 3-bit values per 32-bit word (3.2 bits) + 16/32 + 0.5/32 = 3.715625
    bits (group 32: the paper's model sizes, 17.54 GB with 2-bit and 21.37 GB with 3-bit
    experts, differ by 1.218x, which 3.03 vs 3.72 bits on 45.1 B expert parameters plus 1.23 GB
    of 4-bit attention and fp16 embeddings reproduces, 1.218x; group 64 would give 1.14x);
  * ``int4``: 4 + 16/64 + 0.5/64 = 4.2578125 bits (group 64; GPTQ/AWQ's 4 bits + an fp16 scale
    and zero per 128 is 4.25).
- GGUF block formats (llama.cpp; the block layouts of ggml's ``block_q4_0`` ... ``block_q6_K``
  and ``block_iq4_xs``, https://github.com/ggml-org/llama.cpp/blob/master/ggml/src/ggml-common.h),
  bytes per block of weights:

  * ``q4_0``: 32 4-bit values + an fp16 scale = 18 B / 32 = 4.5 bits;
  * ``q8_0``: 32 int8 values + an fp16 scale = 34 B / 32 = 8.5 bits;
  * ``q4_k``: a 256-weight super-block of 4-bit values, 8 sub-blocks with 6-bit scales and mins
    (12 B) and an fp16 scale and min = 144 B / 256 = 4.5 bits;
  * ``q5_k``: as q4_k plus one high bit per weight (32 B) = 176 B / 256 = 5.5 bits;
  * ``q6_k``: 6-bit values (192 B), 16 int8 sub-block scales and an fp16 scale = 210 B / 256 =
    6.5625 bits;
  * ``iq4_xs``: 4-bit non-linear values (128 B), 6-bit sub-block scales (6 B) and an fp16 scale
    = 136 B / 256 = 4.25 bits.

  A mixed GGUF (Q4_K_M, Unsloth's UD-Q4_K_XL) keeps some tensors in a wider format: its bytes
  per expert are best read from the file, or from a cache size the source states.

A scenario's ``[model] precision`` sets the routed experts, the always-active FFN weights (shared
experts and dense FFN layers) and the attention projections; ``expert_precision``,
``shared_precision`` and ``attention_precision`` override one part (gpt-oss: ``precision =
"bf16"``, ``expert_precision = "mxfp4"``). Embeddings, the LM head and the router keep the
catalog's ``weight_bytes`` (quantised checkpoints keep them in bf16), and so does the KV cache
unless ``kv_cache_dtype`` names another (:func:`with_cache_dtypes`, which also sets
``ssm_state_dtype``, the linear-attention states' format). ``"catalog"`` (the
default) keeps the catalog's numbers, i.e. today's behaviour. A part in fp8 or nvfp4 also
quantises its GEMM inputs at run time, a kernel per GEMM (:data:`ACTIVATION_QUANT_FORMATS`).
FLOPs are counted per parameter at the bf16 tensor rate whatever the format (fp8/fp4
tensor-core rates are not modelled).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from simspec.physics.models import ModelSpec

#: Bytes per parameter of each weight format (module docstring).
BYTES_PER_PARAM: dict[str, float] = {
    "bf16": 2.0,
    "fp8": 1.0,
    "mxfp4": 4.25 / 8,
    "nvfp4": 4.5 / 8,
    "int2": (2 + 16 / 16 + 0.5 / 16) / 8,
    "int3": (3.2 + 16 / 32 + 0.5 / 32) / 8,
    "int4": (4 + 16 / 64 + 0.5 / 64) / 8,
    "q4_0": 18 / 32,
    "q8_0": 34 / 32,
    "q4_k": 144 / 256,
    "q5_k": 176 / 256,
    "q6_k": 210 / 256,
    "iq4_xs": 136 / 256,
}

#: Formats whose checkpoints quantise activations at run time as well as weights (fp8 W8A8
#: with dynamic activation scales, NVFP4 W4A4): a part stored in one of them runs a
#: quantisation kernel before each of its GEMMs (:mod:`simspec.physics.launches`). The integer,
#: MXFP4 and GGUF formats keep bf16 activations (weight-only kernels dequantise in the GEMM).
ACTIVATION_QUANT_FORMATS = ("fp8", "nvfp4")

#: ``[model] precision`` values: the catalog's numbers, or one of :data:`BYTES_PER_PARAM`.
PRECISIONS: tuple[str, ...] = ("catalog", *BYTES_PER_PARAM)

#: Per-part overrides: "" follows ``precision``.
PART_PRECISIONS: tuple[str, ...] = ("", *PRECISIONS)


#: Bytes per KV-cache value of each ``[model] kv_cache_dtype`` (SGLang's and vLLM's
#: ``--kv-cache-dtype`` names; TensorRT-LLM's ``kv_cache_config.dtype``); ``auto`` (0) keeps the
#: model's ``weight_bytes``, the engines' default.
KV_CACHE_DTYPES: dict[str, float] = {
    "auto": 0.0,
    "bf16": 2.0,
    "bfloat16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
}

#: Bytes per value of a linear-attention layer's recurrent state for each ``[model]
#: ssm_state_dtype`` (SGLang's ``--mamba-ssm-dtype``, vLLM's ``--mamba-ssm-cache-dtype``).
SSM_STATE_DTYPES: dict[str, float] = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0}


def with_cache_dtypes(spec: ModelSpec, kv: str = "auto", state: str = "float32") -> ModelSpec:
    """``spec`` with its KV cache and linear-attention states stored as ``kv`` and ``state``.

    A KV cache in fp8 halves the bytes a decode or verify pass reads per context token and
    doubles the tokens a GPU holds; a bfloat16 state halves what a linear-attention layer reads
    and writes per request and pass (and what a verify keeps per token).

    >>> from simspec import catalog
    >>> m = with_cache_dtypes(catalog.get_model("qwen3-next-80b-a3b"), "fp8", "bfloat16")
    >>> m.kv_cache_bytes, m.state_value_bytes
    (1.0, 2.0)
    """
    if kv not in KV_CACHE_DTYPES:
        raise ValueError(f"unknown KV-cache dtype {kv!r}: one of {', '.join(KV_CACHE_DTYPES)}")
    if state not in SSM_STATE_DTYPES:
        raise ValueError(f"unknown state dtype {state!r}: one of {', '.join(SSM_STATE_DTYPES)}")
    kv_bytes, state_bytes = KV_CACHE_DTYPES[kv], SSM_STATE_DTYPES[state]
    if (spec.kv_cache_bytes, spec.state_value_bytes) == (kv_bytes, state_bytes):
        return spec
    return dataclasses.replace(spec, kv_cache_bytes=kv_bytes, state_value_bytes=state_bytes)


#: The flag of :class:`~simspec.physics.models.ModelSpec` that says whether a part's GEMM inputs
#: are quantised (the routed experts quantise inside their fused kernel: no flag).
_ACTIVATION_FLAGS = {
    "shared_weight_bytes": "shared_activation_quant",
    "attention_weight_bytes": "attention_activation_quant",
}


def with_precision(
    spec: ModelSpec,
    precision: str = "catalog",
    *,
    expert: str = "",
    shared: str = "",
    attention: str = "",
) -> ModelSpec:
    """``spec`` with the bytes per parameter of its routed, shared and attention weights set.

    Parameters
    ----------
    spec : ModelSpec
        The catalog model.
    precision : str
        ``"catalog"`` or a format of :data:`BYTES_PER_PARAM`, for all three parts.
    expert, shared, attention : str
        Per-part overrides ("" = ``precision``).

    Returns
    -------
    ModelSpec
        ``spec`` itself when every part is ``"catalog"`` (so today's numbers are reproduced
        exactly), else a copy with ``expert_weight_bytes``, ``shared_weight_bytes`` and
        ``attention_weight_bytes`` replaced where a format is named (and the shared and
        attention parts' activation-quantisation flags set: :data:`ACTIVATION_QUANT_FORMATS`).

    Examples
    --------
    >>> from simspec import catalog
    >>> m = with_precision(catalog.get_model("qwen3-30b-a3b"), "fp8")
    >>> m.expert_weight_bytes, m.attention_weight_bytes, m.weight_bytes
    (1.0, 1.0, 2.0)
    """
    changes: dict[str, Any] = {}
    for part, field in (
        (expert, "expert_weight_bytes"),
        (shared, "shared_weight_bytes"),
        (attention, "attention_weight_bytes"),
    ):
        name = part or precision
        if name not in PRECISIONS:
            raise ValueError(f"unknown precision {name!r}: one of {', '.join(PRECISIONS)}")
        if name != "catalog":
            changes[field] = BYTES_PER_PARAM[name]
            if field in _ACTIVATION_FLAGS:
                changes[_ACTIVATION_FLAGS[field]] = name in ACTIVATION_QUANT_FORMATS
    return dataclasses.replace(spec, **changes) if changes else spec


__all__ = [
    "ACTIVATION_QUANT_FORMATS",
    "BYTES_PER_PARAM",
    "KV_CACHE_DTYPES",
    "PART_PRECISIONS",
    "PRECISIONS",
    "SSM_STATE_DTYPES",
    "with_cache_dtypes",
    "with_precision",
]
