"""Model architectures and the per-pass bytes and FLOPs they imply.

A :class:`ModelSpec` is a transcription of a model's ``config.json`` (the catalog files under
``simspec/catalog/models`` cite theirs). :class:`ModelShape` derives from it what a cost model
needs, per kind of layer: weight bytes read once per forward pass, KV-cache bytes per context
token, FLOPs per token, and the size of one routed expert. Formulas (bf16 unless the catalog or
the scenario's ``[model] precision`` says otherwise, :mod:`simspec.physics.precision`):

- SwiGLU FFN of width i: 3·h·i parameters (gate, up, down); a routed expert is one such FFN.
- GQA attention: h·(n_q·d) + h·n_kv·(d + d_v) + (n_q·d_v)·h parameters; KV cache
  n_kv·(d + d_v) values per token (d_v = d unless the values are narrower, as MiMo-V2-Flash's
  128 against 192). MLA (DeepSeek-V3 / Kimi K2) caches the compressed latent (kv_lora + rope)
  per token; a decode scores it in the absorbed form (2·n_q·(kv_lora + rope + kv_lora) FLOPs
  per query-key pair), a prefill in the decompressed one (2·n_q·(nope + rope + d_v)).
- Gated DeltaNet (linear attention, Qwen3-Next) keeps a constant-size state per request.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from simspec.errors import FieldError
from simspec.physics.launches import PASS_KERNELS, layer_kernels, table_kernels
from simspec.schema import param

# Bounds of every number of a model spec: far beyond any published model, and small enough that
# a model built from them (a custom one in a scenario) stays finite and quick to derive.
#: Widest hidden size, FFN or expert width, head or latent dimension.
WIDTH = 1 << 20
#: Most layers (derive_shape visits each).
MAX_LAYERS = 4096
#: Most attention heads of either kind.
MAX_HEADS = 4096
#: Most routed (or shared) experts per layer.
MAX_EXPERTS = 65536
#: Largest vocabulary.
MAX_VOCAB = 1 << 24
#: Longest context, tokens.
MAX_CONTEXT = 1 << 30
#: Headline parameter counts, billions.
MAX_PARAMS_B = 1e6
#: Bytes per parameter: from a 0.5-bit format to float64.
MIN_BYTES = 1 / 16
MAX_BYTES = 8.0


@dataclass(frozen=True, slots=True, kw_only=True)
class FfnSpec:
    """Dense FFN (dense-prefix layers, interleaved dense layers, dense models)."""

    dense_intermediate_size: int = param(0, "SwiGLU width of dense FFN layers", ge=0, le=WIDTH)


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeSpec:
    """Routed and shared experts; all zeros for a dense model."""

    num_experts: int = param(0, "routed experts per MoE layer (N)", ge=0, le=MAX_EXPERTS)
    experts_per_token: int = param(0, "routed experts per token (top-k_e)", ge=0, le=MAX_EXPERTS)
    expert_intermediate_size: int = param(0, "SwiGLU width of one routed expert", ge=0, le=WIDTH)
    num_shared_experts: int = param(
        0, "always-active shared experts per MoE layer", ge=0, le=MAX_EXPERTS
    )
    shared_expert_intermediate_size: int = param(
        0, "SwiGLU width of one shared expert", ge=0, le=WIDTH
    )
    first_dense_layers: int = param(0, "leading layers with a dense FFN", ge=0, le=MAX_LAYERS)
    moe_layer_interval: int = param(
        1, "every n-th layer (after the prefix) is MoE", ge=1, le=MAX_LAYERS
    )

    def __post_init__(self) -> None:
        if self.num_experts and not self.experts_per_token:
            raise FieldError("experts_per_token", ">= 1 when num_experts > 0", 0)
        if self.experts_per_token > self.num_experts:
            raise FieldError(
                "experts_per_token",
                f"at most num_experts = {self.num_experts}",
                self.experts_per_token,
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionSpec:
    """Attention shape and the layer pattern (full / sliding-window / linear layers)."""

    kind: str = param("gqa", "gqa (MHA when kv heads == heads) or mla", choices=("gqa", "mla"))
    num_heads: int = param(1, "query heads", ge=1, le=MAX_HEADS)
    num_kv_heads: int = param(1, "key/value heads (GQA groups)", ge=1, le=MAX_HEADS)
    head_dim: int = param(128, "query/key head dimension", ge=1, le=WIDTH)
    q_lora_rank: int = param(0, "MLA query low-rank width (0 = full-rank queries)", ge=0, le=WIDTH)
    kv_lora_rank: int = param(0, "MLA compressed KV width", ge=0, le=WIDTH)
    qk_nope_head_dim: int = param(0, "MLA non-rotary query/key dimension", ge=0, le=WIDTH)
    qk_rope_head_dim: int = param(0, "MLA rotary query/key dimension", ge=0, le=WIDTH)
    v_head_dim: int = param(
        0,
        "value head dimension: MLA's; for GQA the values' and the output projection's width "
        "when it differs from head_dim (MiMo-V2-Flash: 192 / 128; 0 = head_dim)",
        ge=0,
        le=WIDTH,
    )
    full_attention_interval: int = param(
        1, "layer l has full attention iff (l+1) % n == 0", ge=1, le=MAX_LAYERS
    )
    other_layers: str = param(
        "full", "kind of the other layers", choices=("full", "sliding", "linear")
    )
    sliding_window: int = param(0, "window of sliding layers, tokens", ge=0, le=MAX_CONTEXT)
    sliding_num_kv_heads: int = param(
        0,
        "key/value heads of the sliding-window layers when they differ from the full layers' "
        "(MiMo-V2-Flash: 8 against 4; 0 = num_kv_heads)",
        ge=0,
        le=MAX_HEADS,
    )
    linear_num_key_heads: int = param(0, "Gated DeltaNet key heads", ge=0, le=MAX_HEADS)
    linear_num_value_heads: int = param(0, "Gated DeltaNet value heads", ge=0, le=MAX_HEADS)
    linear_key_head_dim: int = param(0, "Gated DeltaNet key head dim", ge=0, le=WIDTH)
    linear_value_head_dim: int = param(0, "Gated DeltaNet value head dim", ge=0, le=WIDTH)
    qk_norm: bool = param(
        False,
        "per-head RMSNorm of queries and keys before RoPE in the softmax-attention layers "
        "(Qwen3's q_norm / k_norm; config.json use_qk_norm)",
    )

    def __post_init__(self) -> None:
        if self.kind == "gqa" and self.num_heads % self.num_kv_heads:
            raise FieldError(
                "num_kv_heads",
                f"a divisor of num_heads = {self.num_heads} (each KV head serves a whole "
                "group of query heads)",
                self.num_kv_heads,
            )
        if self.kind == "mla" and self.kv_lora_rank <= 0:
            raise FieldError("kv_lora_rank", "> 0 for MLA attention", self.kv_lora_rank)
        if self.sliding_num_kv_heads and self.num_heads % self.sliding_num_kv_heads:
            raise FieldError(
                "sliding_num_kv_heads",
                f"a divisor of num_heads = {self.num_heads} (or 0: num_kv_heads)",
                self.sliding_num_kv_heads,
            )
        if self.other_layers == "sliding" and self.sliding_window <= 0:
            raise FieldError(
                "sliding_window", "> 0 when other_layers = 'sliding'", self.sliding_window
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A target (or dense draft) model, transcribed from its config.json."""

    name: str = param(help="catalog key")
    display_name: str = param("", "human-readable name")
    family: str = param("", "model family")
    source: str = param("", "where the numbers come from")
    notes: str = param("", "assumptions and approximations")
    num_layers: int = param(help="transformer layers", ge=1, le=MAX_LAYERS)
    hidden_size: int = param(help="hidden size h", ge=1, le=WIDTH)
    vocab_size: int = param(help="vocabulary size V", ge=1, le=MAX_VOCAB)
    tie_word_embeddings: bool = param(False, "LM head shares the embedding matrix")
    weight_bytes: float = param(
        2.0, "bytes per parameter of non-expert weights", ge=MIN_BYTES, le=MAX_BYTES
    )
    expert_weight_bytes: float = param(
        2.0, "bytes per parameter of routed experts", ge=MIN_BYTES, le=MAX_BYTES
    )
    shared_weight_bytes: float = param(
        0.0,
        "bytes per parameter of shared experts and dense FFNs (0 = weight_bytes)",
        ge=0,
        le=MAX_BYTES,
    )
    attention_weight_bytes: float = param(
        0.0, "bytes per parameter of attention projections (0 = weight_bytes)", ge=0, le=MAX_BYTES
    )
    kv_cache_bytes: float = param(
        0.0,
        "bytes per KV-cache value (0 = weight_bytes: the engines' default, auto, KV dtype; 1 "
        "for an fp8 KV cache)",
        ge=0,
        le=MAX_BYTES,
    )
    state_value_bytes: float = param(
        4.0,
        "bytes per value of a linear-attention layer's recurrent state (4: float32, SGLang's "
        "--mamba-ssm-dtype default; 2 for bfloat16)",
        ge=MIN_BYTES,
        le=MAX_BYTES,
    )
    attention_activation_quant: bool = param(
        False,
        "the attention projections' inputs are quantised at run time, one kernel per "
        "projection (a W8A8 or W4A4 checkpoint: simspec.physics.precision."
        "ACTIVATION_QUANT_FORMATS)",
    )
    shared_activation_quant: bool = param(
        False,
        "the shared experts' and dense FFNs' inputs are quantised at run time, one kernel per "
        "GEMM (as attention_activation_quant)",
    )
    total_params_b: float = param(0.0, "headline total parameters, billions", ge=0, le=MAX_PARAMS_B)
    active_params_b: float = param(
        0.0, "headline active parameters, billions", ge=0, le=MAX_PARAMS_B
    )
    max_context_tokens: int = param(0, "max position embeddings", ge=0, le=MAX_CONTEXT)
    mtp_layers: int = param(
        0,
        "multi-token-prediction (NextN) modules of the checkpoint, not in num_layers "
        "(config.json num_nextn_predict_layers)",
        ge=0,
        le=MAX_LAYERS,
    )
    ffn: FfnSpec = param(FfnSpec(), "dense FFN")
    moe: MoeSpec = param(MoeSpec(), "experts")
    attention: AttentionSpec = param(AttentionSpec(), "attention")

    def __post_init__(self) -> None:
        for key in ("shared_weight_bytes", "attention_weight_bytes"):
            value = getattr(self, key)
            if 0 < value < MIN_BYTES:
                raise FieldError(key, f"0 (= weight_bytes) or >= {MIN_BYTES:g}", value)

    @property
    def is_moe(self) -> bool:
        """True when the model has routed experts."""
        return self.moe.num_experts > 0

    @property
    def shape(self) -> ModelShape:
        """Derived bytes and FLOPs (cached: specs are frozen and hashable)."""
        return derive_shape(self)


