"""A target's own multi-token-prediction (MTP, "NextN") modules as a drafter.

DeepSeek-V3 (arXiv 2412.19437, §2.2) appends D sequential MTP modules to the model; GLM-4.5/4.7
and Qwen3-Next ship the same design. Module k takes the hidden state of depth k − 1 and the
embedding of the next token, RMS-normalises both, projects their concatenation 2h -> h
(``eh_proj``), and runs one full transformer block of the target (its attention kind and, for a
MoE target, an MoE FFN with the target's routed and shared experts); the embedding and the
output head (full vocabulary) are the target's own, shared. So one module costs, per pass, what
one MoE layer of the target costs, plus the projection and the full-vocabulary LM head, and it
keeps its own KV cache (one layer of the target's kind). MiMo-V2-Flash's modules are lighter:
a sliding-window attention layer and a dense FFN of the target's dense width (0.33B parameters
per module, its model card), which the drafter states (``mtp_attention = "sliding"``,
``mtp_ffn = "dense"``).

Serving engines chain the modules as a drafter: SGLang's ``NEXTN`` (EAGLE machinery with the
MTP weights) and vLLM's ``deepseek_mtp`` / ``qwen3_next_mtp`` run one module per draft step,
recursively (step j feeds step j − 1's hidden state and token), and reuse the checkpoint's last
module when the steps outnumber the modules (vLLM: module ``j mod D``; every released
checkpoint has D = 1). A draft step is therefore one module's pass, whatever the depth; the
drafter's ``max_draft_tokens`` caps the chain (``--speculative-num-steps`` /
``num_speculative_tokens``).

:func:`mtp_module` builds that one-module pass as a one-layer :class:`ModelSpec` (it shares the
target's precision), priced by the same pass model as the target
(:mod:`simspec.costs.passes`); :func:`projection_bytes` is the part a one-layer model does not
have, and :func:`mtp_weight_bytes` what the modules add to GPU memory.
"""

from __future__ import annotations

import dataclasses

from simspec.physics.drafters import DrafterSpec
from simspec.physics.models import ModelSpec

#: Kernels of an MTP draft step outside its transformer block and the pass's own head and tail
#: (:data:`simspec.physics.launches.PASS_KERNELS`): the two RMSNorms of the hidden state and
#: the embedding, the concatenating 2h -> h projection (3), and the draft tree's bookkeeping
#: (gather the chosen tokens, scores and positions; 3), as an EAGLE step's.
MTP_STEP_KERNELS = 6


def mtp_module(target: ModelSpec, attention: str = "full", ffn: str = "moe") -> ModelSpec:
    """One MTP module of ``target`` as a one-layer model (module docstring).

    The layer is a full-attention layer of the target's attention kind (``attention =
    "sliding"``: its sliding-window layer) and, for a MoE target, a MoE layer with its routed
    and shared experts (``ffn = "dense"``: a dense FFN of the target's dense width); embedding
    and LM head are the target's (the full vocabulary).
    """
    moe = target.moe
    if target.is_moe:
        dense = 1 if ffn == "dense" else 0  # the module's one layer, dense or MoE
        moe = dataclasses.replace(moe, first_dense_layers=dense, moe_layer_interval=1)
    sliding = attention == "sliding"  # layer 0 is not full when the interval exceeds 1
    attention_spec = dataclasses.replace(
        target.attention,
        full_attention_interval=2 if sliding else 1,
        other_layers="sliding" if sliding else "full",
    )
    return dataclasses.replace(
        target,
        name=f"{target.name}-mtp",
        display_name=f"{target.display_name or target.name} MTP module",
        num_layers=1,
        mtp_layers=0,
        moe=moe,
        attention=attention_spec,
        total_params_b=0.0,
        active_params_b=0.0,
    )


def projection_bytes(target: ModelSpec) -> float:
    """Bytes of one module's 2h -> h projection of [norm(hidden); norm(embedding)]."""
    h = target.hidden_size
    return 2.0 * h * h * (target.attention_weight_bytes or target.weight_bytes)


def drafter_weight_bytes(
    target: ModelSpec, drafter: DrafterSpec, draft_model: ModelSpec | None
) -> float:
    """Weights a drafter adds to GPU memory: a dense draft model's, an MTP drafter's modules
    (:func:`mtp_weight_bytes`), or an EAGLE-3 head's."""
    if drafter.kind == "mtp":
        module = mtp_module(target, drafter.mtp_attention, drafter.mtp_ffn)
        return mtp_weight_bytes(target, drafter.num_layers, module)
    if draft_model is not None:
        return draft_model.shape.total_weight_bytes
    return drafter.head_weight_bytes()


def mtp_weight_bytes(target: ModelSpec, modules: int, module: ModelSpec | None = None) -> float:
    """What ``modules`` MTP modules add to GPU memory: each its transformer block and
    projection (the embedding and LM head are the target's, already held); ``module`` is
    one of them (default: :func:`mtp_module` of the target)."""
    shape = (module or mtp_module(target)).shape
    shared = shape.embedding_bytes + (0.0 if target.tie_word_embeddings else shape.lm_head_bytes)
    return modules * (shape.total_weight_bytes - shared + projection_bytes(target))


__all__ = [
    "MTP_STEP_KERNELS",
    "drafter_weight_bytes",
    "mtp_module",
    "mtp_weight_bytes",
    "projection_bytes",
]
