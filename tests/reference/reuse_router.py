"""Plain routers with popularity skew and reuse: the Monte-Carlo references of the reuse law.

:func:`sample_expert_chains` is the law itself, one expert at a time: a token copies its
predecessor's state of expert e with probability ``reuse`` and otherwise draws it afresh,
on with probability p_e (a token uses k experts on average, not exactly k).

:func:`sample_sets` is a top-k router. Token 1 of a sequence takes k experts by weighted
sampling without replacement (Efraimidis and Spirakis 2006: the k largest u^(1/w)). Every later
token keeps each of its predecessor's experts with probability ``reuse`` and fills its other
slots the same way from the experts it did not keep (a dropped expert may come back). Nothing
here is shared with simspec's samplers: the closed form of
:func:`simspec.physics.experts.reuse_union` is checked against it, given the inclusion
probabilities and the lag-1 overlap this router shows."""

from __future__ import annotations

import numpy as np


def _weighted_fill(
    rng: np.random.Generator, weights: np.ndarray, taken: np.ndarray, slots: np.ndarray
) -> np.ndarray:
    """Add ``slots[i]`` experts to row i of ``taken`` (bool (rows, N)), weighted, without
    replacement among the experts not taken yet."""
    rows, n = taken.shape
    keys = np.log(rng.random((rows, n))) / weights[None, :]  # larger is likelier
    keys[taken] = -np.inf
    order = np.argsort(-keys, axis=1)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(n)[None, :].repeat(rows, axis=0), axis=1)
    return taken | (rank < slots[:, None])


def sample_expert_chains(
    rng: np.random.Generator, p: np.ndarray, reuse: float, sequences: int, tokens: int
) -> np.ndarray:
    """Expert sets, bool (sequences, tokens, N), expert by expert (module docstring)."""
    n = len(p)
    out = np.zeros((sequences, tokens, n), dtype=bool)
    out[:, 0] = rng.random((sequences, n)) < p
    for t in range(1, tokens):
        copy = rng.random((sequences, n)) < reuse
        fresh = rng.random((sequences, n)) < p
        out[:, t] = np.where(copy, out[:, t - 1], fresh)
    return out


def sample_sets(
    rng: np.random.Generator,
    weights: np.ndarray,
    k: int,
    reuse: float,
    sequences: int,
    tokens: int,
) -> np.ndarray:
    """Expert sets, bool (sequences, tokens, N): each token exactly k experts."""
    n = len(weights)
    out = np.zeros((sequences, tokens, n), dtype=bool)
    none = np.zeros((sequences, n), dtype=bool)
    out[:, 0] = _weighted_fill(rng, weights, none, np.full(sequences, k))
    for t in range(1, tokens):
        kept = out[:, t - 1] & (rng.random((sequences, n)) < reuse)
        out[:, t] = _weighted_fill(rng, weights, kept, k - kept.sum(axis=1))
    return out


def statistics(sets: np.ndarray) -> tuple[np.ndarray, float]:
    """Inclusion frequencies p_e (N,) and lag-1 overlap of ``sets`` (sequences, tokens, N):
    shared experts of consecutive tokens over the mean experts per token."""
    k = sets.sum(axis=2).mean()
    p = sets.reshape(-1, sets.shape[-1]).mean(axis=0)
    overlap = float((sets[:, 1:] & sets[:, :-1]).sum(axis=2).mean() / k)
    return p, overlap


def pass_unions(sets: np.ndarray, batch: int, tokens: int) -> np.ndarray:
    """Distinct experts of passes of ``batch`` sequences' first ``tokens`` tokens each."""
    usable = (len(sets) // batch) * batch
    first = sets[:usable, :tokens].any(axis=1)  # (sequences, N)
    return first.reshape(-1, batch, sets.shape[-1]).any(axis=1).sum(axis=1)