@dataclass(frozen=True, slots=True)
class LayerGroup:
    """Layers that cost the same per pass: their count and per-layer quantities."""

    count: int
    attention_weight_bytes: float
    kv_bytes_per_token: float  # bytes read per context token per request (0 for linear)
    window_tokens: float  # context cap: inf for full attention, the window for sliding
    state_bytes: float  # constant per-request state read+written (linear attention)
    attention_flops_per_pair: float  # FLOPs per (query token, context token) pair
    prefill_flops_per_pair: float  # the same in a prefill (MLA: the decompressed form)
    ffn_weight_bytes: float  # dense FFN weights (0 for MoE layers)
    is_moe: bool
    kernels: int = 0  # kernels the layer launches (simspec.physics.launches), collectives aside
    table_kernels: int = 0  # of those, the kernels calibration tables time (launches.table_kernels)
    #: Of ``attention_weight_bytes``, those every tensor-parallel rank reads whole
    #: (:func:`replicated_attention_params`).
    replicated_attention_bytes: float = 0.0
    #: Key/value heads the KV cache is split by over tensor-parallel ranks: a GQA layer's KV
    #: heads, 1 for MLA (one latent shared by every query head), 0 for linear attention (its
    #: state splits with the value heads): :meth:`kv_copies`.
    kv_heads: int = 0

    def kv_copies(self, tensor: int) -> int:
        """Copies of each request's KV cache that ``tensor`` ranks hold and read between them:
        a rank keeps the KV heads its query heads attend to, so once the ranks outnumber the
        KV heads each head sits on tensor / heads ranks (vLLM and SGLang replicate KV heads
        beyond their count; MLA's latent cache is whole on every rank, which is why SGLang
        added data-parallel attention for DeepSeek models). 1 when the heads split evenly."""
        if not self.kv_heads:
            return 1
        return max(tensor // self.kv_heads, 1)

    def attention_bytes_read(self, tensor: int) -> float:
        """Attention weight bytes the ``tensor`` ranks of one layer read together: the split
        weights once, the replicated ones on every rank (a rank reads (A − R)/t + R)."""
        return self.attention_weight_bytes + (tensor - 1) * self.replicated_attention_bytes


def replicated_attention_params(spec: ModelSpec, layer_kind: str) -> float:
    """Attention weight parameters of one layer that engines do not split over tensor-parallel
    ranks: MLA's down-projections to the query and KV latents (and the shared RoPE key), which
    SGLang and vLLM hold whole on every rank (hidden -> q_lora_rank + kv_lora_rank +
    qk_rope_head_dim; ``kv_a_proj_with_mqa`` alone without a query latent): SGLang's
    ``fused_qkv_a_proj_with_mqa`` ``ReplicatedLinear`` (sglang/srt/models/deepseek_v2.py),
    vLLM's ``fused_qkv_a_proj`` ``MergedReplicatedLinear``
    (vllm/model_executor/models/deepseek_v2.py). 0 for other attention.

    >>> from simspec import catalog
    >>> replicated_attention_params(catalog.get_model("deepseek-v3"), "full")  # 7168 x 2112
    15138816.0
    """
    a, h = spec.attention, spec.hidden_size
    if a.kind != "mla" or layer_kind == "linear":
        return 0.0
    return float(h * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim))


