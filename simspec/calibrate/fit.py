"""Fit the roofline's efficiencies to measured tables (numpy and scipy, no torch).

Every table cell is one kernel (or one MoE layer) whose bytes and FLOPs are known from the
shapes, so the roofline predicts it from the efficiencies (:mod:`simspec.costs.kernels`):

    GEMM cell        max(bytes / (eta_w·BW), flops / (eta_c·F))
    MoE cell (n, U)  max(U·bytes_expert / (eta_moe(U)·BW), 2·rows·P_expert / (eta_c·F))
                     + router GEMM,   eta_moe(U) = eta_max·(1 − exp(−U·bytes_expert / S))
    attention cell   max(kv_bytes / (eta_kv·BW), pair_flops / (eta_c·F))

BW and F are the profile's peaks (spec sheet for a catalog GPU). The fit minimises the sum of
squared log errors (relative errors, so a 10 µs kernel counts as much as a 10 ms one), one
parameter at a time with the others fixed (coordinate descent, a few rounds): eta_w on the GEMM
cells, (eta_max, S) on the MoE cells, eta_kv on the attention cells, eta_c on all cells. Each
one-dimensional search is a coarse grid in log space refined by Brent's bounded method
(``scipy.optimize.minimize_scalar``), so it cannot get stuck in a far local minimum; eta_moe(U)
is :func:`simspec.costs.params.moe_efficiency`, the cost model's own definition. eta_c is
identified only when some cell is compute-bound; otherwise it is taken from the measured matmul
ceiling (or kept as assumed), and the provenance says so.

The fixed per-pass overhead is what the tables do not explain: the median, over the layer-stack
points marked "fit" (one token: CUDA-graph replay when available, else eager), of the measured
stack time minus the calibrated cost model's prediction without overhead.

A synthetic profile generated from known parameters (:mod:`simspec.calibrate.analytic`) is
fitted back to them; the tests check it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
from scipy import optimize

from simspec.costs.params import RooflineParams, moe_efficiency

EFFICIENCY_RANGE = (0.002, 1.0)
#: Absolute tolerance of the bounded searches, in log space (relative error of the argmin).
LOG_XATOL = 1e-12


def grid_then_bounded(
    f: Callable[[float], float], lo: float, hi: float, *, grid: int = 41
) -> float:
    """Argmin of ``f`` on [lo, hi]: the best of a ``grid``-point scan, refined by Brent's method.

    The scan keeps the search away from far local minima; the refinement is
    ``scipy.optimize.minimize_scalar(method="bounded")`` between the best point's neighbours.

    >>> round(grid_then_bounded(lambda x: (x - 0.3) ** 2, 0.0, 1.0), 6)
    0.3
    """
    xs = np.linspace(lo, hi, grid)
    values = [f(float(x)) for x in xs]
    best = int(np.argmin(values))
    center = float(xs[best])
    a = float(xs[max(best - 1, 0)]) - center
    b = float(xs[min(best + 1, grid - 1)]) - center
    # Search the offset from the best grid point: Brent's tolerance has a relative term
    # (sqrt(eps)·|x|), which is then tiny, so ``LOG_XATOL`` sets the precision.
    result = optimize.minimize_scalar(
        lambda d: f(center + d),
        bounds=(a, b),
        method="bounded",
        options={"xatol": LOG_XATOL, "maxiter": 500},
    )
    x = center + float(result.x)
    return x if f(x) <= values[best] else center


def _log_efficiency_search(f: Callable[[float], float]) -> float:
    """Minimise ``f(eta)`` over eta in EFFICIENCY_RANGE, searching log(eta)."""
    lo, hi = (math.log(v) for v in EFFICIENCY_RANGE)
    return math.exp(grid_then_bounded(lambda x: f(math.exp(x)), lo, hi))


@dataclass(frozen=True, slots=True)
class _Cells:
    """Flattened table cells: memory bytes, FLOPs, measured time, weight (per-pass count)."""

    nbytes: np.ndarray
    flops: np.ndarray
    time_s: np.ndarray
    weight: np.ndarray


@dataclass(frozen=True, slots=True)
class _MoeCells:
    unique: np.ndarray
    rows: np.ndarray
    tokens: np.ndarray
    time_s: np.ndarray
    expert_bytes: float
    expert_params: float
    router_bytes: float
    router_flops_per_token: float


@dataclass(frozen=True)
class FitResult:
    """Fitted parameters, per-field provenance, and numbers that describe the fit."""

    params: RooflineParams
    provenance: dict[str, str]
    details: dict[str, float] = field(default_factory=dict)


def _gemm_cells(tables: Mapping[str, Any]) -> _Cells | None:
    parts: list[tuple[float, float, float, float]] = []
    for table in tables.get("gemm", {}).values():
        for n, t in zip(table["tokens"], table["time_s"], strict=True):
            flops = n * table["flops_per_token"]
            parts.append((table["weight_bytes"], flops, t, table.get("count_per_pass", 1)))
    if not parts:
        return None
    a = np.array(parts, dtype=float)
    return _Cells(a[:, 0], a[:, 1], a[:, 2], a[:, 3])


def _attention_cells(tables: Mapping[str, Any]) -> _Cells | None:
    t = tables.get("attention")
    if not t:
        return None
    parts = []
    for i, b in enumerate(t["batch"]):
        for j, s in enumerate(t["kv_tokens"]):
            for k, q in enumerate(t["query_tokens"]):
                kv = b * s * t["kv_bytes_per_token"]
                flops = b * q * s * t["flops_per_pair"]
                parts.append((kv, flops, t["time_s"][i][j][k], 1.0))
    a = np.array(parts, dtype=float)
    return _Cells(a[:, 0], a[:, 1], a[:, 2], a[:, 3])


def _moe_cells(tables: Mapping[str, Any]) -> _MoeCells | None:
    t = tables.get("moe")
    if not t:
        return None
    k = t["experts_per_token"]
    u, rows, n, time_s = [], [], [], []
    for i, tokens in enumerate(t["tokens"]):
        for j, unique in enumerate(t["unique_experts"]):
            u.append(unique)
            rows.append(max(tokens * k, unique))  # see bench: one row per otherwise idle expert
            n.append(tokens)
            time_s.append(t["time_s"][i][j])
    return _MoeCells(
        np.array(u, dtype=float),
        np.array(rows, dtype=float),
        np.array(n, dtype=float),
        np.array(time_s, dtype=float),
        float(t["expert_bytes"]),
        float(t["expert_params"]),
        float(t["router_bytes"]),
        float(t["router_flops_per_token"]),
    )


def _sse(predicted: np.ndarray, cells_time: np.ndarray, weight: np.ndarray | None = None) -> float:
    r = np.log(predicted) - np.log(cells_time)
    return float(np.sum(r * r if weight is None else weight * r * r))


def _dense_pred(c: _Cells, eta_mem: float, eta_c: float, bw: float, peak: float) -> np.ndarray:
    return np.maximum(c.nbytes / (eta_mem * bw), c.flops / (eta_c * peak))


def _moe_pred(
    c: _MoeCells,
    eta_max: float,
    saturation_bytes: float,
    eta_w: float,
    eta_c: float,
    bw: float,
    peak: float,
) -> np.ndarray:
    eta = moe_efficiency(c.unique, c.expert_bytes, eta_max, saturation_bytes)
    routed = np.maximum(
        c.unique * c.expert_bytes / (eta * bw), 2.0 * c.rows * c.expert_params / (eta_c * peak)
    )
    router = np.maximum(
        c.router_bytes / (eta_w * bw), c.tokens * c.router_flops_per_token / (eta_c * peak)
    )
    return routed + router


def fit_efficiencies(
    tables: Mapping[str, Any],
    *,
    peak_bytes_per_s: float,
    peak_flops_per_s: float,
    assumed: RooflineParams,
    matmul_flops_per_s: float | None = None,
    rounds: int = 4,
) -> FitResult:
    """Fit eta_w, eta_kv, eta_c and the eta_moe(U) curve to ``tables`` (module docstring).

    Parameters
    ----------
    tables : mapping
        The profile's ``tables`` section (``moe``, ``attention``, ``gemm`` as written by
        :mod:`simspec.calibrate.run` or :mod:`simspec.calibrate.analytic`).
    peak_bytes_per_s, peak_flops_per_s : float
        BW and F that the efficiencies are fractions of.
    assumed : RooflineParams
        Values kept for what the tables cannot identify (overheads, communication, and any
        efficiency whose table is missing).
    matmul_flops_per_s : float, optional
        Measured big-matmul throughput, used for eta_c when no cell is compute-bound.

    Returns
    -------
    FitResult
        ``params`` keeps ``assumed``'s overheads (see :func:`fit_overhead`).
    """
    bw, peak = peak_bytes_per_s, peak_flops_per_s
    gemm, attn, moe = _gemm_cells(tables), _attention_cells(tables), _moe_cells(tables)
    provenance = {
        "pass_overhead_s": "assumed (no layer-stack measurement)",
        "draft_step_overhead_s": "assumed: the profile measures the target model, not the drafter",
        "comm_s_per_layer": "assumed: single-GPU calibration measures no collectives",
    }
    details: dict[str, float] = {}
    eta_w, eta_kv = assumed.weight_efficiency, assumed.kv_efficiency
    eta_c = assumed.compute_efficiency
    eta_max, sat = assumed.moe_efficiency_max, assumed.moe_saturation_bytes

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
        return _sse(_dense_pred(gemm, e_w, e_c, bw, peak), gemm.time_s, gemm.weight)

    def attention_sse(e_kv: float, e_c: float) -> float:
        assert attn is not None
        return _sse(_dense_pred(attn, e_kv, e_c, bw, peak), attn.time_s)

    def moe_sse(e_max: float, s: float, e_w: float, e_c: float) -> float:
        assert moe is not None
        return _sse(_moe_pred(moe, e_max, s, e_w, e_c, bw, peak), moe.time_s)

    def best_moe_max(s: float, e_w: float, e_c: float) -> float:
        return _log_efficiency_search(partial(moe_sse, s=s, e_w=e_w, e_c=e_c))

    def moe_sse_at(log_s: float, e_w: float, e_c: float) -> float:
        s = math.exp(log_s)
        return moe_sse(best_moe_max(s, e_w, e_c), s, e_w, e_c)

    def total_sse(e_c: float, e_w: float, e_kv: float, e_max: float, s: float) -> float:
        total = 0.0
        if gemm is not None:
            total += gemm_sse(e_w, e_c)
        if attn is not None:
            total += attention_sse(e_kv, e_c)
        if moe is not None:
            total += moe_sse(e_max, s, e_w, e_c)
        return total

    for _ in range(rounds):
        if gemm is not None:
            eta_w = _log_efficiency_search(partial(gemm_sse, e_c=eta_c))
        if moe is not None:
            lo = math.log(moe.expert_bytes * 0.01)
            hi = math.log(moe.expert_bytes * 1000.0)
            objective = partial(moe_sse_at, e_w=eta_w, e_c=eta_c)
            sat = math.exp(grid_then_bounded(objective, lo, hi, grid=31))
            eta_max = best_moe_max(sat, eta_w, eta_c)
        if attn is not None:
            eta_kv = _log_efficiency_search(partial(attention_sse, e_c=eta_c))
        if implied:
            eta_c = _log_efficiency_search(
                partial(total_sse, e_w=eta_w, e_kv=eta_kv, e_max=eta_max, s=sat)
            )

    # Is eta_c identified? Only if some cell is compute-bound at the fitted parameters.
    bound = 0
    for dense, eta_mem in ((gemm, eta_w), (attn, eta_kv)):
        if dense is not None:
            bound += int(np.sum(dense.flops / (eta_c * peak) > dense.nbytes / (eta_mem * bw)))
    if moe is not None:
        eta = moe_efficiency(moe.unique, moe.expert_bytes, eta_max, sat)
        mem = moe.unique * moe.expert_bytes / (eta * bw)
        bound += int(np.sum(2.0 * moe.rows * moe.expert_params / (eta_c * peak) > mem))
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
    for key in ("moe_efficiency_max", "moe_saturation_bytes"):
        provenance[key] = "fitted to the MoE table (flushed L2)" if moe else "assumed"
    params = replace(
        assumed,
        weight_efficiency=eta_w,
        kv_efficiency=eta_kv,
        compute_efficiency=eta_c,
        moe_efficiency_max=eta_max,
        moe_saturation_bytes=sat,
    )
    residuals = {}
    if gemm is not None:
        residuals["gemm"] = np.log(_dense_pred(gemm, eta_w, eta_c, bw, peak) / gemm.time_s)
    if attn is not None:
        residuals["attention"] = np.log(_dense_pred(attn, eta_kv, eta_c, bw, peak) / attn.time_s)
    if moe is not None:
        pred = _moe_pred(moe, eta_max, sat, eta_w, eta_c, bw, peak)
        residuals["moe"] = np.log(pred / moe.time_s)
    for name, r in residuals.items():
        details[f"{name}_rms_log_error"] = float(np.sqrt(np.mean(r * r)))
        details[f"{name}_cells"] = float(len(r))
    return FitResult(params, provenance, details)


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
