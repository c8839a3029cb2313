"""Reference IPF loops, the oracles the package's fast fit is tested against.

:func:`classical_ipf` rakes the dense table of the 2^T patterns of one expert (Deming & Stephan
1940), exponential in T; :func:`fit_factors` is the same iterates in product form, lag by lag,
one pass per margin (O(T·D·2^{D+1}) per sweep); :func:`log_silent_from_factors` reads
log P(silent) off its factors. :mod:`simspec.routing.ipf` must give the same numbers up to
the order of floating-point summation.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from simspec.routing.ipf import MAX_SWEEPS, TOLERANCE


@functools.lru_cache(maxsize=256)
def _pair_maps(span: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """For the pair (x_{t−d}, x_t) in a window of ``span`` columns: the column → cell index
    2·x_{t−d} + x_t, and the (2, span/2) indicators of x_{t−d} over the column pairs
    (x_t is bit 0, so the columns of one pair are adjacent)."""
    cols = np.arange(span)
    cell = 2 * ((cols >> d) & 1) + (cols & 1)
    bit = ((cols[::2] >> d) & 1).astype(float)
    return cell, np.stack([1.0 - bit, bit])


def fit_factors(
    p: np.ndarray, targets: list[list[tuple[int, np.ndarray]]], tokens: int, depth: int
) -> tuple[list[np.ndarray], int]:
    """Classical IPF in product form: the factor table F_t over (x_{t−D}..x_t) of every token.

    Returns (factors, sweeps). ``factors[t]`` has shape (M, 2^{D+1}); bit d of a column index is
    x_{t−d}. The pattern law is P(x) ∝ Π_t F_t.

    Token t only works on the 2^{min(t, D+1)} columns whose tokens all exist (the others carry
    no mass and keep factor 1): the iterates of raking the dense table, up to the order of
    summation (results agree to ~1e-15 relative).
    """
    m = len(p)
    width = 1 << (depth + 1)
    # Columns and states of the window of token t (tokens before the first one do not exist).
    span = [1 << min(t, depth + 1) for t in range(tokens + 2)]
    live = [1 << min(t, depth) for t in range(tokens + 2)]
    factors = [np.ones((m, span[t])) for t in range(tokens + 1)]
    # Per token: (cell index, pair indicators, target margin, rows with a target or None = all).
    goals = [
        [
            (
                *_pair_maps(span[t], d),
                np.stack([1.0 - 2.0 * p + q, p - q, p - q, q], axis=1),
                ~np.isnan(q) if np.isnan(q).any() else None,
            )
            for d, q in targets[t]
        ]
        for t in range(tokens + 1)
    ]
    history = [np.inf]
    add = np.add
    # nan / inf from inconsistent margins are detected below, not warned about.
    with np.errstate(all="ignore"):
        for sweep in range(1, MAX_SWEEPS + 1):
            beta: list[np.ndarray] = [np.ones((m, live[t])) for t in range(tokens + 1)]
            for t in range(tokens - 1, 0, -1):
                after = beta[t + 1] if span[t + 1] == live[t + 1] else np.tile(beta[t + 1], 2)
                b = (factors[t + 1] * after).reshape(m, -1, 2).sum(axis=2)
                beta[t] = b / b.sum(axis=1, keepdims=True)
            alpha = np.ones((m, 1))
            worst = 0.0
            for t in range(1, tokens + 1):
                f = factors[t]
                before = np.repeat(alpha, 2, axis=1)
                after = beta[t] if span[t] == live[t] else np.tile(beta[t], 2)
                base = before * after
                for cell, bits, goal, valid in goals[t]:
                    joint = base * f
                    margin = (bits @ joint.reshape(m, -1, 2)).reshape(m, 4)
                    margin /= add.reduce(margin, axis=1, keepdims=True)
                    ratio = np.where(margin > 0.0, goal / margin, 0.0)
                    miss = np.abs(margin - goal)
                    if valid is not None:  # rows without this lag (nan target) are left alone
                        miss = miss[valid]
                        ratio[~valid] = 1.0
                    miss_max = float(miss.max(initial=0.0))
                    worst = max(worst, miss_max) if math.isfinite(miss_max) else np.inf
                    f *= ratio.take(cell, axis=1)
                a = before * f
                if span[t] > live[t]:  # the oldest token leaves the window
                    a = a.reshape(m, 2, live[t]).sum(axis=1)
                alpha = a / a.sum(axis=1, keepdims=True)
            if worst < TOLERANCE:
                full = [np.ones((m, width)) for _ in factors]
                for padded, f in zip(full, factors, strict=True):
                    padded[:, : f.shape[1]] = f
                return full, sweep
            # Consistent margins converge geometrically; inconsistent ones stall (or collapse the
            # table to zeros, nan). Either way no process has these overlaps.
            history.append(worst if np.isfinite(worst) else np.inf)
            stalled = sweep >= 200 and history[-1] > 1e-6 and history[-1] > 0.999 * history[-101]
            if not np.isfinite(history[-1]) or stalled or sweep == MAX_SWEEPS:
                raise ValueError(
                    "the overlap statistics cannot be matched by any routing process: IPF still "
                    f"misses a two-way margin by {worst:.2g} after {sweep} sweeps (inconsistent "
                    "lag overlaps?)"
                )
    raise AssertionError("unreachable")  # pragma: no cover


def log_silent_from_factors(factors: list[np.ndarray], tokens: int, depth: int) -> np.ndarray:
    """log P(x_1 = … = x_T = 0) of the product-form law (one normalised forward pass)."""
    m = factors[1].shape[0]
    states = 1 << depth
    prev = np.arange(1 << (depth + 1)) >> 1
    alpha = np.zeros((m, states))
    alpha[:, 0] = 1.0
    log_z = np.zeros(m)
    log_zero = np.zeros(m)
    with np.errstate(divide="ignore"):  # an impossible silent pattern has log P = −inf
        for t in range(1, tokens + 1):
            a = (alpha[:, prev] * factors[t]).reshape(m, 2, states).sum(axis=1)
            c = a.sum(axis=1)
            log_z += np.log(c)
            alpha = a / c[:, None]
            log_zero += np.log(factors[t][:, 0])
    return log_zero - log_z


def classical_ipf(p: float, q: Sequence[float], tokens: int) -> np.ndarray:
    """Textbook IPF on a dense table of the 2^T patterns of one expert (reference version).

    Rakes the uniform table so that every two-way margin (x_t, x_{t+d}), d = 1..len(q), equals
    [[1 − 2p + q_d, p − q_d], [p − q_d, q_d]]; returns the table with shape (2,)*T (axis j is
    x_{j+1}). Exponential in T: meant for checking :func:`ipf_log_silent` on small T.
    """
    table = np.full((2,) * tokens, 0.5**tokens)
    pairs = [(s, s + d) for d in range(1, min(len(q), tokens - 1) + 1) for s in range(tokens - d)]
    for _ in range(MAX_SWEEPS):
        worst = 0.0
        for s, t in pairs:
            qd = q[t - s - 1]
            goal = np.array([[1.0 - 2.0 * p + qd, p - qd], [p - qd, qd]])
            margin = table.sum(axis=tuple(a for a in range(tokens) if a not in (s, t)))
            worst = max(worst, float(np.abs(margin - goal).max()))
            shape = [1] * tokens
            shape[s] = shape[t] = 2
            table = table * (goal / margin).reshape(shape)
        if worst < TOLERANCE:
            break
    return table
