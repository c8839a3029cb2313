"""What a calibration run measures: shapes, grids and repetitions (pure, no torch).

The benchmarks use the model's real shapes (``shapes = "full"``) on a GPU. On a CPU, where a
run only has to prove the pipeline end to end in a few seconds, :func:`tiny_model` scales the
architecture down (hidden size 64, at most 32 experts, 4 layers, ...) while keeping its
structure: the same layer pattern, GQA/MLA/linear attention kinds, shared experts and top-k
ratio. Either way the benchmarks and the cost model derive every byte count from the same
:class:`~simspec.physics.models.ModelSpec`, so the fit divides measured times by the bytes that were
actually read.

Weights are benchmarked in bf16, so :func:`bench_model` sets both weight widths to 2 bytes;
a model the catalog stores in another width (gpt-oss's MXFP4 experts) is timed as bf16.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from simspec.physics.experts import independent_union
from simspec.physics.models import LayerGroup, ModelSpec, is_linear_attention

BF16_BYTES = 2.0


@dataclass(frozen=True, slots=True)
class StackPlanPoint:
    """Where the plan times the layer stack: ``use`` is "fit" (overhead) or "validation".

    The measurement itself is a :class:`simspec.profile.StackMeasurement`.
    """

    batch: int
    tokens_per_request: int
    use: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationPlan:
    """Grids and repetitions of one calibration run."""

    moe_tokens: tuple[int, ...]
    moe_unique_experts: tuple[int, ...]
    gemm_tokens: tuple[int, ...]
    attention_batch: tuple[int, ...]
    attention_kv_tokens: tuple[int, ...]
    attention_query_tokens: tuple[int, ...]
    stack_points: tuple[StackPlanPoint, ...]
    stack_context_tokens: int
    warmup: int
    repetitions: int
    ceiling_copy_bytes: int
    ceiling_matmul_size: int


def bench_model(spec: ModelSpec, shapes: str) -> ModelSpec:
    """The model whose shapes are benchmarked: ``spec`` in bf16, scaled down when ``tiny``.

    The benchmarked layer stack (:mod:`simspec.calibrate.stack`) runs no per-head query/key
    norms, so the model it stands for has none (``qk_norm`` off): its passes count the kernels
    the stack launches.
    """
    attention = dataclasses.replace(spec.attention, qk_norm=False)
    spec = dataclasses.replace(
        spec, weight_bytes=BF16_BYTES, expert_weight_bytes=BF16_BYTES, attention=attention
    )
    return tiny_model(spec) if shapes == "tiny" else spec


def tiny_model(spec: ModelSpec) -> ModelSpec:
    """``spec`` scaled down to CPU-test size, keeping its structure (module docstring).

    >>> from simspec import catalog
    >>> t = tiny_model(catalog.get_model("qwen3-30b-a3b"))
    >>> (t.hidden_size, t.moe.num_experts, t.moe.experts_per_token, t.num_layers)
    (64, 32, 8, 4)
    """
    m, a, f = spec.moe, spec.attention, spec.ffn
    experts = min(m.num_experts, 32)
    per_token = min(m.experts_per_token, max(1, experts // 4)) if experts else 0
    moe = dataclasses.replace(
        m,
        num_experts=experts,
        experts_per_token=per_token,
        expert_intermediate_size=32 if experts else 0,
        shared_expert_intermediate_size=32 if m.num_shared_experts else 0,
        first_dense_layers=min(m.first_dense_layers, 1),
        moe_layer_interval=min(m.moe_layer_interval, 2),
    )
    kv_heads = 4 if a.num_kv_heads >= a.num_heads else min(a.num_kv_heads, 2)
    attention = dataclasses.replace(
        a,
        num_heads=4,
        num_kv_heads=kv_heads,
        head_dim=16,
        q_lora_rank=32 if a.q_lora_rank else 0,
        kv_lora_rank=32 if a.kind == "mla" else 0,
        qk_nope_head_dim=16 if a.kind == "mla" else 0,
        qk_rope_head_dim=8 if a.kind == "mla" else 0,
        v_head_dim=16 if a.kind == "mla" else 0,
        full_attention_interval=min(a.full_attention_interval, 4),
        sliding_window=min(a.sliding_window, 64),
        sliding_num_kv_heads=min(a.sliding_num_kv_heads, 4),
        linear_num_key_heads=2 if a.linear_num_key_heads else 0,
        linear_num_value_heads=4 if a.linear_num_value_heads else 0,
        linear_key_head_dim=16 if a.linear_key_head_dim else 0,
        linear_value_head_dim=16 if a.linear_value_head_dim else 0,
    )
    return dataclasses.replace(
        spec,
        name=f"{spec.name}@tiny",
        num_layers=min(spec.num_layers, 4),
        hidden_size=64,
        vocab_size=512,
        max_context_tokens=min(spec.max_context_tokens or 4096, 4096),
        ffn=dataclasses.replace(f, dense_intermediate_size=128 if f.dense_intermediate_size else 0),
        moe=moe,
        attention=attention,
    )


def gemm_matrices(spec: ModelSpec) -> dict[str, list[tuple[int, int]]]:
    """(in, out) of every weight matrix of each dense-GEMM table, for the layer kinds present.

    The bytes add up to the shape's: ``attention_params(spec, kind)``, 3·h·i for SwiGLU FFNs
    (gate and up fused into one (h, 2i) matrix), V·h for the LM head.
    """
    h, a, m = spec.hidden_size, spec.attention, spec.moe
    shape = spec.shape
    kinds = {"linear" if is_linear_attention(g) else "full" for g in shape.groups}
    tables: dict[str, list[tuple[int, int]]] = {}
    if "full" in kinds:
        if a.kind == "mla":
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            query = (
                [(h, a.q_lora_rank), (a.q_lora_rank, a.num_heads * qk)]
                if a.q_lora_rank
                else [(h, a.num_heads * qk)]
            )
            tables["attention_projections"] = [
                *query,
                (h, a.kv_lora_rank + a.qk_rope_head_dim),
                (a.kv_lora_rank, a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)),
                (a.num_heads * a.v_head_dim, h),
            ]
        else:
            dv = a.v_head_dim or a.head_dim  # values (and the output projection) may be narrower
            q, k, v = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim, a.num_kv_heads * dv
            tables["attention_projections"] = [(h, q), (h, k), (h, v), (a.num_heads * dv, h)]
    if "linear" in kinds:
        nk, nv = a.linear_num_key_heads, a.linear_num_value_heads
        dk, dv = a.linear_key_head_dim, a.linear_value_head_dim
        tables["linear_attention_projections"] = [
            (h, 2 * nk * dk + 2 * nv * dv),
            (h, 2 * nv),
            (nv * dv, h),
        ]
    if shape.num_moe_layers and m.num_shared_experts:
        width = m.num_shared_experts * m.shared_expert_intermediate_size
        tables["shared_expert"] = [(h, 2 * width), (width, h)]
    if any(g.ffn_weight_bytes for g in shape.groups):
        d = spec.ffn.dense_intermediate_size
        tables["dense_ffn"] = [(h, 2 * d), (d, h)]
    tables["lm_head"] = [(h, spec.vocab_size)]
    return tables


def gemm_weight_bytes(spec: ModelSpec) -> dict[str, float]:
    """Weight bytes each GEMM table reads (equal to the shape's bytes for that term)."""
    wb = spec.weight_bytes
    return {
        name: float(sum(i * o for i, o in matrices)) * wb
        for name, matrices in gemm_matrices(spec).items()
    }


def gemm_counts(spec: ModelSpec) -> dict[str, int]:
    """How many times each GEMM table's kernels run in one pass (layers of that kind)."""
    shape = spec.shape
    counts = {
        "attention_projections": sum(g.count for g in shape.groups if not is_linear_attention(g)),
        "linear_attention_projections": sum(
            g.count for g in shape.groups if is_linear_attention(g)
        ),
        "shared_expert": shape.num_moe_layers,
        "dense_ffn": sum(g.count for g in shape.groups if g.ffn_weight_bytes),
        "lm_head": 1,
    }
    return {name: counts[name] for name in gemm_matrices(spec)}


def attention_layer(spec: ModelSpec) -> LayerGroup | None:
    """The layer group whose attention kernel is benchmarked (full attention if there is one)."""
    groups = [g for g in spec.shape.groups if not is_linear_attention(g)]
    if not groups:
        return None
    return min(groups, key=lambda g: (g.window_tokens != math.inf, -g.count))


def unique_experts_grid(num_experts: int, experts_per_token: int, points: int) -> tuple[int, ...]:
    """About ``points`` values from k_e to N, geometric (one pass of 1 token touches k_e).

    >>> unique_experts_grid(128, 8, 9)
    (8, 11, 16, 23, 32, 45, 64, 91, 128)
    """
    if num_experts == 0:
        return ()
    if num_experts == experts_per_token or points <= 1:
        return (num_experts,)
    ratio = (num_experts / experts_per_token) ** (1.0 / (points - 1))
    values = {round(experts_per_token * ratio**i) for i in range(points)}
    return tuple(sorted(values | {experts_per_token, num_experts}))


def stack_unique_experts(spec: ModelSpec, tokens: int) -> float:
    """Distinct experts the stack benchmark forces per layer: the independent-routing value."""
    m = spec.moe
    if not m.num_experts:
        return 0.0
    u = round(independent_union(m.num_experts, m.experts_per_token, tokens))
    return float(min(max(u, m.experts_per_token), m.num_experts, tokens * m.experts_per_token))


def make_plan(spec: ModelSpec, *, quick: bool, shapes: str) -> CalibrationPlan:
    """The grids for ``spec`` (already the benchmarked model, see :func:`bench_model`).

    ``full`` shapes: the GPU suite (about 3-4 minutes on an H100, under a minute with
    ``quick``). ``tiny`` shapes: a few seconds on a CPU.
    """
    m = spec.moe
    max_ctx = spec.max_context_tokens or 1 << 20
    if shapes == "tiny":
        return CalibrationPlan(
            moe_tokens=(1, 4, 16) if quick else (1, 2, 4, 8, 16, 32),
            moe_unique_experts=unique_experts_grid(m.num_experts, m.experts_per_token, 3),
            gemm_tokens=(1, 16, 128) if quick else (1, 4, 16, 64, 256),
            attention_batch=(1, 4) if quick else (1, 2, 4, 8),
            attention_kv_tokens=(32, 128) if quick else (32, 64, 128, 256),
            attention_query_tokens=(1, 3) if quick else (1, 2, 3, 5),
            stack_points=(StackPlanPoint(1, 1, "fit"), StackPlanPoint(4, 2, "validation")),
            stack_context_tokens=32,
            warmup=1,
            repetitions=3 if quick else 7,
            ceiling_copy_bytes=1 << 22,
            ceiling_matmul_size=128,
        )
    kv = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
    if quick:
        return CalibrationPlan(
            moe_tokens=(1, 4, 16, 64, 256),
            moe_unique_experts=unique_experts_grid(m.num_experts, m.experts_per_token, 5),
            gemm_tokens=(1, 16, 256, 2048),
            attention_batch=(1, 8, 64),
            attention_kv_tokens=tuple(c for c in (512, 2048, 8192) if c <= max_ctx),
            attention_query_tokens=(1, 4, 9),
            stack_points=(StackPlanPoint(1, 1, "fit"), StackPlanPoint(8, 4, "validation")),
            stack_context_tokens=512,
            warmup=2,
            repetitions=10,
            ceiling_copy_bytes=1 << 30,
            ceiling_matmul_size=8192,
        )
    return CalibrationPlan(
        moe_tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
        moe_unique_experts=unique_experts_grid(m.num_experts, m.experts_per_token, 9),
        gemm_tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
        attention_batch=(1, 2, 4, 8, 16, 32, 64, 128),
        attention_kv_tokens=tuple(c for c in kv if c <= max_ctx),
        attention_query_tokens=(1, 2, 3, 4, 6, 9),
        stack_points=(
            StackPlanPoint(1, 1, "fit"),
            StackPlanPoint(1, 4, "validation"),
            StackPlanPoint(4, 2, "validation"),
            StackPlanPoint(8, 4, "validation"),
            StackPlanPoint(16, 1, "validation"),
            StackPlanPoint(32, 3, "validation"),
        ),
        stack_context_tokens=512,
        warmup=3,
        repetitions=20,
        ceiling_copy_bytes=1 << 30,
        ceiling_matmul_size=8192,
    )
