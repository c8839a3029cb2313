"""Lag overlaps as a pairwise max-entropy law: odds ratios, pair probabilities, Markov chains.

Expert e's on/off sequence X_{e,t} = 1{token t routes to e} is what a verify pass's unique
experts depend on (:mod:`simspec.routing.predictor`). Known about a router are usually its
inclusion probabilities p_e (Σ_e p_e = k_e) and its lag-d overlaps
rho_d = E|S_t ∩ S_{t+d}| / k_e, d = 1..D (rho_d includes the chance overlap Σ_e p_e² / k_e of
independent routing, :func:`simspec.physics.experts.chance_overlap`).

The least-committal way to share an aggregate overlap among experts is a common
log-odds-ratio lambda_d per lag: expert e's 2x2 table of (x_t, x_{t+d}) has margins (1 − p_e, p_e)
and odds ratio e^{lambda_d}, its P(1, 1) = q(p_e, lambda_d) (:func:`pair_probability`), and
lambda_d solves Σ_e q_{d,e} = rho_d·k_e (:func:`fit_log_odds_ratio`). With one lag the
maximum-entropy law of the whole sequence is a stationary binary Markov chain and
P(silent over T) = (1 − p)(1 − b)^{T−1}, b = (p − q)/(1 − p) (:func:`markov_log_silent`); more
lags need iterative proportional fitting (:mod:`simspec.routing.ipf`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simspec.routing.memo import FitMemo

_LAMBDA_BOUND = 60.0  # |log odds ratio| beyond this is numerically "perfect" (anti-)association


def pair_probability(p: np.ndarray, log_odds_ratio: np.ndarray | float) -> np.ndarray:
    """q = P(x_s = 1, x_t = 1) of a 2x2 table with margins (1 − p, p) and odds ratio e^lambda.

    q solves (1 − r)q² + (1 − 2p + 2rp)q − rp² = 0 (r = e^lambda), taken in the stable form
    q = 2rp² / (1 − 2p + 2rp + sqrt((1 − 2p)² + 4rp(1 − p))); for p > 1/2 the complement
    identity q(p) = 2p − 1 + q(1 − p) keeps it exact when r is tiny.

    Examples
    --------
    >>> float(pair_probability(np.array(0.25), 0.0))  # independence: p²
    0.0625
    """
    p = np.asarray(p, dtype=float)
    lam = np.clip(np.asarray(log_odds_ratio, dtype=float), -_LAMBDA_BOUND, _LAMBDA_BOUND)
    r = np.exp(lam)
    low = np.minimum(p, 1.0 - p)
    disc = np.sqrt((1.0 - 2.0 * low) ** 2 + 4.0 * r * low * (1.0 - low))
    q_low = 2.0 * r * low * low / (1.0 - 2.0 * low + 2.0 * r * low + disc)
    return np.where(p > 0.5, 2.0 * p - 1.0 + q_low, q_low)


def overlap_range(inclusion_probabilities: np.ndarray) -> tuple[float, float]:
    """Smallest and largest lag overlap reachable with these inclusion probabilities p_e.

    Two tokens share at least max(2p_e − 1, 0) of expert e (an expert used by more than half
    the tokens cannot be missed by both); identical tokens share everything.
    """
    p = np.asarray(inclusion_probabilities, dtype=float)
    k = p.sum()
    return float(np.maximum(2.0 * p - 1.0, 0.0).sum() / k), 1.0


def fit_log_odds_ratio(
    inclusion_probabilities: np.ndarray, overlaps: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Common log-odds-ratio lambda_d per lag so that Σ_e q(p_e, lambda_d) = rho_d·Σ_e p_e.

    ``inclusion_probabilities`` may hold several layers (any shape, pooled: one lambda_d for all
    of them).
    Solved by bisection (Σ_e q is increasing in lambda). Raises ValueError when rho_d is outside
    the reachable range (:func:`overlap_range`).

    Examples
    --------
    >>> lam = fit_log_odds_ratio(np.full(16, 0.125), [0.125])  # chance overlap: independence
    >>> abs(float(lam[0])) < 1e-9
    True
    """
    p = np.asarray(inclusion_probabilities, dtype=float).ravel()
    rho = np.atleast_1d(np.asarray(overlaps, dtype=float))
    k = p.sum()
    low, high = overlap_range(p)
    for d, value in enumerate(rho):
        if not low - 1e-12 <= value <= high + 1e-12:
            raise ValueError(
                f"lag-{d + 1} overlap {value:g} is outside the reachable range "
                f"[{low:.4g}, {high:g}] for these expert popularities"
            )
    lo = np.full(rho.shape, -_LAMBDA_BOUND)
    hi = np.full(rho.shape, _LAMBDA_BOUND)
    # q(p_e) on the distinct p_e only (often a handful), copied out to every expert before the
    # sum: the same elementwise values summed in the same order, so the same lambda, bit for bit.
    values, inverse = np.unique(p, return_inverse=True)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        total = pair_probability(values[None, :], mid[:, None])[:, inverse].sum(axis=1) / k
        below = total < rho
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
        if (hi - lo).max(initial=0.0) < 1e-13:
            break
    return 0.5 * (lo + hi)


