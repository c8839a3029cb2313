"""Lag overlaps as per-expert pair probabilities: the reuse law, and its Markov closed form.

Expert e's on/off sequence X_{e,t} = 1{token t routes to e} is what a verify pass's unique
experts depend on (:mod:`simspec.routing.predictor`). Known about a router are usually its
inclusion probabilities p_e (Σ_e p_e = k_e) and its lag-d overlaps
rho_d = E|S_t ∩ S_{t+d}| / k_e, d = 1..D (rho_d includes the chance overlap Σ_e p_e² / k_e of
independent routing, :func:`simspec.physics.experts.chance_overlap`).

An aggregate overlap is shared among experts by the *reuse law*
(:mod:`simspec.physics.experts`, where it is derived): at lag d every expert keeps a common
fraction r_d of the correlation it can have, q_{d,e} = P(x_t = 1, x_{t+d} = 1) =
p_e² + r_d·p_e(1 − p_e), with r_d = (rho_d − c)/(1 − c) the overlap in excess of chance
(:func:`layer_reuse`). It is the law of a token that reuses a share of its predecessor's
routing and draws the rest by popularity, so skew and overlap act together: cold experts stay
cold and a token's experts persist. With one lag the maximum-entropy law of the whole sequence
given these pairs is a stationary binary Markov chain and
P(silent over T) = (1 − p)(1 − b)^{T−1}, b = (p − q)/(1 − p) (= (1 − r)·p for r ≥ 0)
(:func:`markov_log_silent`); more lags need iterative proportional fitting
(:mod:`simspec.routing.ipf`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simspec.physics.experts import reuse_fraction, reuse_pair_probability

__all__ = ["layer_reuse", "markov_log_silent", "overlap_range", "pair_probability"]


def pair_probability(p: np.ndarray, reuse: np.ndarray | float) -> np.ndarray:
    """q = P(x_s = 1, x_t = 1) of an expert used by a fraction p of tokens, at reuse r
    (:func:`simspec.physics.experts.reuse_pair_probability`).

    Examples
    --------
    >>> float(pair_probability(np.array(0.25), 0.0))  # independence: p²
    0.0625
    """
    return reuse_pair_probability(p, reuse)


def overlap_range(inclusion_probabilities: np.ndarray) -> tuple[float, float]:
    """Smallest and largest lag overlap reachable with these inclusion probabilities p_e.

    Two tokens share at least max(2p_e − 1, 0) of expert e (an expert used by more than half
    the tokens cannot be missed by both); identical tokens share everything.
    """
    p = np.asarray(inclusion_probabilities, dtype=float)
    k = p.sum()
    return float(np.maximum(2.0 * p - 1.0, 0.0).sum() / k), 1.0


def layer_reuse(
    inclusion_probabilities: np.ndarray, overlaps: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Reuse r_d per layer and lag, array (L, D), for ``inclusion_probabilities`` p_e (L, N).

    A single profile (D,), or identical rows of an (L, D) array, is a pooled statistic: one
    r_d per lag for all layers, from the chance overlap of all layers together. Distinct rows
    are taken layer by layer. Raises ValueError for overlaps the popularities cannot have.
    """
    p = np.atleast_2d(np.asarray(inclusion_probabilities, dtype=float))
    rho = np.asarray(overlaps, dtype=float)
    if rho.ndim == 2 and len(rho) and not (rho == rho[0]).all():
        if rho.shape[0] != p.shape[0]:
            raise ValueError(f"{rho.shape[0]} overlap rows for {p.shape[0]} layers")
        return np.stack([reuse_fraction(p[i], rho[i]) for i in range(len(rho))])
    profile = rho if rho.ndim == 1 else (rho[0] if len(rho) else np.zeros(0))
    if not len(profile):
        return np.zeros((p.shape[0], 0))
    return np.tile(reuse_fraction(p, profile), (p.shape[0], 1))


def markov_log_silent(p: np.ndarray, pair_q: Sequence[np.ndarray]) -> np.ndarray:
    """log P(silent over T tokens) of the Markov chain with these pairs (the closed form, D = 1).

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