def is_linear_attention(group: LayerGroup) -> bool:
    """Linear-attention layers (Gated DeltaNet) keep a state instead of a KV cache."""
    return group.kv_bytes_per_token == 0 and group.attention_flops_per_pair == 0


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What a cost model needs from an architecture (see the module docstring)."""

    groups: tuple[LayerGroup, ...]
    num_moe_layers: int
    num_experts: int
    experts_per_token: int
    expert_bytes: float
    expert_params: float
    shared_expert_bytes: float  # per MoE layer, all shared experts together
    router_bytes: float  # per MoE layer
    lm_head_bytes: float
    embedding_bytes: float
    weight_bytes_per_param: float  # embeddings, LM head, router (and the KV cache values)
    kv_bytes_per_token: float  # all layers, per request (full-attention layers only)
    total_weight_bytes: float
    attention_bytes_per_param: float  # attention projections
    ffn_bytes_per_param: float  # shared experts and dense FFN layers
    pass_kernels: int = 0  # kernels a pass launches outside its layers (physics.launches)
    attention_kind: str = "gqa"  # the full-attention layers' kind (gqa or mla; launches)
    vocab_size: int = 0  # rows of the LM head (what a sampler reads per token)

    @property
    def fp8_experts(self) -> bool:
        """Whether the routed experts are stored in FP8 (one byte per parameter, block scales
        aside: :data:`simspec.physics.precision.BYTES_PER_PARAM`)."""
        return self.expert_params > 0 and self.expert_bytes == self.expert_params


def attention_params(spec: ModelSpec, layer_kind: str) -> float:
    """Attention weight parameters of one layer of kind full/sliding/linear."""
    a, h = spec.attention, spec.hidden_size
    if layer_kind == "linear":
        nk, nv = a.linear_num_key_heads, a.linear_num_value_heads
        dk, dv = a.linear_key_head_dim, a.linear_value_head_dim
        # q, k, v, z (output gate) projections, per-head decay/beta, output projection.
        return h * (2 * nk * dk + 2 * nv * dv) + h * 2 * nv + nv * dv * h
    if a.kind == "mla":
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = (
            h * a.q_lora_rank + a.q_lora_rank * a.num_heads * qk
            if a.q_lora_rank
            else h * a.num_heads * qk
        )
        kv = h * (a.kv_lora_rank + a.qk_rope_head_dim)
        kv += a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
        return q + kv + a.num_heads * a.v_head_dim * h
    dv = a.v_head_dim or a.head_dim  # values and output projection (module docstring)
    q = a.num_heads * a.head_dim
    kv = kv_heads(a, layer_kind) * (a.head_dim + dv)
    return h * q + h * kv + a.num_heads * dv * h


def kv_heads(a: AttentionSpec, layer_kind: str) -> int:
    """Key/value heads of a softmax-attention layer of kind full or sliding."""
    if layer_kind == "sliding" and a.sliding_num_kv_heads:
        return a.sliding_num_kv_heads
    return a.num_kv_heads


def _kv_values(a: AttentionSpec, layer_kind: str, full: float) -> float:
    """KV-cache values per token of a layer: ``full`` (the full layers') unless a sliding
    layer has its own KV-head count (GQA only)."""
    if a.kind != "gqa" or kv_heads(a, layer_kind) == a.num_kv_heads:
        return full
    return kv_heads(a, layer_kind) * (a.head_dim + (a.v_head_dim or a.head_dim))


def _layer_kind(spec: ModelSpec, layer: int) -> str:
    a = spec.attention
    if (layer + 1) % a.full_attention_interval == 0:
        return "full"
    return a.other_layers


def _is_moe_layer(spec: ModelSpec, layer: int) -> bool:
    m = spec.moe
    return (
        m.num_experts > 0
        and layer >= m.first_dense_layers
        and (layer + 1) % m.moe_layer_interval == 0
    )


@functools.lru_cache(maxsize=128)
def derive_shape(spec: ModelSpec) -> ModelShape:
    """Group the layers of ``spec`` by cost and derive bytes/FLOPs (see module docstring)."""
    a, m, h = spec.attention, spec.moe, spec.hidden_size
    wb = spec.weight_bytes
    ab = spec.attention_weight_bytes or wb
    sb = spec.shared_weight_bytes or wb
    kvb = spec.kv_cache_bytes or wb
    counts: dict[tuple[str, bool], int] = {}
    for layer in range(spec.num_layers):
        key = (_layer_kind(spec, layer), _is_moe_layer(spec, layer))
        counts[key] = counts.get(key, 0) + 1
    if a.kind == "mla":
        kv_values = a.kv_lora_rank + a.qk_rope_head_dim
        # Absorbed MLA decode: scores over (kv_lora + rope) dims, values over kv_lora dims.
        pair_flops = 2.0 * a.num_heads * (a.kv_lora_rank + a.qk_rope_head_dim + a.kv_lora_rank)
        # A prefill decompresses the latents (kv_b_proj) and runs multi-head attention over
        # (nope + rope) query/key and v_head value dims: SGLang's AttnForwardMethod.MHA for
        # extends without a long prefix, vLLM's MLA prefill path.
        prefill_pair_flops = (
            2.0 * a.num_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)
        )
    else:
        dv = a.v_head_dim or a.head_dim
        kv_values = a.num_kv_heads * (a.head_dim + dv)  # a sliding layer's own below
        pair_flops = 2.0 * a.num_heads * (a.head_dim + dv)  # QK^T and PV, 2 FLOPs per MAC
        prefill_pair_flops = pair_flops
    dense_ffn_bytes = 3.0 * h * spec.ffn.dense_intermediate_size * sb
    groups = []
    for (kind, moe), count in sorted(counts.items()):
        linear = kind == "linear"
        state = 0.0
        if linear:
            state = (
                spec.state_value_bytes
                * a.linear_num_value_heads
                * a.linear_key_head_dim
                * a.linear_value_head_dim
            )
        groups.append(
            LayerGroup(
                count=count,
                attention_weight_bytes=attention_params(spec, kind) * ab,
                kv_bytes_per_token=0.0 if linear else _kv_values(a, kind, kv_values) * kvb,
                window_tokens=float(a.sliding_window) if kind == "sliding" else float("inf"),
                state_bytes=2.0 * state,  # the state, read and written once per pass
                attention_flops_per_pair=0.0 if linear else pair_flops,
                prefill_flops_per_pair=0.0 if linear else prefill_pair_flops,
                ffn_weight_bytes=0.0 if moe else dense_ffn_bytes,
                is_moe=moe,
                kernels=layer_kernels(
                    a.kind if kind == "full" else kind,
                    moe,
                    m.num_shared_experts > 0,
                    a.qk_norm,
                    quantised_attention=spec.attention_activation_quant,
                    quantised_ffn=spec.shared_activation_quant,
                ),
                table_kernels=table_kernels(
                    a.kind if kind == "full" else kind, moe, m.num_shared_experts > 0
                ),
                replicated_attention_bytes=replicated_attention_params(spec, kind) * ab,
                kv_heads=0 if linear else (1 if a.kind == "mla" else kv_heads(a, kind)),
            )
        )
    num_moe = sum(g.count for g in groups if g.is_moe)
    expert_params = 3.0 * h * m.expert_intermediate_size
    expert_bytes = expert_params * spec.expert_weight_bytes
    shared = m.num_shared_experts * 3.0 * h * m.shared_expert_intermediate_size * sb
    router = float(h * m.num_experts) * wb
    lm_head = float(spec.vocab_size * h) * wb
    embedding = float(spec.vocab_size * h) * wb
    kv_full = sum(g.count * g.kv_bytes_per_token for g in groups if g.window_tokens == float("inf"))
    total = embedding + (0.0 if spec.tie_word_embeddings else lm_head)
    for g in groups:
        total += g.count * (g.attention_weight_bytes + g.ffn_weight_bytes)
        if g.is_moe:
            total += g.count * (m.num_experts * expert_bytes + shared + router)
    return ModelShape(
        groups=tuple(groups),
        num_moe_layers=num_moe,
        num_experts=m.num_experts,
        experts_per_token=m.experts_per_token,
        expert_bytes=expert_bytes,
        expert_params=expert_params,
        shared_expert_bytes=shared,
        router_bytes=router,
        lm_head_bytes=lm_head,
        embedding_bytes=embedding,
        weight_bytes_per_param=wb,
        kv_bytes_per_token=kv_full,
        total_weight_bytes=total,
        attention_bytes_per_param=ab,
        ffn_bytes_per_param=sb,
        pass_kernels=PASS_KERNELS,
        attention_kind=a.kind,
        vocab_size=spec.vocab_size,
    )


def kv_bytes_for_context(shape: ModelShape, context_tokens: float, tensor: int = 1) -> float:
    """KV-cache (and linear-attention state) bytes one request holds at ``context_tokens``,
    over ``tensor`` ranks together (each layer's KV cache as many times as the ranks hold it:
    :meth:`LayerGroup.kv_copies`)."""
    total = 0.0
    for g in shape.groups:
        kv = min(context_tokens, g.window_tokens) * g.kv_bytes_per_token * g.kv_copies(tensor)
        total += g.count * (kv + g.state_bytes / 2)
    return total


__all__ = [
    "AttentionSpec",
    "FfnSpec",
    "LayerGroup",
    "ModelShape",
    "ModelSpec",
    "MoeSpec",
    "attention_params",
    "derive_shape",
    "kv_bytes_for_context",
    "kv_heads",
]
