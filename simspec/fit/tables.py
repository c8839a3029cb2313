"""Fit the roofline's efficiencies to measured tables (numpy and scipy, no torch).

Every table cell is one kernel (or one MoE layer) whose bytes and FLOPs are known from the
shapes, so the roofline predicts it from the efficiencies (:mod:`simspec.costs.kernels`):

    GEMM cell        max(bytes / (eta_w·BW), flops / (eta_c·F))
    MoE cell (n, U)  moe_layer_s(U, rows = n·k_e) + router GEMM          (:mod:`.moe`)
    attention cell   max(kv_bytes / (eta_kv·BW), pair_flops / (eta_c·F))

BW and F are the profile's peaks. The fit minimises the sum of squared log errors (a 10 µs kernel
counts as much as a 10 ms one) by coordinate descent: eta_w on the GEMM cells, the MoE form's
constants on the MoE cells, eta_kv on the attention cells, eta_c on all cells, each a coarse
log-space grid refined by Brent's method (:mod:`._search`). The other MoE form's constants are
fitted afterwards with the same efficiencies, so a scenario that switches forms still gets
fitted constants. eta_c is identified only when some cell is compute-bound; otherwise it comes
from the measured matmul ceiling (or stays assumed), and the provenance says so.

The fixed per-pass overhead is what the tables do not explain: the median, over the layer-stack
points marked "fit", of the measured stack time minus the prediction without overhead (the
prediction includes every kernel's floor from the GPU catalog, :mod:`simspec.physics.launches`,
so the overhead is the host time beyond them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from simspec.params import MOE_KERNEL_FORMS, RooflineParams

from ._search import EFFICIENCY_RANGE, log_efficiency_search, sse
from .moe import (
    FORM_KEYS,
    compute_bound_cells,
    fit_moe_form,
    moe_cells,
    moe_pred,
    per_expert_s,
    work_s,
)

__all__ = ["TableFit", "fit_efficiencies", "fit_overhead"]


@dataclass(frozen=True, slots=True)
class _Cells:
    """Flattened table cells: memory bytes, FLOPs, measured time, weight (per-pass count)."""

    nbytes: np.ndarray
    flops: np.ndarray
    time_s: np.ndarray
    weight: np.ndarray


@dataclass(frozen=True)
class TableFit:
    """Fitted parameters, per-field provenance, and numbers that describe the fit."""

    params: RooflineParams
    provenance: dict[str, str]
    details: dict[str, float] = field(default_factory=dict)


def _gemm_cells(tables: Mapping[str, Any], floors: Mapping[str, float]) -> _Cells | None:
    parts: list[tuple[float, float, float, float]] = []
    for name, table in tables.get("gemm", {}).items():
        for n, t in zip(table["tokens"], table["time_s"], strict=True):
            flops = n * table["flops_per_token"]
            work = work_s(t, floors.get(name, 0.0))
            if work is not None:
                parts.append((table["weight_bytes"], flops, work, table.get("count_per_pass", 1)))
    if not parts:
        return None
    a = np.array(parts, dtype=float)
    return _Cells(a[:, 0], a[:, 1], a[:, 2], a[:, 3])


def _attention_cells(tables: Mapping[str, Any], floor_s: float) -> _Cells | None:
    t = tables.get("attention")
    if not t:
        return None
    parts = []
    for i, b in enumerate(t["batch"]):
        for j, s in enumerate(t["kv_tokens"]):
            for k, q in enumerate(t["query_tokens"]):
                kv = b * s * t["kv_bytes_per_token"]
                flops = b * q * s * t["flops_per_pair"]
                work = work_s(t["time_s"][i][j][k], floor_s)
                if work is not None:
                    parts.append((kv, flops, work, 1.0))
    if not parts:
        return None
    a = np.array(parts, dtype=float)
    return _Cells(a[:, 0], a[:, 1], a[:, 2], a[:, 3])


def _dense_pred(c: _Cells, eta_mem: float, eta_c: float, bw: float, peak: float) -> np.ndarray:
    return np.maximum(c.nbytes / (eta_mem * bw), c.flops / (eta_c * peak))


def fit_efficiencies(
    tables: Mapping[str, Any],
    *,
    peak_bytes_per_s: float,
    peak_flops_per_s: float,
    assumed: RooflineParams,
    matmul_flops_per_s: float | None = None,
    cell_floors_s: Mapping[str, float] | None = None,
    rounds: int = 4,
) -> TableFit:
    """Fit eta_w, eta_kv, eta_c and the MoE kernel's constants to ``tables`` (module docstring).

    Parameters
    ----------
    tables : mapping
        The profile's ``tables`` section (``moe``, ``attention``, ``gemm`` as written by
        :mod:`simspec.calibrate.run` or :mod:`simspec.calibrate.analytic`).
    peak_bytes_per_s, peak_flops_per_s : float
        BW and F that the efficiencies are fractions of.
    assumed : RooflineParams
        Values kept for what the tables cannot identify (overheads, communication, the launch
        form's per-expert time, and any efficiency whose table is missing); its ``moe_kernel``
        is the form the profile is fitted for.
    matmul_flops_per_s : float, optional
        Measured big-matmul throughput, used for eta_c when no cell is compute-bound.
    cell_floors_s : mapping, optional
        Per table (``moe``, ``attention`` and each GEMM table's name), the floors of the kernels
        one cell runs (:func:`simspec.physics.launches.table_cell_kernels` x the GPU's graph
        floor): they are taken off each measured time before the efficiencies are fitted, as
        the cost model charges them apart (``floors_s``).

    Returns
    -------
    TableFit
        ``params`` keeps ``assumed``'s overheads (see :func:`fit_overhead`).
    """
    bw, peak = peak_bytes_per_s, peak_flops_per_s
    floors = dict(cell_floors_s or {})
    gemm = _gemm_cells(tables, floors)
    attn = _attention_cells(tables, floors.get("attention", 0.0))
    moe = moe_cells(tables, floors.get("moe", 0.0))
    form = assumed.moe_kernel
    provenance = {
        "pass_overhead_s": "assumed (no layer-stack measurement)",
        "draft_step_overhead_s": "assumed: the profile measures the target model, not the drafter",
        "comm_s_per_layer": "assumed: single-GPU calibration measures no collectives",
        "fp8_moe_s_per_layer": "assumed: an engine's own FP8 MoE path (its preset sets it), "
        "not the measured kernels'",
        "moe_kernel": f"the MoE kernel form this profile is fitted for ({form}; "
        "simspec calibrate --moe-kernel)",
    }
    details: dict[str, float] = {}
    eta_w, eta_kv = assumed.weight_efficiency, assumed.kv_efficiency
    eta_c = assumed.compute_efficiency
    moe_params = assumed  # carries the MoE form's constants through the rounds

    implied = []  # compute efficiency each cell would imply if it were compute-bound
    for cells in (gemm, attn):
        if cells is not None:
            implied.append(cells.flops / (peak * cells.time_s))
    if moe is not None:
        implied.append(2.0 * moe.rows * moe.expert_params / (peak * moe.time_s))
    if implied:
        eta_c = float(np.clip(np.max(np.concatenate(implied)), *EFFICIENCY_RANGE))

    def gemm_sse(e_w: float, e_c: float) -> float:
        assert gemm is not None
        return sse(_dense_pred(gemm, e_w, e_c, bw, peak), gemm.time_s, gemm.weight)

    def attention_sse(e_kv: float, e_c: float) -> float:
        assert attn is not None
        return sse(_dense_pred(attn, e_kv, e_c, bw, peak), attn.time_s)

    def total_sse(e_c: float, e_w: float, e_kv: float, p: RooflineParams) -> float:
        total = 0.0
        if gemm is not None:
            total += gemm_sse(e_w, e_c)
        if attn is not None:
            total += attention_sse(e_kv, e_c)
        if moe is not None:
            total += sse(moe_pred(moe, p, e_w, e_c, bw, peak), moe.time_s)
        return total

    for _ in range(rounds):
        if gemm is not None:
            eta_w = log_efficiency_search(partial(gemm_sse, e_c=eta_c))
        if moe is not None:
            moe_params = fit_moe_form(moe, moe_params, eta_w, eta_c, bw, peak)
        if attn is not None:
            eta_kv = log_efficiency_search(partial(attention_sse, e_c=eta_c))
        if implied:
            eta_c = log_efficiency_search(partial(total_sse, e_w=eta_w, e_kv=eta_kv, p=moe_params))

    # Is eta_c identified? Only if some cell is compute-bound at the fitted parameters.
    bound = 0
    for dense, eta_mem in ((gemm, eta_w), (attn, eta_kv)):
        if dense is not None:
            bound += int(np.sum(dense.flops / (eta_c * peak) > dense.nbytes / (eta_mem * bw)))
    if moe is not None:
        bound += compute_bound_cells(moe, moe_params, eta_c, bw, peak)
    details["compute_bound_cells"] = float(bound)
    if bound:
        provenance["compute_efficiency"] = f"fitted ({bound} compute-bound cells)"
    elif matmul_flops_per_s:
        eta_c = min(1.0, matmul_flops_per_s / peak)
        provenance["compute_efficiency"] = (
            "measured: big bf16 matmul / peak (no compute-bound cell)"
        )
    else:
        eta_c = assumed.compute_efficiency
        provenance["compute_efficiency"] = "assumed (no compute-bound cell, no matmul ceiling)"
    provenance["weight_efficiency"] = "fitted to the dense GEMM tables" if gemm else "assumed"
    provenance["kv_efficiency"] = "fitted to the attention table" if attn else "assumed"
    params = replace(
        assumed, weight_efficiency=eta_w, kv_efficiency=eta_kv, compute_efficiency=eta_c
    )
    residuals = {}
    for name in MOE_KERNEL_FORMS:  # the other form is fitted with the same efficiencies
        for key in FORM_KEYS[name]:
            where = "" if name == form else f", for moe_kernel = {name!r} (not this profile's form)"
            provenance[key] = f"fitted to the MoE table (flushed L2){where}" if moe else "assumed"
        if moe is None:
            continue
        p = moe_params if name == form else replace(moe_params, moe_kernel=name)
        if name != form:
            p = fit_moe_form(moe, p, eta_w, eta_c, bw, peak)
        params = replace(params, **{key: getattr(p, key) for key in FORM_KEYS[name]})
        r = np.log(moe_pred(moe, p, eta_w, eta_c, bw, peak) / moe.time_s)
        details[f"moe_{name}_rms_log_error"] = float(np.sqrt(np.mean(r * r)))
        if name == form:
            residuals["moe"] = r
    provenance["moe_expert_s"] = (
        "assumed (validation/KERNEL_FIT.md, five expert sizes): with one expert size only "
        "moe_expert_s + bytes / (moe_bandwidth_efficiency·BW) is identified"
    )
    if moe is not None:
        details["moe_launch_per_expert_s"] = per_expert_s(params, moe.expert_bytes, bw)
    if gemm is not None:
        residuals["gemm"] = np.log(_dense_pred(gemm, eta_w, eta_c, bw, peak) / gemm.time_s)
    if attn is not None:
        residuals["attention"] = np.log(_dense_pred(attn, eta_kv, eta_c, bw, peak) / attn.time_s)
    for name, r in residuals.items():
        details[f"{name}_rms_log_error"] = float(np.sqrt(np.mean(r * r)))
        details[f"{name}_cells"] = float(len(r))
    return TableFit(params, provenance, details)


def fit_overhead(
    stack: list[Mapping[str, Any]], predict_without_overhead_s: Callable[[Mapping[str, Any]], float]
) -> tuple[float | None, dict[str, float]]:
    """Fixed per-pass overhead from the stack points marked "fit" (module docstring).

    Returns
    -------
    overhead_s : float or None
        None when there is no "fit" point.
    details : dict
        The overhead each mode (eager, graph) implies.
    """
    details: dict[str, float] = {}
    by_mode: dict[str, list[float]] = {}
    for row in stack:
        if row["use"] != "fit":
            continue
        by_mode.setdefault(row["mode"], []).append(row["time_s"] - predict_without_overhead_s(row))
    for mode, values in by_mode.items():
        details[f"overhead_{mode}_s"] = float(np.median(values))
    chosen = by_mode.get("graph") or by_mode.get("eager")
    if not chosen:
        return None, details
    return max(0.0, float(np.median(chosen))), details
