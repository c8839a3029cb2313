"""Kernels a forward pass launches, counted from the architecture.

Every kernel costs a fixed floor on top of its bytes and FLOPs (the GPU's
``kernel_floor_graph_s`` or ``kernel_floor_eager_s``: the launch gap and the shortest run), so a
decode pass at small batch is dominated by how many kernels its layers launch, not by their
bytes. The counts below are those of a decode (or verify) pass in the fused form that SGLang,
vLLM and TensorRT-LLM share (fused residual-add + RMSNorm, fused QKV and gate/up GEMMs, one
attention kernel); collectives are priced separately (:mod:`simspec.costs.parallel`) and the
routed experts' own kernels (align/sort, two grouped GEMMs, activation, top-k sum) are inside
the fitted MoE kernel's fixed time (``moe_launch_s``, :mod:`simspec.costs.moe_kernel`), so
neither is counted here.

Per layer:

- **GQA / sliding attention** (6): add + RMSNorm, QKV GEMM, RoPE, KV-cache write, attention,
  output GEMM; a model with per-head query/key normalisation (``qk_norm``: Qwen3's ``q_norm``
  and ``k_norm``, GLM-4.5's ``use_qk_norm``) adds its two RMSNorms (2), one over the query
  heads and one over the key heads between the QKV GEMM and RoPE, as SGLang's and vLLM's
  Qwen3 attention run them (``q_norm(q_by_head)``, ``k_norm(k_by_head)``: two kernels;
  TensorRT-LLM's fused qk-norm + RoPE kernel is one engine's exception, not counted);
- **MLA** (11): add + RMSNorm, fused q_a/kv_a GEMM, q_a norm, kv_a norm, q_b GEMM, absorbed
  key bmm (w_kc), RoPE, KV-cache write, attention, value bmm (w_vc), output GEMM;
- **linear attention** (Gated DeltaNet, 8): add + RMSNorm, two input projections, causal conv
  update, gate computation, recurrent state update, gated RMSNorm, output GEMM;
- **MoE FFN** (3 + 4 with shared experts): add + RMSNorm, router GEMM, top-k softmax; shared
  experts add gate/up GEMM, activation, down GEMM and the add into the routed output;
- **dense FFN** (4): add + RMSNorm, gate/up GEMM, activation, down GEMM.

Per pass (5): embedding gather, final RMSNorm, LM head GEMM, logits processing, sampling.

A checkpoint that quantises activations as well as weights (fp8 W8A8 with dynamic activation
scales, as DeepSeek-V3's, Qwen3's and GLM-4.5's FP8 releases are; NVFP4 W4A4) runs a
quantisation kernel on the input of every quantised GEMM before the GEMM itself: TensorRT-LLM's
FP8 block-scale linear calls ``fp8_quantize_1x128`` and then ``fp8_block_scaling_gemm``
(``tensorrt_llm/_torch/modules/linear.py``, ``FP8BlockScalesLinearMethod``), SGLang's
``sglang_per_token_group_quant_fp8`` and then the block GEMM
(``sglang/srt/layers/quantization/fp8_utils.py``), vLLM's ``QuantFP8`` and then the GEMM
(``vllm/model_executor/layers/quantization/utils/fp8_utils.py``); TensorRT-LLM's NVFP4 linear
calls ``fp4_quantize`` before ``nvfp4_gemm``. Counted per quantised GEMM input
(:data:`ACTIVATION_QUANT_KERNELS`): a GQA or sliding block's QKV and output GEMMs (2), MLA's
fused q_a/kv_a, q_b and output GEMMs (3), linear attention's two input projections and output
GEMM (3), and a shared expert's or dense FFN's gate/up and down GEMMs (2). The router and the LM
head stay in bf16; the routed experts quantise inside their fused kernel (``moe_launch_s``).
An engine that fuses the quantisation into the preceding norm or activation (vLLM's
torch.compile fusion passes, TensorRT-LLM's fused RMSNorm + NVFP4 quantise) launches fewer:
these are the unfused counts, an upper bound by a few kernels per layer.

When a MoE layer sends tokens to experts outside its attention group (expert parallelism
over more ranks than the tensor-parallel group, :mod:`simspec.costs.parallel`) it adds the
dispatch's own kernels around its two all-to-alls (4): counting tokens per rank, permuting
them into per-rank order, unpermuting the returned rows and the weighted combine. Expert
parallelism within the group adds none: each GPU runs its own experts on the tokens it holds.

An EAGLE-3 draft step (one head layer) launches a GQA layer and a dense FFN (10), the fusion
of the target's hidden states and the embedding (2), its final norm, LM head and top-k over the
draft vocabulary (3) and the draft tree's bookkeeping (gather the chosen tokens, scores and
positions; 3): 18 for a one-layer head. A verify pass of a speculative iteration adds its
bookkeeping (:data:`VERIFY_KERNELS`): building the tree's positions and mask, the accept
kernel (greedy tree verify or rejection sampling), gathering the accepted tokens' indices, KV
slots and hidden states, and writing the output tokens.
"""

from __future__ import annotations

