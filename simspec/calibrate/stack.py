"""The layer-stack microbenchmark (imports torch), at the plan's (batch, tokens per request).

The model's depth of layers, each running exactly the kernels of the other benchmarks back to
back (attention projections, decode attention or the linear-attention state update, the MoE
layer of :mod:`.moe` with the independent-routing number of unique experts, shared expert or
dense FFN) plus RMSNorms and residual adds, then the LM head. The weights cycle through a few
copies so one layer's weights are not in L2 when the next layer needs them. Timed eagerly and,
on a GPU, as a CUDA-graph replay (what serving engines do for decode). The "fit" point (one
token) gives the fixed per-pass overhead; the "validation" points are kept out of the fit and
report the calibrated model's per-pass error (:func:`simspec.calibrate.assemble_profile`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from simspec.physics.models import LayerGroup, ModelSpec, is_linear_attention

from .attention import attention_call, attention_dims, causal_mask
from .common import DTYPE, Progress, RandomTensors, RawRows, Timer, first_line
from .moe import MoeWeights, forced_routing, moe_layer, moe_weights
from .plan import CalibrationPlan, StackPlanPoint, gemm_matrices, stack_unique_experts
from .timing import median


@dataclass
class LayerWeights:
    """One layer's weights (MoE layers: ``moe`` and the shared expert as ``ffn``)."""

    norms: tuple[torch.Tensor, torch.Tensor]
    projections: list[torch.Tensor]
    moe: MoeWeights | None
    ffn: list[torch.Tensor]  # shared expert or dense FFN: (h, 2i), (i, h)


@dataclass
class StackWeights:
    """``copies`` sets of per-group layer weights (keyed (copy, group index)) and the LM head."""

    layers: dict[tuple[int, int], LayerWeights]
    lm_head: torch.Tensor
    copies: int


@dataclass
class _LayerStep:
    """One layer of one weight copy, ready to run: its inputs and its attention call."""

    weights: LayerWeights
    inputs: dict[int, torch.Tensor]  # random inputs of projections that do not read h
    attention: Callable[[], object]
    moe: Callable[[], torch.Tensor] | None


def _state_update(state: torch.Tensor) -> Callable[[], object]:
    """Linear attention's decode step, as the benchmark runs it: the state read and written."""

    def run() -> object:
        return state.mul_(0.99)

    return run


def layer_weights(spec: ModelSpec, group: LayerGroup, rand: RandomTensors) -> LayerWeights:
    """Random weights of one layer of ``group``."""
    mats = gemm_matrices(spec)
    h = spec.hidden_size
    proj = mats[
        "linear_attention_projections" if is_linear_attention(group) else "attention_projections"
    ]
    ffn_name = "shared_expert" if group.is_moe else "dense_ffn"
    ffn = [rand(i, o) for i, o in mats.get(ffn_name, [])]
    norm = torch.ones(h, dtype=DTYPE, device=rand.device)
    return LayerWeights(
        norms=(norm, norm),
        projections=[rand(i, o) for i, o in proj],
        moe=moe_weights(spec, rand) if group.is_moe else None,
        ffn=ffn,
    )


def layer_bytes(spec: ModelSpec) -> float:
    """Weight bytes of the largest layer, all experts included (what one copy costs)."""
    shape = spec.shape
    per_layer = max(g.attention_weight_bytes + g.ffn_weight_bytes for g in shape.groups)
    if shape.num_moe_layers:
        per_layer += (
            shape.num_experts * shape.expert_bytes + shape.shared_expert_bytes + shape.router_bytes
        )
    return per_layer


