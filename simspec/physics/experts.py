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
- Skew and temporal overlap together, the *reuse law*: :func:`reuse_fraction`,
  :func:`reuse_union` (below).

**Skew and overlap together.** A token reuses its predecessor's routing in part and draws the
rest afresh by popularity: per expert, with probability r its on/off state copies the previous
token's, otherwise it is a fresh Bernoulli(p_e). Each expert's sequence is then the two-state
Markov chain

    P(on | on) = r + (1 − r)·p_e,    P(on | off) = b_e = (1 − r)·p_e,

stationary at p_e (p_e·(r + (1 − r)p_e) + (1 − p_e)(1 − r)p_e = p_e), with lag-1 pair
probability q_e = P(on, on) = p_e² + r·p_e(1 − p_e): the chance part p_e² plus a share r of
what is left. Summed over experts, the lag-1 overlap is rho = c + r·(1 − c), c = Σ_e p_e²/k_e
the chance overlap, so

    r = (rho − c) / (1 − c)                                     (:func:`reuse_fraction`)

is the overlap *in excess of chance*, one number for every expert (its lag-1 autocorrelation).
An expert is silent over T tokens with probability (1 − p_e)(1 − b_e)^(T − 1), and B
independent sequences of T_b tokens touch

    E[U] = Σ_e [1 − Π_b (1 − p_e)·(1 − (1 − r)·p_e)^(T_b − 1)]    (:func:`reuse_union`)

distinct experts (linearity of expectation). With uniform popularity this is MoESD's union at
r = 0 and the uniform Markov chain of a reuse sampler otherwise; with skew the two effects
compound: cold experts stay cold *and* a token's experts persist, so a large pass of a
fine-grained model touches fewer experts than either statistic alone predicts. (Spreading the
same rho by a common odds ratio instead hands almost all of it to the hot experts, which share
by chance anyway: at Zipf 1.2 over 128 experts, top-8, rho = 0.38 is nearly all chance and the
union of 64 tokens is the independent one, 91 experts, against 75 under reuse.)
Below chance (r < 0) a token avoids its predecessor's experts: every expert goes a share −r of
the way to the least pair probability its margins allow (r = −1: the least overlap any router
with these popularities can have).
"""

from __future__ import annotations

from collections.abc import Sequence
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


def reuse_fraction(
    inclusion_probabilities: np.ndarray, overlaps: float | Sequence[float] | np.ndarray
) -> np.ndarray:
    """The reuse r_d of lag overlaps rho_d (module docstring), in [−1, 1].

    r_d = (rho_d − c)/(1 − c) at or above chance, c = Σ_e p_e² / Σ_e p_e; below chance
    r_d = (rho_d − c)/(c − m), m = Σ_e max(0, 2p_e − 1) / Σ_e p_e the least overlap two tokens
    can have (:func:`reuse_pair_probability`). Pooled over every row of
    ``inclusion_probabilities`` (one r per lag for all of them). Raises ValueError when a
    rho_d is outside [m, 1].

    Examples
    --------
    >>> reuse_fraction(np.full(128, 8 / 128), [8 / 128, 0.38, 1.0, 0.0]).round(4).tolist()
    [0.0, 0.3387, 1.0, -1.0]
    """
    p = np.asarray(inclusion_probabilities, dtype=float).ravel()
    rho = np.atleast_1d(np.asarray(overlaps, dtype=float))
    k = p.sum()
    if k <= 0:
        return np.zeros(rho.shape)
    chance = float((p * p).sum() / k)
    least = float(np.maximum(2.0 * p - 1.0, 0.0).sum() / k)
    for d, value in enumerate(rho):
        if not least - 1e-12 <= value <= 1.0 + 1e-12:
            raise ValueError(
                f"lag-{d + 1} overlap {value:g} is outside the reachable range "
                f"[{least:.4g}, 1] for these expert popularities"
            )
    with np.errstate(divide="ignore", invalid="ignore"):
        above = (rho - chance) / (1.0 - chance)
        below = (rho - chance) / (chance - least)
    r = np.where(rho >= chance, above, below)
    return np.clip(np.nan_to_num(r, nan=0.0), -1.0, 1.0)


def reuse_pair_probability(p: np.ndarray, reuse: np.ndarray | float) -> np.ndarray:
    """q = P(on at t, on at t + d) of the reuse law (module docstring).

    q = p² + r·p(1 − p) for r ≥ 0 (a share r of the way from independence to always the same);
    q = p² + r·(p² − max(0, 2p − 1)) for r < 0 (a share −r of the way to the least pair
    probability margins (1 − p, p) allow).

    Examples
    --------
    >>> reuse_pair_probability(np.array([0.25, 1.0]), 0.5).tolist()
    [0.15625, 1.0]
    >>> reuse_pair_probability(np.array([0.25, 0.75]), -1.0).tolist()  # the least possible
    [0.0, 0.5]
    """
    p = np.asarray(p, dtype=float)
    r = np.asarray(reuse, dtype=float)
    span = np.where(r >= 0.0, p * (1.0 - p), p * p - np.maximum(2.0 * p - 1.0, 0.0))
    return p * p + r * span


def reuse_union(
    inclusion_probabilities: np.ndarray, overlap: float, tokens_per_sequence: np.ndarray
) -> np.ndarray:
    """Expected distinct experts of B sequences under the reuse law, per row (module docstring).

    Σ_e [1 − Π_b (1 − p_e)(1 − (1 − r)p_e)^(T_b − 1)], r = :func:`reuse_fraction` of the
    lag-1 ``overlap`` (pooled over the rows).

    Parameters
    ----------
    inclusion_probabilities : array (..., N)
        p_e per layer (rows sum to k_e).
    overlap : float
        rho_1, the lag-1 overlap of consecutive tokens (chance overlap = independent routing).
    tokens_per_sequence : sequence of int
        T_b of each of the B independent sequences.

    Examples
    --------
    >>> p = np.full((1, 128), 8 / 128)
    >>> round(float(reuse_union(p, 0.38, [4])[0]) / 8, 2)  # U(4) = 2.78 k_e (Markov, uniform)
    2.78
    >>> round(float(reuse_union(p, 8 / 128, [2, 2])[0]) / 8, 2)  # chance: MoESD's 4 tokens
    3.64
    """
    p = np.asarray(inclusion_probabilities, dtype=float)
    r = float(reuse_fraction(p, [overlap])[0])
    tokens = np.asarray(tokens_per_sequence, dtype=float)
    tokens = tokens[tokens > 0]
    b = (p - reuse_pair_probability(p, r)) / np.where(p < 1.0, 1.0 - p, 1.0)
    with np.errstate(divide="ignore"):
        log_first, log_next = np.log1p(-p), np.log1p(-b)
        later = float((tokens - 1.0).sum())
        log_silent = len(tokens) * log_first + (later * log_next if later else 0.0)
    return (1.0 - np.exp(log_silent)).sum(axis=-1)
