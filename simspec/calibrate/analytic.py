"""Analytic profiles: spec-sheet peaks, assumed efficiencies, and (optionally) synthetic tables.

An analytic profile is what the simulator assumes when nothing was measured: the GPU's
spec-sheet bandwidth and bf16 throughput (the catalog, which cites the data sheets) and the
efficiencies of :class:`RooflineParams` (assumptions, each with its rationale in
``ASSUMPTION_SOURCES``). The
shipped ``calibration/h100-sxm-analytic.json`` and ``calibration/h200-analytic.json`` are exactly
this, so ``[costs] profile = "calibration/h100-sxm-analytic.json"`` reproduces the built-in
defaults to the last bit.

With a model, :func:`synthetic_tables` also fills the tables a measured run would write, each
cell computed by the roofline terms of :mod:`~simspec.costs.kernels` (the same functions the
cost model uses), the MoE cells in the form ``params.moe_kernel`` (the default, ``launch``,
unless a caller asks for ``saturation``). That is how the tests check that the fit recovers
known parameters and that the calibrated model reproduces the roofline on its own grid.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simspec.costs.kernels import attention_core_s, routed_experts_s, weights_s
from simspec.costs.passes import target_pass_cost
from simspec.params import RooflineParams
from simspec.physics.hardware import GpuSpec
from simspec.physics.launches import table_cell_kernels
from simspec.physics.models import ModelSpec
from simspec.schema import help_of

from .plan import (
    CalibrationPlan,
    attention_layer,
    gemm_counts,
    gemm_weight_bytes,
    stack_unique_experts,
)

#: Where the assumed efficiencies come from.
ASSUMPTION_SOURCES = (
    "simspec/params RooflineParams: each default efficiency and overhead, and why it is assumed",
    "validation/KERNEL_FIT.md (the default launch form of the MoE kernel: moe_launch_s, "
    "moe_expert_s and moe_bandwidth_efficiency fitted to published fused_moe tables)",
    "https://git.kokoham.com/sleepy/ds4-nvfp4-spark/issues/4 (one-token MoE decode reaches "
    "~55-60 % of achievable bandwidth for lack of occupancy)",
    "https://www.morphllm.com/blog/morph-decode (71 % of MoE-layer time is non-GEMM work at "
    "batch 1: a large fixed per-pass overhead)",
)


def synthetic_tables(
    spec: ModelSpec, gpu: GpuSpec, params: RooflineParams, plan: CalibrationPlan
) -> dict[str, Any]:
    """The tables a measurement on ``gpu`` would give if the roofline with ``params`` were exact.

    Layer-stack points are whole roofline passes (overhead included), marked as graph replays.
    """
    shape = spec.shape
    bw = gpu.hbm_bytes_per_s
    flops_per_s = gpu.bf16_flops_per_s * params.compute_efficiency
    wb = shape.weight_bytes_per_param
    w_bw = bw * params.weight_efficiency
    # A measured cell holds its kernels' floors (simspec.physics.launches.table_kernels).
    floor = gpu.kernel_floor_s(params.cuda_graphs)
    cell_kernels = table_cell_kernels(spec.attention.kind)
    tables: dict[str, Any] = {}
    if shape.num_moe_layers:
        k = shape.experts_per_token
        time = [
            [
                float(
                    routed_experts_s(
                        shape,
                        params,
                        np.array([u]),
                        max(n * k, u),
                        bw,
                        flops_per_s,
                        latency_scale=gpu.latency_scale,
                    )[0]
                    + weights_s(shape.router_bytes, n, wb, w_bw, flops_per_s)
                    + cell_kernels["moe"] * floor
                )
                for u in plan.moe_unique_experts
            ]
            for n in plan.moe_tokens
        ]
        tables["moe"] = {
            "tokens": list(plan.moe_tokens),
            "unique_experts": list(plan.moe_unique_experts),
            "time_s": time,
            "time_s_no_flush": time,
            "expert_bytes": shape.expert_bytes,
            "expert_params": shape.expert_params,
            "experts_per_token": k,
            "router_bytes": shape.router_bytes,
            "router_flops_per_token": 2.0 * shape.router_bytes / wb,
            "kernel": "roofline (synthetic)",
        }
    group = attention_layer(spec)
    if group is not None:
        kv_bw = bw * params.kv_efficiency
        cells = [
            [
                [
                    float(
                        attention_core_s(
                            group,
                            np.full(b, float(q)),
                            np.full(b, float(s - q)),
                            kv_bw,
                            flops_per_s,
                        )
                        + cell_kernels["attention"] * floor
                    )
                    for q in plan.attention_query_tokens
                ]
                for s in plan.attention_kv_tokens
            ]
            for b in plan.attention_batch
        ]
        tables["attention"] = {
            "batch": list(plan.attention_batch),
            "kv_tokens": list(plan.attention_kv_tokens),
            "query_tokens": list(plan.attention_query_tokens),
            "time_s": cells,
            "kv_bytes_per_token": group.kv_bytes_per_token,
            "flops_per_pair": group.attention_flops_per_pair,
            "kernel": "roofline (synthetic)",
        }
    counts = gemm_counts(spec)
    tables["gemm"] = {
        name: {
            "tokens": list(plan.gemm_tokens),
            "time_s": [
                float(weights_s(nbytes, n, wb, w_bw, flops_per_s) + cell_kernels[name] * floor)
                for n in plan.gemm_tokens
            ],
            "weight_bytes": nbytes,
            "flops_per_token": 2.0 * nbytes / wb,
            "count_per_pass": counts[name],
        }
        for name, nbytes in gemm_weight_bytes(spec).items()
    }
    stack = []
    for point in plan.stack_points:
        u = stack_unique_experts(spec, point.batch * point.tokens_per_request)
        cost = target_pass_cost(
            shape,
            gpu,
            params,
            np.full(point.batch, point.tokens_per_request),
            np.full(point.batch, plan.stack_context_tokens),
            np.full(shape.num_moe_layers, u),
        )
        stack.append(
            {
                "batch": point.batch,
                "tokens_per_request": point.tokens_per_request,
                "context_tokens": plan.stack_context_tokens,
                "unique_experts": u,
                "mode": "graph",
                "use": point.use,
                "time_s": cost.total_s,
            }
        )
    tables["stack"] = stack
    return tables


def assumed_provenance() -> dict[str, str]:
    """Per field: "assumed" and the help text that says why (RooflineParams' documentation)."""
    helps = help_of(RooflineParams)
    return {name: f"assumed: {helps[name]}" for name in helps}
