"""Draft models: EAGLE-3-style heads, small dense draft models, a target's MTP modules, and
the weightless n-gram (prompt-lookup) drafter.

An EAGLE-3 head (Li et al., arXiv 2503.01840) is one decoder layer fed by a fully connected
fusion of three target hidden states (3·h -> h), with its own LM head over a reduced draft
vocabulary; its attention projections read the concatenation of the token embedding and the
fused feature (2·h inputs). A dense drafter is a small model from the models catalog. An MTP
drafter is the target's own multi-token-prediction modules (:mod:`simspec.physics.mtp`): its
shapes are the target's, so its entry states only how many modules it has (``num_layers``) and
how deep engines chain them (``max_draft_tokens``). Either way one draft step reads the
drafter's weights once for all requests that are still drafting.

An n-gram drafter (``kind = "ngram"``) has no weights, no KV cache and no GPU kernels: the
engine proposes the up to k tokens that followed an earlier occurrence of the request's
longest matching suffix (n tokens, ``prompt_lookup_min`` ≤ n ≤ ``prompt_lookup_max``, prompt
and output so far), a search run once per iteration for every running request, whatever k
(vLLM ``method = "ngram"``: a KMP scan of each request's whole context on the CPU,
numba-parallel over requests,
https://github.com/vllm-project/vllm/blob/main/vllm/v1/spec_decode/ngram_proposer.py;
SGLang's ``NGRAM``: a C++ trie on the host; TensorRT-LLM's NGram: now a GPU suffix-automaton
kernel). It serves every target (:meth:`DrafterSpec.serves`) and its lookup costs
:meth:`DrafterSpec.lookup_s`.

An entry may state the acceptance its drafter was measured at
(``default_acceptance_length``, with ``default_acceptance_setting`` and
``default_acceptance_source``): a scenario that sets no acceptance rate gets the chain
acceptance rate that reproduces it (:mod:`simspec.text.engine_acceptance`). A second length
measured deeper (``deep_acceptance_length``, ``deep_acceptance_setting``,
``deep_acceptance_source``) makes that rate decay with depth, as a module chained past its
training depth does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import FieldError
from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class DrafterSpec:
    """A draft head or draft model."""

    name: str = param(help="catalog key")
    display_name: str = param("", "human-readable name")
    kind: str = param(
        "eagle3",
        "eagle3 head, dense draft model, mtp (the target's own MTP modules), or ngram (prompt "
        "lookup on the host: no weights)",
        choices=("eagle3", "dense", "mtp", "ngram"),
    )
    targets: tuple[str, ...] = param(
        (), "target models it drafts for (kind = ngram: every target, none listed)"
    )
    source: str = param("", "where the numbers come from")
    notes: str = param("", "assumptions")
    max_draft_tokens: int = param(8, "longest chain the drafter proposes", ge=1, le=64)
    model: str = param("", "models-catalog name (kind = dense)")
    num_layers: int = param(0, "decoder layers of the head (kind = mtp: MTP modules)", ge=0)
    mtp_attention: str = param(
        "full",
        "kind = mtp: the attention of a module's block, the target's full-attention layer "
        "(full) or its sliding-window layer (sliding, MiMo-V2-Flash)",
        choices=("full", "sliding"),
    )
    mtp_ffn: str = param(
        "moe",
        "kind = mtp: the FFN of a module's block, the target's MoE layer (moe) or a dense FFN "
        "of the target's dense width (dense, MiMo-V2-Flash)",
        choices=("moe", "dense"),
    )
    hidden_size: int = param(0, "hidden size of the head", ge=0)
    intermediate_size: int = param(0, "MLP width of the head", ge=0)
    num_heads: int = param(0, "query heads", ge=0)
    num_kv_heads: int = param(0, "key/value heads", ge=0)
    head_dim: int = param(0, "head dimension", ge=0)
    draft_vocab_size: int = param(0, "draft vocabulary of the head's LM head", ge=0)
    fused_hidden_states: int = param(3, "target hidden states fused by the input FC", ge=0)
    weight_bytes: float = param(2.0, "bytes per parameter", gt=0)
    default_acceptance_length: float = param(
        0.0,
        "measured mean acceptance length (bonus token included) used when a scenario sets no "
        "acceptance rate (0 = none)",
        ge=0,
        le=65,
    )
    default_acceptance_setting: tuple[int, ...] = param(
        (), "(steps, topk, num_draft_tokens) it was measured at"
    )
    default_acceptance_source: str = param("", "where that acceptance length was measured")
    deep_acceptance_length: float = param(
        0.0,
        "a second measured mean acceptance length at a deeper setting (0 = none): with the "
        "first, the per-step acceptance decays geometrically with depth",
        ge=0,
        le=65,
    )
    deep_acceptance_setting: tuple[int, ...] = param(
        (), "(steps, topk, num_draft_tokens) it was measured at, more steps than the first"
    )
    deep_acceptance_source: str = param("", "where that deeper acceptance length was measured")
    lookup_s_per_token: float = param(
        0.0,
        "kind = ngram: host time of the lookup per context token scanned, one thread, s",
        ge=0,
        lt=1e-3,
    )
    lookup_threads: int = param(
        1, "kind = ngram: host threads the lookup splits the requests over", ge=1, le=1024
    )
    prompt_lookup_min: int = param(
        0, "kind = ngram: shortest n-gram matched (vLLM prompt_lookup_min; 0 = not stated)", ge=0
    )
    prompt_lookup_max: int = param(
        0, "kind = ngram: longest n-gram matched (vLLM prompt_lookup_max; 0 = not stated)", ge=0
    )

    def __post_init__(self) -> None:
        if self.kind == "dense" and not self.model:
            raise FieldError("model", "a models-catalog name for a dense drafter", self.model)
        if self.kind == "eagle3" and self.hidden_size <= 0:
            raise FieldError("hidden_size", "> 0 for an eagle3 head", self.hidden_size)
        if self.kind == "mtp" and self.num_layers <= 0:
            raise FieldError("num_layers", ">= 1 MTP module for an mtp drafter", self.num_layers)
        if self.kind == "ngram" and (self.model or self.num_layers or self.hidden_size):
            raise FieldError(
                "kind",
                "a drafter with no model, layers or hidden size for kind = ngram (no weights)",
                self.kind,
            )
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise FieldError(
                "prompt_lookup_min",
                f"at most prompt_lookup_max = {self.prompt_lookup_max}",
                self.prompt_lookup_min,
            )
        if self.default_acceptance_length and len(self.default_acceptance_setting) != 3:
            raise FieldError(
                "default_acceptance_setting",
                "(steps, topk, num_draft_tokens) of default_acceptance_length",
                list(self.default_acceptance_setting),
            )
        if self.deep_acceptance_length:
            if not self.default_acceptance_length:
                raise FieldError(
                    "deep_acceptance_length",
                    "a default_acceptance_length to go with it (0 without one)",
                    self.deep_acceptance_length,
                )
            setting = self.deep_acceptance_setting
            if len(setting) != 3 or setting[0] <= self.default_acceptance_setting[0]:
                raise FieldError(
                    "deep_acceptance_setting",
                    "(steps, topk, num_draft_tokens) with more steps than "
                    "default_acceptance_setting",
                    list(setting),
                )

    def serves(self, target: str) -> bool:
        """Whether this drafter drafts for ``target``: one it lists, any for an n-gram drafter
        (it reads only the token ids)."""
        return self.kind == "ngram" or target in self.targets

    def lookup_s(self, context_tokens: np.ndarray) -> float | np.ndarray:
        """Host time of one iteration's n-gram lookup over requests at ``context_tokens``
        (B,), or N iterations at once ((N, B): one time per row); 0 for any other kind.

        vLLM's proposer scans each request's whole context once (KMP over the reversed
        tokens), the requests split over up to ``lookup_threads`` numba threads, so
        t = ``lookup_s_per_token`` · Σ_b c_b / min(threads, B).
        """
        ctx = np.asarray(context_tokens, dtype=float)
        requests = ctx.shape[-1]
        if self.kind != "ngram" or requests == 0:
            return 0.0 if ctx.ndim < 2 else np.zeros(ctx.shape[:-1])
        scanned = np.sum(ctx, axis=-1)
        time = self.lookup_s_per_token * scanned / min(self.lookup_threads, requests)
        return float(time) if np.ndim(time) == 0 else time

    def head_weight_bytes(self) -> float:
        """Weight bytes one step of an EAGLE-3 head reads (0 for a dense drafter)."""
        if self.kind != "eagle3":
            return 0.0
        h = self.hidden_size
        fusion = self.fused_hidden_states * h * h
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        attention = 2 * h * q + 2 * (2 * h * kv) + q * h
        mlp = 3 * h * self.intermediate_size
        lm_head = self.draft_vocab_size * h
        return float(self.num_layers * (attention + mlp) + fusion + lm_head) * self.weight_bytes

    def head_kv_bytes_per_token(self, value_bytes: float = 0.0) -> float:
        """KV-cache bytes per context token of the head's own layers, ``value_bytes`` per value
        (0: the head's ``weight_bytes``; an engine's KV format applies to the head's cache as
        to the target's, :attr:`~simspec.physics.models.ModelSpec.kv_cache_bytes`)."""
        values = self.num_layers * 2 * self.num_kv_heads * self.head_dim
        return float(values) * (value_bytes or self.weight_bytes)