def stack_weights(spec: ModelSpec, rand: RandomTensors, budget_bytes: float) -> StackWeights:
    """Up to four copies of every layer group's weights (as many as fit the budget)."""
    copies = int(max(1, min(4, spec.num_layers, budget_bytes // max(layer_bytes(spec), 1.0))))
    layers = {
        (c, gi): layer_weights(spec, g, rand)
        for c in range(copies)
        for gi, g in enumerate(spec.shape.groups)
    }
    return StackWeights(layers, rand(spec.hidden_size, spec.vocab_size), copies)


def stack_call(
    spec: ModelSpec,
    point: StackPlanPoint,
    context_tokens: int,
    weights: StackWeights,
    rand: RandomTensors,
    grouped: bool,
    bias: bool = False,
) -> tuple[Callable[[], torch.Tensor], int]:
    """One pass through the whole layer stack at (batch, tokens per request).

    Returns the timed callable and the unique experts it forces per MoE layer.
    """
    shape, m, h = spec.shape, spec.moe, spec.hidden_size
    batch, per_request = point.batch, point.tokens_per_request
    n = batch * per_request
    hq, hkv, dk, dv = attention_dims(spec)
    a = spec.attention
    copies = weights.copies
    unique = int(stack_unique_experts(spec, n))
    routing = None
    if shape.num_moe_layers:
        order = torch.randperm(m.num_experts, generator=torch.Generator().manual_seed(1)).tolist()
        routing = forced_routing(n, m.experts_per_token, unique, order, m.num_experts)
    x0 = rand(n, h, scale=1.0)
    q_t = rand(batch, hq, per_request, dk, scale=1.0)
    steps: list[_LayerStep] = []
    for copy in range(copies):
        for gi, group in enumerate(shape.groups):
            w = weights.layers[copy, gi]
            inputs = {i: rand(n, i, scale=1.0) for i in {p.shape[0] for p in w.projections}}
            attention: Callable[[], object]
            if is_linear_attention(group):
                state = torch.zeros(
                    batch,
                    a.linear_num_value_heads,
                    a.linear_key_head_dim,
                    a.linear_value_head_dim,
                    dtype=torch.float32,
                    device=rand.device,
                )
                attention = _state_update(state)
            else:
                keys = int(min(context_tokens + per_request, group.window_tokens))
                k_t = rand(batch, hkv, keys, dk, scale=1.0)
                v_t = rand(batch, hkv, keys, dv, scale=1.0)
                mask = causal_mask(per_request, keys, rand.device, bias)
                attention = attention_call(q_t, k_t, v_t, mask, hq != hkv)
            moe = None
            if w.moe is not None and routing is not None:
                moe = moe_layer(x0, w.moe, m.experts_per_token, routing, grouped)
            steps.append(_LayerStep(w, inputs, attention, moe))
    per_copy = len(shape.groups)
    layer_plan: list[int] = []
    for gi, group in enumerate(shape.groups):
        layer_plan += [gi] * group.count
    lm_head = weights.lm_head

    def run() -> torch.Tensor:
        hidden = x0
        for index, gi in enumerate(layer_plan):
            step = steps[(index % copies) * per_copy + gi]
            w = step.weights
            y = F.rms_norm(hidden, (h,), w.norms[0])
            out = y  # replaced: every layer has projections
            for p in w.projections:
                out = (y if p.shape[0] == h else step.inputs[p.shape[0]]) @ p
            step.attention()
            hidden = hidden + out
            y = F.rms_norm(hidden, (h,), w.norms[1])
            ffn_out = step.moe() if step.moe is not None else torch.zeros_like(y)
            if w.ffn:
                gate, up = (y @ w.ffn[0]).chunk(2, dim=-1)
                ffn_out = ffn_out + (F.silu(gate) * up) @ w.ffn[1]
            hidden = hidden + ffn_out
        return F.rms_norm(hidden, (h,)) @ lm_head

    return run, unique


def capture_graph(fn: Callable[[], Any]) -> Callable[[], Any]:
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


def bench_stack(
    spec: ModelSpec,
    plan: CalibrationPlan,
    timer: Timer,
    rand: RandomTensors,
    grouped: bool,
    budget_bytes: float,
    bias: bool,
    progress: Progress,
) -> tuple[list[dict[str, Any]], RawRows, str]:
    """Layer-stack rows (eager, and graph replay on a GPU) at the plan's points, raw rows, notes."""
    weights = stack_weights(spec, rand, budget_bytes)
    rows: list[dict[str, Any]] = []
    raw: RawRows = []
    notes: list[str] = []
    for point in plan.stack_points:
        fn, unique = stack_call(
            spec, point, plan.stack_context_tokens, weights, rand, grouped, bias
        )
        modes: list[tuple[str, Callable[[], Any]]] = [("eager", fn)]
        if rand.device.type == "cuda":
            try:
                modes.append(("graph", capture_graph(fn)))
            except Exception as err:  # any capture failure: keep the eager measurement
                notes.append(f"CUDA graph capture failed ({first_line(err)})")
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
    notes.append(f"layer stack cycles {weights.copies} weight copies")
    return rows, raw, "; ".join(dict.fromkeys(notes))
