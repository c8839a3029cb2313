"""Dense-GEMM and ceiling microbenchmarks (imports torch).

``gemm`` (tokens n), one table per weight group: the attention projections (per attention
kind), shared expert, dense FFN and LM head as the GEMMs ``x @ W`` a pass runs (inputs random,
shapes exact; :func:`simspec.calibrate.plan.gemm_matrices`).

``ceilings``: the device's copy bandwidth (bytes read + written per second) and the throughput
of a large square bf16 matmul: the peaks when the device is not in the catalog, and the compute
efficiency when no table cell is compute-bound (:mod:`simspec.fit.tables`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from simspec.physics.models import ModelSpec

from .common import Progress, RandomTensors, RawRows, Timer
from .plan import CalibrationPlan, gemm_counts, gemm_matrices, gemm_weight_bytes
from .timing import median


def gemm_call(
    inputs: Sequence[torch.Tensor], weights: Sequence[torch.Tensor]
) -> Callable[[], list[torch.Tensor]]:
    """The GEMMs ``x @ W`` of one table, back to back."""

    def run() -> list[torch.Tensor]:
        return [x @ w for x, w in zip(inputs, weights, strict=True)]

    return run


def bench_gemm(
    spec: ModelSpec,
    plan: CalibrationPlan,
    timer: Timer,
    rand: RandomTensors,
    progress: Progress,
) -> tuple[dict[str, Any], RawRows]:
    """One table per weight group (attention projections, shared expert, dense FFN, LM head)."""
    tables: dict[str, Any] = {}
    raw: RawRows = []
    nbytes, counts = gemm_weight_bytes(spec), gemm_counts(spec)
    wb = spec.shape.weight_bytes_per_param
    for name, matrices in gemm_matrices(spec).items():
        weights = [rand(i, o) for i, o in matrices]
        times: list[float] = []
        for n in plan.gemm_tokens:
            inputs = [rand(n, i, scale=1.0) for i, _ in matrices]
            samples = timer.measure(gemm_call(inputs, weights), replay=True)
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


def bench_ceilings(
    plan: CalibrationPlan, timer: Timer, rand: RandomTensors
) -> tuple[dict[str, float], RawRows]:
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
    raw: RawRows = [{"benchmark": "copy", "rep": r, "time_s": t} for r, t in enumerate(copy)]
    raw += [{"benchmark": "matmul", "rep": r, "time_s": t} for r, t in enumerate(matmul)]
    return ceilings, raw
