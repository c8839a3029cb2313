"""The MoE-layer microbenchmark (imports torch), over tokens n x unique experts U.

One timed call runs the router GEMM (h x N), softmax + top-k, the gather of the token rows,
the experts' SwiGLU FFN (gate/up GEMM, SiLU·up, down GEMM), routing-weight scaling and the
combine. The top-k *result* is discarded: the routing is forced to a static assignment in which
token t's slot j goes to expert ``(t·k_e + j) mod U`` of a fixed random choice of U experts, so
exactly U distinct experts are touched and every token's k_e experts differ. When n·k_e < U no
real routing can touch U experts; the cell then runs one extra row for each expert not reached
(rows = max(n·k_e, U)), an upper envelope the cost model never queries directly.

The experts run as ``torch._grouped_mm`` over all N experts with the rows grouped by expert
(empty groups cost nothing, each touched expert's weights are read once) when the build
supports it, else one GEMM pair per touched expert. Each cell is timed with an L2 flush before
every repetition (``time_s``: weights from HBM, as in a real pass) and without
(``time_s_no_flush``: what L2 keeps across repetitions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from simspec.physics.models import ModelSpec

from .common import Progress, RandomTensors, RawRows, Timer, first_line
from .plan import CalibrationPlan
from .timing import median


@dataclass(frozen=True)
class Routing:
    """A static expert assignment: rows grouped by expert (see the module docstring)."""

    row_token: list[int]  # the token each (expert-sorted) row computes
    pair_row: list[int]  # for token t's slot j (index t·k_e + j): its row
    offsets: list[int]  # cumulative row ends over all N experts (for grouped GEMM)
    segments: list[tuple[int, int, int]]  # (expert, first row, end row) of touched experts


def forced_routing(
    tokens: int, per_token: int, unique: int, experts: list[int], num_experts: int
) -> Routing:
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
    # (expert, token, slot index or -1 for an extra row)
    rows = [(experts[p % unique], p // per_token, p) for p in range(pairs)]
    rows += [(experts[p], 0, -1) for p in range(pairs, unique)]
    rows.sort(key=lambda r: r[0])
    counts = [0] * num_experts
    pair_row = [0] * pairs
    for index, (expert, _, pair) in enumerate(rows):
        counts[expert] += 1
        if pair >= 0:
            pair_row[pair] = index
    offsets: list[int] = []
    segments: list[tuple[int, int, int]] = []
    end = 0
    for expert, count in enumerate(counts):
        if count:
            segments.append((expert, end, end + count))
        end += count
        offsets.append(end)
    return Routing([r[1] for r in rows], pair_row, offsets, segments)


def probe_grouped_mm(device: torch.device) -> tuple[bool, str]:
    """Whether ``torch._grouped_mm`` runs and is right here (uneven and empty groups)."""
    grouped = getattr(torch, "_grouped_mm", None)
    if grouped is None:
        return False, f"per-expert loop (torch {torch.__version__} has no torch._grouped_mm)"
    rand = RandomTensors(device)
    a, b = rand(40, 64, scale=1.0), rand(4, 64, 32, scale=1.0)
    offs = torch.tensor([3, 3, 17, 40], dtype=torch.int32, device=device)
    try:
        out = grouped(a, b, offs=offs)
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as err:
        reason = f"{type(err).__name__}: {first_line(err)}"
        return False, f"per-expert loop (torch._grouped_mm failed here: {reason})"
    ref = torch.cat([a[0:3] @ b[0], a[3:17] @ b[2], a[17:40] @ b[3]])
    if not torch.allclose(out.float(), ref.float(), rtol=5e-2, atol=5e-2):
        return False, "per-expert loop (torch._grouped_mm gave wrong results here)"
    return True, "torch._grouped_mm (one grouped kernel; each touched expert read once)"


@dataclass
class MoeWeights:
    """One MoE layer's weights: router, fused gate/up and down projections of every expert."""

    router: torch.Tensor  # (h, N)
    gate_up: torch.Tensor  # (N, h, 2i)
    down: torch.Tensor  # (N, i, h)


def moe_weights(spec: ModelSpec, rand: RandomTensors) -> MoeWeights:
    """Random weights of one MoE layer of ``spec``."""
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


def bench_moe(
    spec: ModelSpec,
    plan: CalibrationPlan,
    timer: Timer,
    rand: RandomTensors,
    grouped: bool,
    progress: Progress,
) -> tuple[dict[str, Any], RawRows]:
    """The MoE table (tokens x unique experts), flushed and not."""
    m = spec.moe
    shape = spec.shape
    weights = moe_weights(spec, rand)
    order = torch.randperm(m.num_experts, generator=torch.Generator().manual_seed(0)).tolist()
    cold: list[list[float]] = []
    warm: list[list[float]] = []
    raw: RawRows = []
    for n in plan.moe_tokens:
        x = rand(n, spec.hidden_size, scale=1.0)
        cold_row: list[float] = []
        warm_row: list[float] = []
        for u in plan.moe_unique_experts:
            routing = forced_routing(n, m.experts_per_token, u, order, m.num_experts)
            fn = moe_layer(x, weights, m.experts_per_token, routing, grouped)
            for flush, row in ((True, cold_row), (False, warm_row)):
                samples = timer.measure(fn, flush=flush, replay=True)
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
