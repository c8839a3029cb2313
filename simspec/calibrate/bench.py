"""The torch microbenchmarks (this module imports torch; only ``measure_profile`` imports it).

Every benchmark builds bf16 weights of the benchmarked model's shapes
(:func:`simspec.calibrate.plan.bench_model`), times one callable per grid cell with
:mod:`simspec.calibrate.timing`, and returns the medians as a table plus every repetition as
raw rows. What each one runs:

``moe`` (tokens n x unique experts U)
    router GEMM (h x N), softmax + top-k, gather of the token rows, the experts' SwiGLU FFN
    (gate/up GEMM, SiLU·up, down GEMM), routing-weight scaling and an ``index_add_`` combine.
    The top-k *result* is discarded: the routing is forced to a static assignment in which
    token t's slot j goes to expert ``(t·k_e + j) mod U`` of a fixed random choice of U
    experts, so exactly U distinct experts are touched and every token's k_e experts differ.
    When n·k_e < U no real routing can touch U experts; the cell then runs one extra row for
    each expert not reached (rows = max(n·k_e, U)), an upper envelope the cost model never
    queries directly. The experts run as ``torch._grouped_mm`` over all N experts with the
    rows grouped by expert (empty groups cost nothing, each touched expert's weights are read
    once) when the build supports it, else one GEMM pair per touched expert. Each cell is
    timed with an L2 flush before every repetition (``time_s``: weights from HBM, as in a
    real pass) and without (``time_s_no_flush``: what L2 keeps across repetitions).
``attention`` (batch B x keys per request S x query tokens per request q)
    ``scaled_dot_product_attention`` of B·q queries against a contiguous KV cache of S keys
    per request, causal among the q new tokens (lower-right aligned), GQA via ``enable_gqa``.
    MLA: one latent KV head of kv_lora + rope dimensions (values: kv_lora) read by all query
    heads; K and V are separate tensors, so the kernel reads the latent about twice (absorbed
    MLA kernels such as FlashMLA read it once): an upper bound. Paged KV layouts are not used.
``gemm`` (tokens n), one table per weight group
    the attention projections (per attention kind), shared expert, dense FFN and LM head as
    the GEMMs ``x @ W`` a pass runs (inputs random, shapes exact).
``stack`` (batch, tokens per request)
    the model's depth of layers, each running exactly the kernels above back to back plus
    RMSNorms and residual adds, then the LM head; the weights cycle through a few copies so
    one layer's weights are not in L2 when the next layer needs them. Timed eagerly and, on a
    GPU, as a CUDA-graph replay (what serving engines do for decode), at the plan's points.
``ceilings``
    device copy bandwidth (bytes read + written per second) and a square bf16 matmul.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from simspec.physics.models import LayerGroup, ModelSpec, is_linear_attention

from .plan import (
    CalibrationPlan,
    attention_layer,
    gemm_counts,
    gemm_matrices,
    gemm_weight_bytes,
    stack_unique_experts,
)
from .timing import CpuTimer, CudaTimer, make_timer, median

DTYPE = torch.bfloat16
Timer = CudaTimer | CpuTimer


@dataclass
class BenchResult:
    """Everything :func:`run_all` measured."""

    tables: dict[str, Any]
    ceilings: dict[str, float]
    raw: dict[str, list[dict[str, Any]]]
    device_name: str
    versions: dict[str, str]
    moe_kernel: str
    timer: str
    notes: str
    device_properties: dict[str, Any]
    durations_s: dict[str, float] = field(default_factory=dict)


class _Random:
    """Seeded bf16 tensors on one device (values only matter for not overflowing)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.generator = torch.Generator(device=device).manual_seed(0)

    def __call__(self, *shape: int, scale: float = 0.02, dtype: torch.dtype = DTYPE):
        t = torch.randn(shape, generator=self.generator, device=self.device, dtype=dtype)
        return t.mul_(scale)


