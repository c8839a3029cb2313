"""Distinct experts: the few closed forms every part of simspec shares (one home for each).

In every MoE layer a token activates k_e of N routed experts; expert e is used by a fraction p_e
of tokens, its inclusion probability (Σ_e p_e = k_e; p_e = k_e/N when routing is uniform).

- Expected distinct experts of t tokens routed independently and uniformly:
  N·(1 − (1 − k_e/N)^t) (MoESD, Li et al. 2025, arXiv 2505.19645), :func:`independent_union`.
- The same with popularity skew: Σ_e [1 − (1 − p_e)^t], since t independent tokens all miss
  expert e with probability (1 − p_e)^t (linearity of expectation),
  :func:`independent_union_from_inclusion`.
- Chance overlap, the lag overlap rho = E|S_t ∩ S_{t+d}| / k_e of independent routing:
  Σ_e p_e² / k_e (= k_e/N when uniform), :func:`chance_overlap`.
- Experts one more draft token adds to a union of U: ΔU = (1 − rho)·k_e·(N − U)/(N − k_e),
  :func:`added_experts`.
"""

from __future__ import annotations

from typing import Literal, overload

import numpy as np


def independent_union(num_experts: int, experts_per_token: float, tokens: float) -> float:
    """Expected distinct experts of ``tokens`` tokens routed independently and uniformly.

    N·(1 − (1 − k_e/N)^t) (MoESD, Li et al. 2025): each of the N experts is missed by one token
    with probability 1 − k_e/N, by t independent tokens with probability (1 − k_e/N)^t. 0 for
    a dense model (N = 0). With a measured union U of one unit (a batch) in place of k_e it
    rescales that union to t units under the same independence assumption.

    Parameters
    ----------
    num_experts : int
        N, routed experts per MoE layer.
    experts_per_token : float
        k_e, experts each token activates.
    tokens : float
        t, independently routed tokens.

    Examples
    --------
    >>> independent_union(128, 8, 1)
    8.0
    >>> round(independent_union(128, 8, 4) / 8, 2)  # MoESD: 4 tokens load 3.64 k_e
    3.64
    """
    if num_experts == 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - experts_per_token / num_experts) ** tokens)


def independent_union_from_inclusion(
    inclusion_probabilities: np.ndarray, tokens: float
) -> np.ndarray:
    """Expected distinct experts of ``tokens`` independently routed tokens, with skew.

    Σ_e [1 − (1 − p_e)^t] per row: expert e is silent over t independent tokens with
    probability (1 − p_e)^t. With p_e = k_e/N it is :func:`independent_union`.

    Parameters
    ----------
    inclusion_probabilities : array (..., N)
        p_e of every expert (each row sums to k_e).
    tokens : float
        t, independently routed tokens.

    Returns
    -------
    array (...)
        Expected distinct experts per row (per layer).

    Examples
    --------
    >>> p = np.full((1, 128), 8 / 128)
    >>> round(float(independent_union_from_inclusion(p, 4)[0]) / 8, 2)
    3.64
    >>> float(independent_union_from_inclusion(np.array([1.0, 0.5, 0.5, 0.0]), 2))  # 1 + 2·3/4
    2.5
    """
    p = np.asarray(inclusion_probabilities, dtype=float)
    return (1.0 - (1.0 - p) ** tokens).sum(axis=-1)


@overload
def chance_overlap(
    inclusion_probabilities: np.ndarray,
    experts_per_token: float | None = None,
    *,
    layer_mean: Literal[False] = False,
) -> np.ndarray: ...


@overload
def chance_overlap(
    inclusion_probabilities: np.ndarray, experts_per_token: float, *, layer_mean: Literal[True]
) -> float: ...


def chance_overlap(
    inclusion_probabilities: np.ndarray,
    experts_per_token: float | None = None,
    *,
    layer_mean: bool = False,
) -> np.ndarray | float:
    """Lag overlap of independent routing: rho = Σ_e p_e² / k_e.

    Two independent tokens share expert e with probability p_e², so they share Σ_e p_e² experts
    in expectation; divided by k_e that is the overlap a router with no memory shows (k_e/N for
    uniform popularity: the "chance" line real overlaps are compared with, e.g. Cohere 2026's
    38 % adjacent-token overlap is about 6x chance at k_e/N = 1/16).

    Parameters
    ----------
    inclusion_probabilities : array (..., N)
        p_e of every expert, one row per layer.
    experts_per_token : float, optional
        k_e; by default each row's own sum Σ_e p_e.
    layer_mean : bool
        Return one number: the mean over rows of Σ_e p_e², divided by k_e (needs
        ``experts_per_token``).

    Returns
    -------
    array (...) or float
        rho per row, or the layer mean.

    Examples
    --------
    >>> chance_overlap(np.full((2, 128), 8 / 128), 8).tolist()  # k_e/N
    [0.0625, 0.0625]
    >>> float(chance_overlap(np.array([1.0, 0.5, 0.5])))  # (1 + 1/4 + 1/4) / 2
    0.75
    >>> chance_overlap(np.array([[0.5, 0.5], [1.0, 0.0]]), 1, layer_mean=True)  # (0.5 + 1) / 2
    0.75
    """
    p = np.asarray(inclusion_probabilities, dtype=float)
    shared = (p * p).sum(axis=-1)
    if layer_mean:
        if experts_per_token is None:
            raise ValueError("layer_mean needs experts_per_token")
        return float(shared.mean() / experts_per_token)
    if experts_per_token is None:
        return shared / p.sum(axis=-1)
    return shared / experts_per_token


def added_experts(
    union: np.ndarray, num_experts: int, experts_per_token: int, overlap: float
) -> np.ndarray:
    """Expected new experts per layer when one more draft token joins a union of U experts.

    ΔU = (1 − rho)·k_e·(N − U)/(N − k_e), floored at 0: the draft reuses a fraction rho (its
    lag-1 overlap with its predecessor) of its predecessor's experts, which are already in the
    union, and draws the other (1 − rho)·k_e from the N − k_e experts its predecessor did not
    use, of which N − U are not loaded yet. ΔU → 0 as the union covers every expert. This is
    the estimate an online policy can make before the router runs (simspec's cost oracle,
    :mod:`simspec.sim.marginal`); 0 for a dense model or when every token uses every expert.

    Parameters
    ----------
    union : array
        U, expected distinct experts loaded so far (per layer).
    num_experts, experts_per_token : int
        N and k_e.
    overlap : float
        rho, lag-1 overlap of the draft with its predecessor (chance level: k_e/N).

    Examples
    --------
    >>> added_experts(np.array([8.0, 128.0]), 128, 8, 8 / 128).tolist()  # independent draft
    [7.5, 0.0]
    >>> added_experts(np.array([8.0]), 128, 8, 1.0).tolist()  # reuses all of its predecessor's
    [0.0]
    """
    n, k = num_experts, experts_per_token
    if n == 0 or n == k:
        return np.zeros_like(union)
    return np.maximum((1.0 - overlap) * k * (n - union) / (n - k), 0.0)