#: Kernels of one attention block, by kind (module docstring).
ATTENTION_KERNELS = {"gqa": 6, "sliding": 6, "mla": 11, "linear": 8}
#: Kernels per-head query/key normalisation adds to a softmax-attention block (the query
#: heads' RMSNorm and the key heads').
QK_NORM_KERNELS = 2
#: Kernels of a MoE FFN block without shared experts, and what shared experts add.
MOE_KERNELS, SHARED_EXPERT_KERNELS = 3, 4
#: Kernels of a dense FFN block.
DENSE_FFN_KERNELS = 4
#: Activation-quantisation kernels of an attention block whose projections quantise their
#: inputs at run time, by kind, and of a shared-expert or dense FFN block whose GEMMs do
#: (module docstring).
ACTIVATION_QUANT_KERNELS = {"gqa": 2, "sliding": 2, "mla": 3, "linear": 3}
FFN_ACTIVATION_QUANT_KERNELS = 2
#: Kernels an expert-parallel MoE layer adds around its dispatch and combine.
EXPERT_PARALLEL_KERNELS = 4
#: Kernels of a pass outside its layers: embedding, final norm, LM head, logits, sampling.
PASS_KERNELS = 5
#: Kernels of a draft head's step outside its layers: fusion + embedding (2), final norm, LM
#: head and top-k (3), tree bookkeeping (3).
DRAFT_STEP_KERNELS = 8
#: Kernels of one speculative iteration's verify bookkeeping (module docstring).
VERIFY_KERNELS = 6


def layer_kernels(
    attention: str,
    is_moe: bool,
    shared_experts: bool,
    qk_norm: bool = False,
    *,
    quantised_attention: bool = False,
    quantised_ffn: bool = False,
) -> int:
    """Kernels one layer launches: its attention block (``gqa``, ``sliding``, ``mla`` or
    ``linear``; with ``qk_norm`` a softmax-attention block adds :data:`QK_NORM_KERNELS`) and
    its FFN block (MoE, with or without shared experts, or dense); ``quantised_attention`` and
    ``quantised_ffn`` add the activation-quantisation kernels of a W8A8 / W4A4 checkpoint's
    attention projections and shared-expert or dense FFN GEMMs
    (:data:`ACTIVATION_QUANT_KERNELS`).

    >>> layer_kernels("gqa", True, False, qk_norm=True)  # Qwen3-30B-A3B
    11
    >>> layer_kernels("mla", True, True)  # DeepSeek-V3's MoE layers
    18
    >>> layer_kernels("mla", True, True, quantised_attention=True, quantised_ffn=True)  # in fp8
    23
    """
    ffn = MOE_KERNELS + (SHARED_EXPERT_KERNELS if shared_experts else 0) if is_moe else 0
    norms = QK_NORM_KERNELS if qk_norm and attention in ("gqa", "sliding") else 0
    quant = ACTIVATION_QUANT_KERNELS[attention] if quantised_attention else 0
    if quantised_ffn and (shared_experts or not is_moe):
        quant += FFN_ACTIVATION_QUANT_KERNELS
    return ATTENTION_KERNELS[attention] + norms + (ffn if is_moe else DENSE_FFN_KERNELS) + quant


#: Of those, the kernels a calibration profile's tables time (their floors are in the measured
#: times): attention projections and the attention kernel, by kind; the MoE layer's router
#: GEMM and top-k; a shared expert's or dense FFN's two GEMMs; the pass's LM head.
TABLE_ATTENTION_KERNELS = {"gqa": 3, "sliding": 3, "mla": 6, "linear": 3}
TABLE_MOE_KERNELS, TABLE_SHARED_EXPERT_KERNELS, TABLE_DENSE_FFN_KERNELS = 2, 2, 2
TABLE_PASS_KERNELS = 1


def table_kernels(attention: str, is_moe: bool, shared_experts: bool) -> int:
    """Kernels of one layer that the calibration tables time (the rest are norms, residual
    adds, RoPE, KV-cache writes, activations, whose floors a calibrated pass adds).

    >>> layer_kernels("gqa", True, False) - table_kernels("gqa", True, False)  # GQA + MoE
    4
    """
    if is_moe:
        ffn = TABLE_MOE_KERNELS + (TABLE_SHARED_EXPERT_KERNELS if shared_experts else 0)
    else:
        ffn = TABLE_DENSE_FFN_KERNELS
    return TABLE_ATTENTION_KERNELS[attention] + ffn


def table_cell_kernels(attention: str) -> dict[str, int]:
    """Kernels one cell of each calibration table runs (the cell's measured time holds their
    floors): the MoE layer's router GEMM and top-k, the attention kernel, and each dense-GEMM
    table's GEMMs (the attention projections are the attention block's table kernels but the
    attention kernel itself).

    >>> table_cell_kernels("gqa")["attention_projections"], table_cell_kernels("mla")["moe"]
    (2, 2)
    """
    return {
        "moe": TABLE_MOE_KERNELS,
        "attention": 1,
        "attention_projections": TABLE_ATTENTION_KERNELS.get(attention, 3) - 1,
        "linear_attention_projections": TABLE_ATTENTION_KERNELS["linear"],
        "shared_expert": TABLE_SHARED_EXPERT_KERNELS,
        "dense_ffn": TABLE_DENSE_FFN_KERNELS,
        "lm_head": TABLE_PASS_KERNELS,
    }


def draft_step_kernels(head_layers: int) -> int:
    """Kernels of one EAGLE-style draft step of a head with ``head_layers`` decoder layers.

    >>> draft_step_kernels(1)
    18
    """
    per_layer = ATTENTION_KERNELS["gqa"] + DENSE_FFN_KERNELS
    return head_layers * per_layer + DRAFT_STEP_KERNELS
