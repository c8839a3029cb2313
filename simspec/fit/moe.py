"""Fit the routed-expert kernel's constants to the measured MoE-layer table, in either form.

A cell of the MoE table is one MoE layer at (tokens n, unique experts U): the router GEMM plus
the grouped experts over rows = max(n·k_e, U) (token, expert) rows. Its prediction is the cost
model's own, :func:`simspec.costs.moe_kernel.moe_layer_s` for the form named by
``params.moe_kernel``, plus the router's roofline:

    cell(n, U) = moe_layer_s(params, U, rows) + max(router_bytes / (eta_w·BW), 2·n·h·N / (eta_c·F))

Each form has the constants the table identifies (:data:`FORM_KEYS`), fitted by minimising the
squared log error over the cells with the dense efficiencies held (the caller's coordinate
descent updates those):

``saturation``
    (eta_max, S): S by a log-space scan refined by Brent's method, and eta_max, for each S, the
    same way over the efficiency range.
``launch``
    (t0, eta_bw): the form is t0 + max(m, c) + theta·min(m, c) with m = U·c_e + bytes /
    (eta_bw·BW) and c the FLOPs' time (:mod:`simspec.costs.moe_kernel`), so for each eta_bw
    (log-space scan + Brent) the cells are t0 + g(eta_bw) with g the prediction at t0 = 0,
    and t0 is a one-dimensional search in log space below the smallest cell.
    The per-expert time c_e (``moe_expert_s``) is **not** fitted: one model has one expert
    size, so U·c_e + U·b / (eta_bw·BW) = U·(c_e + b / (eta_bw·BW)) and only the sum is
    identified. c_e keeps its assumed value (the cross-shape fit of
    ``validation/KERNEL_FIT.md``, where five expert sizes separate the two) and eta_bw absorbs
    the rest; :func:`per_expert_s` is the identified quantity. The exposed fraction theta
    (``moe_exposed_fraction``) keeps its assumed value too: it is the cross-shape fit's, from
    rows whose FLOPs take as long as their bytes, which one model's table holds few of.

Re-reads of co-routed experts (``moe_l2_reuse``) are priced with no L2 (``l2_bytes = 0``): the
table's ``time_s`` flushes L2 between repetitions, and under the default ``ideal`` setting
re-reads cost nothing anyway.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np

from simspec.costs.moe_kernel import moe_layer_s
from simspec.params import RooflineParams

from ._search import grid_then_bounded, log_efficiency_search, sse

#: The constants of each form that one MoE table identifies (module docstring).
FORM_KEYS = {
    "saturation": ("moe_efficiency_max", "moe_saturation_bytes"),
    "launch": ("moe_launch_s", "moe_bandwidth_efficiency"),
}
#: Search range of the launch form's fixed time t0, s (below: a kernel-free layer).
LAUNCH_S_MIN = 1e-9
#: The launch constant's upper bound (``moe_launch_s`` < 0.01 s), kept strictly inside.
LAUNCH_S_MAX = 0.01 * (1.0 - 1e-9)


@dataclass(frozen=True, slots=True)
class MoeCells:
    """The MoE table flattened to cells (one entry per (tokens, unique experts))."""

    unique: np.ndarray
    rows: np.ndarray
    tokens: np.ndarray
    time_s: np.ndarray
    expert_bytes: float
    expert_params: float
    router_bytes: float
    router_flops_per_token: float


def work_s(time_s: float, floors_s: float) -> float | None:
    """A cell's time less its kernels' floors, or None for a cell the floors dominate (its work
    under half its floors: it says little about bandwidth, and noise could make it negative)."""
    work = time_s - floors_s
    return work if work >= 0.5 * floors_s and work > 0 else None


def moe_cells(tables: Mapping[str, Any], floors_s: float = 0.0) -> MoeCells | None:
    """The flushed cells of ``tables["moe"]`` less ``floors_s`` (the floors of the router and
    top-k kernels, which the cost model charges apart; cells under 1.5x the floors are left
    out), or None without an MoE table."""
    t = tables.get("moe")
    if not t:
        return None
    k = t["experts_per_token"]
    u, rows, n, time_s = [], [], [], []
    for i, tokens in enumerate(t["tokens"]):
        for j, unique in enumerate(t["unique_experts"]):
            work = work_s(t["time_s"][i][j], floors_s)
            if work is None:  # floor-dominated: no information
                continue
            u.append(unique)
            rows.append(max(tokens * k, unique))  # see bench: one row per otherwise idle expert
            n.append(tokens)
            time_s.append(work)
    if not u:
        return None
    return MoeCells(
        np.array(u, dtype=float),
        np.array(rows, dtype=float),
        np.array(n, dtype=float),
        np.array(time_s, dtype=float),
        float(t["expert_bytes"]),
        float(t["expert_params"]),
        float(t["router_bytes"]),
        float(t["router_flops_per_token"]),
    )


def routed_s(
    c: MoeCells, params: RooflineParams, eta_c: float, bw: float, peak: float
) -> np.ndarray:
    """The grouped experts of every cell: the cost model's form ``params.moe_kernel``."""
    # Every form is a numpy expression in ``rows``: an array prices each cell at its own rows.
    return moe_layer_s(
        params,
        c.unique,
        cast(float, c.rows),
        expert_bytes=c.expert_bytes,
        expert_params=c.expert_params,
        bandwidth=bw,
        flops_per_s=eta_c * peak,
    )