def layer_log_odds_ratios(
    inclusion_probabilities: np.ndarray, overlaps: Sequence[float] | np.ndarray
) -> np.ndarray:
    """lambda_d per layer, array (L, D), for ``inclusion_probabilities`` p_e (L, N).

    A single profile (D,), or identical rows of an (L, D) array, is a pooled statistic: one
    common odds ratio per lag for all layers. Distinct rows are fitted layer by layer.

    The answer is cached per (p, overlaps), read-only: every point of a sweep and every
    replication builds its reference set, and so its predictor or sampler, from the same
    statistics, and the bisection over all L·N experts is a large share of a small point's CPU
    time. Forked sweep workers inherit the fits their parent made while it checked the
    scenarios.
    """
    p = np.atleast_2d(np.asarray(inclusion_probabilities, dtype=float))
    rho = np.asarray(overlaps, dtype=float)
    return _cached_layer_fit(p.tobytes(), p.shape, rho.tobytes(), rho.shape)


def _layer_fit_of_bytes(
    p_bytes: bytes, p_shape: tuple[int, ...], rho_bytes: bytes, rho_shape: tuple[int, ...]
) -> np.ndarray:
    """:func:`layer_log_odds_ratios` of the arrays these bytes hold."""
    p = np.frombuffer(p_bytes).reshape(p_shape)
    rho = np.frombuffer(rho_bytes).reshape(rho_shape)
    lam = _layer_fit(p, rho)
    lam.setflags(write=False)
    return lam


#: ``_layer_fit_of_bytes`` remembered per arguments (exceptions are not); a sweep's processes
#: share the answers (:mod:`simspec.routing.memo`).
_cached_layer_fit = FitMemo("routing.overlap.layer_fit", _layer_fit_of_bytes, 32)


def _layer_fit(p: np.ndarray, rho: np.ndarray) -> np.ndarray:
    if rho.ndim == 2 and len(rho) and not (rho == rho[0]).all():
        if rho.shape[0] != p.shape[0]:
            raise ValueError(f"{rho.shape[0]} overlap rows for {p.shape[0]} layers")
        return np.stack([fit_log_odds_ratio(p[i], rho[i]) for i in range(len(rho))])
    profile = rho if rho.ndim == 1 else (rho[0] if len(rho) else np.zeros(0))
    return np.tile(fit_log_odds_ratio(p, profile), (p.shape[0], 1))


def markov_log_silent(p: np.ndarray, pair_q: Sequence[np.ndarray]) -> np.ndarray:
    """log P(silent over T tokens) of the max-entropy Markov chain (the closed form, D = 1).

    ``pair_q[j]`` is P(x_{j+1} = 1, x_{j+2} = 1) for transition j (T − 1 entries, each shaped
    like ``p``): P(silent) = (1 − p)·Π_j (1 − b_j), b_j = (p − q_j)/(1 − p).
    """
    p = np.asarray(p, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log1p(-p)
        for q in pair_q:
            b = np.where(p < 1.0, (p - q) / np.where(p < 1.0, 1.0 - p, 1.0), 1.0)
            out = out + np.log1p(-np.clip(b, 0.0, 1.0))
    return out