# -- MoE ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Routing:
    """A static expert assignment: rows grouped by expert (see the module docstring)."""

    row_token: list[int]  # the token each (expert-sorted) row computes
    pair_row: list[int]  # for token t's slot j (index t·k_e + j): its row
    offsets: list[int]  # cumulative row ends over all N experts (for grouped GEMM)
    segments: list[tuple[int, int, int]]  # (expert, first row, end row) of touched experts


def forced_routing(tokens: int, per_token: int, unique: int, experts: list[int], num_experts: int):
    """Route ``tokens`` x ``per_token`` slots onto exactly ``unique`` of ``experts``.

    Slot p = t·k_e + j goes to ``experts[p mod unique]``; when tokens·k_e < unique, one extra
    row (token 0, not combined) goes to each expert no slot reached.

    >>> r = forced_routing(1, 2, 4, [5, 1, 7, 2], 8)
    >>> r.segments  # two real rows (token 0) and two extra rows for the unreached experts
    [(1, 0, 1), (2, 1, 2), (5, 2, 3), (7, 3, 4)]
    >>> r.pair_row  # slot 0 (expert 5) is row 2, slot 1 (expert 1) is row 0
    [2, 0]
    """
    pairs = tokens * per_token
    rows = [(experts[p % unique], p // per_token, p) for p in range(pairs)]
    rows += [(experts[p], 0, -1) for p in range(pairs, unique)]
    rows.sort(key=lambda r: r[0])
    counts = [0] * num_experts
    pair_row = [0] * pairs
    for index, (expert, _, pair) in enumerate(rows):
        counts[expert] += 1
        if pair >= 0:
            pair_row[pair] = index
    offsets, segments, end = [], [], 0
    for expert, count in enumerate(counts):
        if count:
            segments.append((expert, end, end + count))
        end += count
        offsets.append(end)
    return Routing([r[1] for r in rows], pair_row, offsets, segments)


def _first_line(err: BaseException) -> str:
    return (str(err).splitlines() or [type(err).__name__])[0][:160]


def probe_grouped_mm(device: torch.device) -> tuple[bool, str]:
    """Whether ``torch._grouped_mm`` runs and is right here (uneven and empty groups)."""
    grouped = getattr(torch, "_grouped_mm", None)
    if grouped is None:
        return False, f"per-expert loop (torch {torch.__version__} has no torch._grouped_mm)"
    rand = _Random(device)
    a, b = rand(40, 64, scale=1.0), rand(4, 64, 32, scale=1.0)
    offs = torch.tensor([3, 3, 17, 40], dtype=torch.int32, device=device)
    try:
        out = grouped(a, b, offs=offs)
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as err:
        reason = f"{type(err).__name__}: {_first_line(err)}"
        return False, f"per-expert loop (torch._grouped_mm failed here: {reason})"
    ref = torch.cat([a[0:3] @ b[0], a[3:17] @ b[2], a[17:40] @ b[3]])
    if not torch.allclose(out.float(), ref.float(), rtol=5e-2, atol=5e-2):
        return False, "per-expert loop (torch._grouped_mm gave wrong results here)"
    return True, "torch._grouped_mm (one grouped kernel; each touched expert read once)"


@dataclass
class MoeWeights:
    router: torch.Tensor  # (h, N)
    gate_up: torch.Tensor  # (N, h, 2i)
    down: torch.Tensor  # (N, i, h)


def moe_weights(spec: ModelSpec, rand: _Random) -> MoeWeights:
    m, h = spec.moe, spec.hidden_size
    i = m.expert_intermediate_size
    return MoeWeights(
        rand(h, m.num_experts), rand(m.num_experts, h, 2 * i), rand(m.num_experts, i, h)
    )


def moe_layer(
    x: torch.Tensor, w: MoeWeights, per_token: int, routing: Routing, grouped: bool
) -> Callable[[], torch.Tensor]:
    """The timed MoE layer: router, top-k, gather, SwiGLU experts, combine (module docstring)."""
    device = x.device
    tokens = x.shape[0]
    row_token = torch.tensor(routing.row_token, dtype=torch.long, device=device)
    pair_row = torch.tensor(routing.pair_row, dtype=torch.long, device=device)
    offs = torch.tensor(routing.offsets, dtype=torch.int32, device=device)
    segments = routing.segments

    def experts(rows: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if grouped:
            return torch._grouped_mm(rows, weight, offs=offs)
        return torch.cat([rows[a:b] @ weight[e] for e, a, b in segments])

    def run() -> torch.Tensor:
        probs = torch.softmax((x @ w.router).float(), dim=-1)
        top = torch.topk(probs, per_token, dim=-1).values  # ids discarded: routing is forced
        rows = x.index_select(0, row_token)
        gate, up = experts(rows, w.gate_up).chunk(2, dim=-1)
        y = experts(F.silu(gate) * up, w.down)
        # Combine: each token's k_e expert outputs, weighted by its routing probabilities.
        per_pair = y.index_select(0, pair_row).view(tokens, per_token, -1)
        return (per_pair * top.to(y.dtype).unsqueeze(-1)).sum(dim=1)

    return run


def bench_moe(spec, plan, timer, rand, grouped, progress):
    """The MoE table (tokens x unique experts), flushed and not."""
    m = spec.moe
    shape = spec.shape
    weights = moe_weights(spec, rand)
    order = torch.randperm(m.num_experts, generator=torch.Generator().manual_seed(0)).tolist()
    cold, warm, raw = [], [], []
    for n in plan.moe_tokens:
        x = rand(n, spec.hidden_size, scale=1.0)
        cold_row, warm_row = [], []
        for u in plan.moe_unique_experts:
            routing = forced_routing(n, m.experts_per_token, u, order, m.num_experts)
            fn = moe_layer(x, weights, m.experts_per_token, routing, grouped)
            for flush, row in ((True, cold_row), (False, warm_row)):
                samples = timer.measure(fn, flush=flush)
                row.append(median(samples))
                raw += [
                    {"tokens": n, "unique_experts": u, "l2_flush": flush, "rep": r, "time_s": s}
                    for r, s in enumerate(samples)
                ]
        cold.append(cold_row)
        warm.append(warm_row)
        progress(f"moe: {n} tokens done")
    wb = shape.weight_bytes_per_param
    table = {
        "tokens": list(plan.moe_tokens),
        "unique_experts": list(plan.moe_unique_experts),
        "time_s": cold,
        "time_s_no_flush": warm,
        "expert_bytes": shape.expert_bytes,
        "expert_params": shape.expert_params,
        "experts_per_token": m.experts_per_token,
        "router_bytes": shape.router_bytes,
        "router_flops_per_token": 2.0 * shape.router_bytes / wb,
        "kernel": "grouped_mm" if grouped else "per_expert_loop",
    }
    return table, raw


# -- attention ---------------------------------------------------------------------------------


def attention_dims(spec: ModelSpec) -> tuple[int, int, int, int]:
    """(query heads, KV heads, key dim, value dim) of the benchmarked attention kernel."""
    a = spec.attention
    if a.kind == "mla":
        return a.num_heads, 1, a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank
    return a.num_heads, a.num_kv_heads, a.head_dim, a.head_dim


def _causal_mask(q: int, keys: int, device: torch.device, bias: bool):
    """Causal mask of q new tokens over ``keys`` keys, aligned to the last key (lower right).

    With ``bias``, torch's ``causal_lower_right`` (SDPA can then use its flash kernel; used on
    a GPU when :func:`lower_right_bias_works`); otherwise an explicit boolean mask, which on a
    CPU also avoids importing torch._dynamo (seconds) for tests.
    """
    if q <= 1:
        return None
    if bias:
        from torch.nn.attention.bias import causal_lower_right

        return causal_lower_right(q, keys)
    rows = torch.arange(q, device=device)[:, None]
    cols = torch.arange(keys, device=device)[None, :]
    return cols <= rows + (keys - q)


def lower_right_bias_works(spec: ModelSpec, device: torch.device) -> bool:
    """Whether SDPA accepts the lower-right causal bias with this model's heads here."""
    if device.type != "cuda":
        return False
    hq, hkv, dk, dv = attention_dims(spec)
    rand = _Random(device)
    q_t, k_t, v_t = rand(1, hq, 2, dk), rand(1, hkv, 16, dk), rand(1, hkv, 16, dv)
    try:
        out = attention_call(q_t, k_t, v_t, _causal_mask(2, 16, device, True), hq != hkv)()
        ref = attention_call(q_t, k_t, v_t, _causal_mask(2, 16, device, False), hq != hkv)()
    except Exception:  # any failure: the explicit mask is the safe choice
        return False
    return bool(torch.allclose(out.float(), ref.float(), rtol=5e-2, atol=5e-2))


def attention_call(q_t, k_t, v_t, mask, gqa: bool) -> Callable[[], torch.Tensor]:
    """One decode-attention call (GQA through ``enable_gqa``)."""

    def run() -> torch.Tensor:
        return F.scaled_dot_product_attention(q_t, k_t, v_t, attn_mask=mask, enable_gqa=gqa)

    return run


def fit_grid(batch, kv_tokens, bytes_per_key: float, budget_bytes: float):
    """Drop the largest contexts (then batches) until the largest cell's KV fits the budget."""
    batch, kv_tokens = list(batch), list(kv_tokens)
    while batch[-1] * kv_tokens[-1] * bytes_per_key > budget_bytes:
        if len(kv_tokens) > 2:
            kv_tokens.pop()
        elif len(batch) > 1:
            batch.pop()
        else:
            break
    return batch, kv_tokens


def bench_attention(spec, plan, timer, rand, budget_bytes, bias, progress):
    """The decode-attention table (batch x keys per request x query tokens)."""
    group = attention_layer(spec)
    if group is None:
        return None, [], ""
    hq, hkv, dk, dv = attention_dims(spec)
    bytes_per_key = hkv * (dk + dv) * 2.0
    batch, kv_tokens = fit_grid(
        plan.attention_batch, plan.attention_kv_tokens, bytes_per_key, budget_bytes
    )
    note = ""
    if (batch, kv_tokens) != (list(plan.attention_batch), list(plan.attention_kv_tokens)):
        note = f"attention grid shrunk to fit {budget_bytes / 1e9:.1f} GB of KV"
    times, raw = [], []
    for b in batch:
        per_b = []
        for s in kv_tokens:
            k_t, v_t = rand(b, hkv, s, dk, scale=1.0), rand(b, hkv, s, dv, scale=1.0)
            per_s = []
            for q in plan.attention_query_tokens:
                q_t = rand(b, hq, q, dk, scale=1.0)
                mask = _causal_mask(q, s, rand.device, bias)
                fn = attention_call(q_t, k_t, v_t, mask, hq != hkv)
                samples = timer.measure(fn)
                per_s.append(median(samples))
                raw += [
                    {"batch": b, "kv_tokens": s, "query_tokens": q, "rep": r, "time_s": t}
                    for r, t in enumerate(samples)
                ]
            per_b.append(per_s)
            del k_t, v_t
        times.append(per_b)
        progress(f"attention: batch {b} done")
    table = {
        "batch": batch,
        "kv_tokens": kv_tokens,
        "query_tokens": list(plan.attention_query_tokens),
        "time_s": times,
        "kv_bytes_per_token": bytes_per_key,
        "flops_per_pair": group.attention_flops_per_pair,
        "kernel": "torch.nn.functional.scaled_dot_product_attention",
        "kv_layout": "mla latent (K and V separate)" if spec.attention.kind == "mla" else "gqa",
    }
    return table, raw, note


# -- dense GEMMs -------------------------------------------------------------------------------


def gemm_call(inputs, weights) -> Callable[[], list[torch.Tensor]]:
    """The GEMMs ``x @ W`` of one table, back to back."""

    def run() -> list[torch.Tensor]:
        return [x @ w for x, w in zip(inputs, weights, strict=True)]

    return run


def bench_gemm(spec, plan, timer, rand, progress):
    """One table per weight group (attention projections, shared expert, dense FFN, LM head)."""
    tables, raw = {}, []
    nbytes, counts = gemm_weight_bytes(spec), gemm_counts(spec)
    wb = spec.shape.weight_bytes_per_param
    for name, matrices in gemm_matrices(spec).items():
        weights = [rand(i, o) for i, o in matrices]
        times = []
        for n in plan.gemm_tokens:
            inputs = [rand(n, i, scale=1.0) for i, _ in matrices]
            samples = timer.measure(gemm_call(inputs, weights))
            times.append(median(samples))
            raw += [
                {"table": name, "tokens": n, "rep": r, "time_s": t} for r, t in enumerate(samples)
            ]
        tables[name] = {
            "tokens": list(plan.gemm_tokens),
            "time_s": times,
            "weight_bytes": nbytes[name],
            "flops_per_token": 2.0 * nbytes[name] / wb,
            "count_per_pass": counts[name],
        }
        progress(f"gemm: {name} done")
    return tables, raw


# -- layer stack -------------------------------------------------------------------------------


@dataclass
class _LayerWeights:
    norms: tuple[torch.Tensor, torch.Tensor]
    projections: list[torch.Tensor]
    moe: MoeWeights | None
    ffn: list[torch.Tensor]  # shared expert or dense FFN: (h, 2i), (i, h)


def _layer_weights(spec: ModelSpec, group: LayerGroup, rand: _Random) -> _LayerWeights:
    mats = gemm_matrices(spec)
    h = spec.hidden_size
    proj = mats[
        "linear_attention_projections" if is_linear_attention(group) else "attention_projections"
    ]
    ffn_name = "shared_expert" if group.is_moe else "dense_ffn"
    ffn = [rand(i, o) for i, o in mats.get(ffn_name, [])]
    norm = torch.ones(h, dtype=DTYPE, device=rand.device)
    return _LayerWeights(
        norms=(norm, norm),
        projections=[rand(i, o) for i, o in proj],
        moe=moe_weights(spec, rand) if group.is_moe else None,
        ffn=ffn,
    )


def _layer_bytes(spec: ModelSpec) -> float:
    shape = spec.shape
    per_layer = max(g.attention_weight_bytes + g.ffn_weight_bytes for g in shape.groups)
    if shape.num_moe_layers:
        per_layer += (
            shape.num_experts * shape.expert_bytes + shape.shared_expert_bytes + shape.router_bytes
        )
    return per_layer


def stack_call(spec, point, context_tokens, weights, copies, rand, grouped, bias=False):
    """One pass through the whole layer stack at (batch, tokens per request)."""
    shape, m, h = spec.shape, spec.moe, spec.hidden_size
    batch, per_request = point.batch, point.tokens_per_request
    n = batch * per_request
    hq, hkv, dk, dv = attention_dims(spec)
    a = spec.attention
    unique = int(stack_unique_experts(spec, n))
    routing = None
    if shape.num_moe_layers:
        order = torch.randperm(m.num_experts, generator=torch.Generator().manual_seed(1)).tolist()
        routing = forced_routing(n, m.experts_per_token, unique, order, m.num_experts)
    x0 = rand(n, h, scale=1.0)
    q_t = rand(batch, hq, per_request, dk, scale=1.0)
    steps = []
    for copy in range(copies):
        for gi, group in enumerate(shape.groups):
            w = weights[copy, gi]
            inputs = {i: rand(n, i, scale=1.0) for i in {p.shape[0] for p in w.projections}}
            if is_linear_attention(group):
                state = torch.zeros(
                    batch,
                    a.linear_num_value_heads,
                    a.linear_key_head_dim,
                    a.linear_value_head_dim,
                    dtype=torch.float32,
                    device=rand.device,
                )
                cache = (state,)
            else:
                keys = int(min(context_tokens + per_request, group.window_tokens))
                cache = (
                    rand(batch, hkv, keys, dk, scale=1.0),
                    rand(batch, hkv, keys, dv, scale=1.0),
                    _causal_mask(per_request, keys, rand.device, bias),
                )
            moe = None
            if w.moe is not None and routing is not None:
                moe = moe_layer(x0, w.moe, m.experts_per_token, routing, grouped)
            steps.append((group, w, inputs, cache, moe))
    per_copy = len(shape.groups)
    layer_plan = []
    for gi, group in enumerate(shape.groups):
        layer_plan += [gi] * group.count
    lm_head = weights["lm_head"]

    def run() -> torch.Tensor:
        hidden = x0
        for index, gi in enumerate(layer_plan):
            group, w, inputs, cache, moe = steps[(index % copies) * per_copy + gi]
            y = F.rms_norm(hidden, (h,), w.norms[0])
            out = None
            for p in w.projections:
                out = (y if p.shape[0] == h else inputs[p.shape[0]]) @ p
            if is_linear_attention(group):
                cache[0].mul_(0.99)  # the recurrent state: read and written once
            else:
                F.scaled_dot_product_attention(
                    q_t, cache[0], cache[1], attn_mask=cache[2], enable_gqa=hq != hkv
                )
            hidden = hidden + out
            y = F.rms_norm(hidden, (h,), w.norms[1])
            ffn_out = moe() if moe is not None else torch.zeros_like(y)
            if w.ffn:
                gate, up = (y @ w.ffn[0]).chunk(2, dim=-1)
                ffn_out = ffn_out + (F.silu(gate) * up) @ w.ffn[1]
            hidden = hidden + ffn_out
        return F.rms_norm(hidden, (h,)) @ lm_head

    return run, unique


def _capture_graph(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Capture ``fn`` into a CUDA graph (the documented warm-up-on-a-side-stream recipe)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def bench_stack(spec, plan, timer, rand, grouped, budget_bytes, bias, progress):
    """Layer-stack rows (eager, and graph replay on a GPU) at the plan's points."""
    shape = spec.shape
    copies = int(max(1, min(4, spec.num_layers, budget_bytes // max(_layer_bytes(spec), 1.0))))
    weights: dict[Any, Any] = {
        (c, gi): _layer_weights(spec, g, rand)
        for c in range(copies)
        for gi, g in enumerate(shape.groups)
    }
    weights["lm_head"] = rand(spec.hidden_size, spec.vocab_size)
    rows, raw, notes = [], [], []
    for point in plan.stack_points:
        fn, unique = stack_call(
            spec, point, plan.stack_context_tokens, weights, copies, rand, grouped, bias
        )
        modes: list[tuple[str, Callable[[], Any]]] = [("eager", fn)]
        if rand.device.type == "cuda":
            try:
                modes.append(("graph", _capture_graph(fn)))
            except Exception as err:  # any capture failure: keep the eager measurement
                notes.append(f"CUDA graph capture failed ({_first_line(err)})")
        for mode, call in modes:
            samples = timer.measure(call)
            rows.append(
                {
                    "batch": point.batch,
                    "tokens_per_request": point.tokens_per_request,
                    "context_tokens": plan.stack_context_tokens,
                    "unique_experts": float(unique),
                    "mode": mode,
                    "use": point.use,
                    "time_s": median(samples),
                }
            )
            raw += [
                {
                    "batch": point.batch,
                    "tokens_per_request": point.tokens_per_request,
                    "mode": mode,
                    "rep": r,
                    "time_s": t,
                }
                for r, t in enumerate(samples)
            ]
        progress(f"stack: batch {point.batch} x {point.tokens_per_request} tokens done")
    notes.append(f"layer stack cycles {copies} weight copies")
    return rows, raw, "; ".join(dict.fromkeys(notes))


# -- ceilings ----------------------------------------------------------------------------------


def bench_ceilings(plan: CalibrationPlan, timer: Timer, rand: _Random):
    """Copy bandwidth (read + write bytes per second) and bf16 matmul FLOP/s."""
    elements = plan.ceiling_copy_bytes // 2
    src = rand(elements, scale=1.0)
    dst = torch.empty_like(src)
    copy = timer.measure(lambda: dst.copy_(src), flush=False)
    size = plan.ceiling_matmul_size
    a, b = rand(size, size, scale=1.0), rand(size, size, scale=1.0)
    matmul = timer.measure(lambda: a @ b, flush=False)
    ceilings = {
        "copy_bytes_per_s": 2.0 * elements * 2 / median(copy),
        "matmul_flops_per_s": 2.0 * size**3 / median(matmul),
        "copy_bytes": float(elements * 2),
        "matmul_size": float(size),
    }
    raw = [{"benchmark": "copy", "rep": r, "time_s": t} for r, t in enumerate(copy)]
    raw += [{"benchmark": "matmul", "rep": r, "time_s": t} for r, t in enumerate(matmul)]
    return ceilings, raw


# -- everything --------------------------------------------------------------------------------


def _device_info(device: torch.device) -> tuple[str, dict[str, Any]]:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return props.name, {
            "multiprocessors": props.multi_processor_count,
            "memory_bytes": float(props.total_memory),
            "l2_bytes": float(getattr(props, "L2_cache_size", 0)),
            "compute_capability": f"{props.major}.{props.minor}",
        }
    name = platform.processor() or platform.machine() or "cpu"
    return f"cpu ({name})", {"threads": torch.get_num_threads()}


def _free_bytes(device: torch.device) -> float:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free)
    return 1.0e9  # tiny shapes on a CPU: far below any budget


def run_all(
    spec: ModelSpec,
    plan: CalibrationPlan,
    *,
    device: str,
    progress: Callable[[str], None] = lambda _: None,
) -> BenchResult:
    """Run every benchmark of ``plan`` on ``device`` ("cuda" or "cpu").

    On a CPU torch runs single-threaded for the duration (restored afterwards): the CPU run
    only exercises the pipeline, and intra-op thread pools on small shared machines turn
    microsecond kernels into milliseconds of spinning.
    """
    if device == "cuda":
        return _run_all(spec, plan, torch.device("cuda", torch.cuda.current_device()), progress)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run_all(spec, plan, torch.device(device), progress)
    finally:
        torch.set_num_threads(threads)


def _run_all(
    spec: ModelSpec,
    plan: CalibrationPlan,
    dev: torch.device,
    progress: Callable[[str], None],
) -> BenchResult:
    rand = _Random(dev)
    timer = make_timer(dev, plan.warmup, plan.repetitions)
    grouped, kernel_note = probe_grouped_mm(dev)
    bias = attention_layer(spec) is not None and lower_right_bias_works(spec, dev)
    notes: list[str] = [
        "causal mask: torch lower-right bias" if bias else "causal mask: explicit boolean"
    ]
    name, props = _device_info(dev)
    durations: dict[str, float] = {}
    tables: dict[str, Any] = {}
    raw: dict[str, list[dict[str, Any]]] = {}

    def section(label: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        result = fn()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            torch.cuda.empty_cache()
        durations[label] = time.perf_counter() - start
        return result

    ceilings, raw["ceilings"] = section("ceilings", lambda: bench_ceilings(plan, timer, rand))
    progress("ceilings done")
    if spec.shape.num_moe_layers:
        tables["moe"], raw["moe"] = section(
            "moe", lambda: bench_moe(spec, plan, timer, rand, grouped, progress)
        )
    attention, raw["attention"], note = section(
        "attention",
        lambda: bench_attention(spec, plan, timer, rand, 0.4 * _free_bytes(dev), bias, progress),
    )
    if attention is not None:
        tables["attention"] = attention
    notes.append(note)
    tables["gemm"], raw["gemm"] = section(
        "gemm", lambda: bench_gemm(spec, plan, timer, rand, progress)
    )
    tables["stack"], raw["stack"], note = section(
        "stack",
        lambda: bench_stack(
            spec, plan, timer, rand, grouped, 0.3 * _free_bytes(dev), bias, progress
        ),
    )
    notes.append(note)
    versions = {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "",
    }
    return BenchResult(
        tables=tables,
        ceilings=ceilings,
        raw=raw,
        device_name=name,
        versions=versions,
        moe_kernel=kernel_note,
        timer=timer.kind,
        notes="; ".join(n for n in notes if n),
        device_properties=props,
        durations_s=durations,
    )