def moe_pred(
    c: MoeCells, params: RooflineParams, eta_w: float, eta_c: float, bw: float, peak: float
) -> np.ndarray:
    """Predicted time of every cell: routed experts + router GEMM (module docstring)."""
    router = np.maximum(
        c.router_bytes / (eta_w * bw), c.tokens * c.router_flops_per_token / (eta_c * peak)
    )
    return routed_s(c, params, eta_c, bw, peak) + router


def compute_bound_cells(
    c: MoeCells, params: RooflineParams, eta_c: float, bw: float, peak: float
) -> int:
    """Cells whose routed experts' FLOPs are their longer phase (FLOPs bind there): they take
    longer than with infinite FLOP/s even were the phases to overlap fully."""
    overlapped = replace(params, moe_exposed_fraction=0.0)
    with_flops = routed_s(c, overlapped, eta_c, bw, peak)
    memory_only = routed_s(c, overlapped, math.inf, bw, peak)
    return int(np.sum(with_flops > memory_only))


def per_expert_s(params: RooflineParams, expert_bytes: float, bw: float) -> float:
    """Launch form: the identified time per distinct expert, c_e + b / (eta_bw·BW), s."""
    return params.moe_expert_s + expert_bytes / (params.moe_bandwidth_efficiency * bw)


def _fit_saturation(
    c: MoeCells, params: RooflineParams, eta_w: float, eta_c: float, bw: float, peak: float
) -> RooflineParams:
    def error(eta_max: float, s: float) -> float:
        p = replace(params, moe_efficiency_max=eta_max, moe_saturation_bytes=s)
        return sse(moe_pred(c, p, eta_w, eta_c, bw, peak), c.time_s)

    def best_max(s: float) -> float:
        return log_efficiency_search(lambda e: error(e, s))

    def error_at(log_s: float) -> float:
        s = math.exp(log_s)
        return error(best_max(s), s)

    lo, hi = math.log(c.expert_bytes * 0.01), math.log(c.expert_bytes * 1000.0)
    s = math.exp(grid_then_bounded(error_at, lo, hi, grid=31))
    return replace(params, moe_efficiency_max=best_max(s), moe_saturation_bytes=s)


def _fit_launch(
    c: MoeCells, params: RooflineParams, eta_w: float, eta_c: float, bw: float, peak: float
) -> RooflineParams:
    hi = math.log(min(LAUNCH_S_MAX, max(float(np.min(c.time_s)), LAUNCH_S_MIN * 10.0)))
    lo = math.log(LAUNCH_S_MIN)

    def rest(eta_bw: float) -> np.ndarray:  # every cell at t0 = 0
        p = replace(params, moe_launch_s=0.0, moe_bandwidth_efficiency=eta_bw)
        return moe_pred(c, p, eta_w, eta_c, bw, peak)

    def best_t0(g: np.ndarray) -> float:
        return math.exp(grid_then_bounded(lambda x: sse(math.exp(x) + g, c.time_s), lo, hi))

    def error(eta_bw: float) -> float:
        g = rest(eta_bw)
        return sse(best_t0(g) + g, c.time_s)

    eta_bw = log_efficiency_search(error)
    return replace(params, moe_launch_s=best_t0(rest(eta_bw)), moe_bandwidth_efficiency=eta_bw)


def fit_moe_form(
    c: MoeCells, params: RooflineParams, eta_w: float, eta_c: float, bw: float, peak: float
) -> RooflineParams:
    """``params`` with the constants of its form (:data:`FORM_KEYS`) fitted to the cells.

    Examples
    --------
    Cells made by the launch form with t0 = 20 µs and eta_bw = 0.8 give them back:

    >>> p = RooflineParams(moe_kernel="launch", moe_launch_s=2e-5, moe_bandwidth_efficiency=0.8)
    >>> u = np.array([8.0, 32.0, 128.0] * 2)
    >>> n = np.array([1.0] * 3 + [64.0] * 3)
    >>> c = MoeCells(u, np.maximum(8 * n, u), n, np.zeros(6), 9.4e6, 4.7e6, 4e5, 2e5)
    >>> c = replace(c, time_s=moe_pred(c, p, 0.7, 0.6, 3.35e12, 9.89e14))
    >>> q = fit_moe_form(c, RooflineParams(), 0.7, 0.6, 3.35e12, 9.89e14)
    >>> round(q.moe_launch_s * 1e6, 6), round(q.moe_bandwidth_efficiency, 6)
    (20.0, 0.8)
    """
    fit = _fit_saturation if params.moe_kernel == "saturation" else _fit_launch
    return fit(c, params, eta_w, eta_c, bw, peak)
