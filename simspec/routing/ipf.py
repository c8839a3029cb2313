"""The maximum-entropy law of an expert's on/off pattern, fitted by IPF.

A verify pass loads, in every MoE layer, the union of the experts of all the tokens it feeds.
By linearity of expectation only each expert's own on/off sequence matters: with
X_{e,t} = 1{token t routes to expert e},

    E[U] = Σ_e [1 − Π_b P_b(X_{e,1} = … = X_{e,T_b} = 0)]

for B independent sequences of T_b tokens (MoESD, arXiv 2505.19645, gives the independent case
E[U] = N(1 − (1 − k_e/N)^{BT})). Locatelli et al. (arXiv 2610.38981) model routing overlap
with a maximum-entropy IPF framework and report < 4 % error on unique-expert counts; their text
is not available, so this is our reconstruction from those two facts.

Given p_e and the pair targets q_{d,e} = P(x_t = 1, x_{t+d} = 1) of lags d = 1..D
(:mod:`simspec.routing.overlap`), the maximum-entropy law of (x_1..x_T) is found by iterative
proportional fitting (Deming & Stephan 1940; the limit is the max-entropy law, Csiszár 1975)
over the 2^T patterns: start uniform and rescale the table so each two-way margin
(x_t, x_{t+d}) matches its target, sweep until every margin is within 1e-10. Every rescaling
multiplies the table by a factor of two tokens only, so it is kept as the product of those
factors and each margin comes from a forward-backward pass over windows of D + 1 tokens: the
same iterates as raking a dense 2^T table (:func:`classical_ipf`, kept for reference and
tests), at O(T·2^{D+1}) per margin. With D = 1 the closed form replaces the fit.

:func:`ipf_log_silent` runs the fit of :mod:`simspec.routing.ipf_fit`: the same iterates up to
the order of summation (~1e-14 relative), all lags of a token from one pass over its window,
and with :func:`fitted_together` several T in one stacked fit. ``_fit_factors`` below is the
reference loop; :func:`pattern_distribution` (the Monte-Carlo sampler's dense law) keeps using
it, so sampled routing does not move by a single bit.

Experts differ only through p_e, so fits run on at most ``NODES`` inclusion-probability nodes
per layer group, equally spaced in logit p (:func:`probability_nodes`), and every expert reads
its value off the nodes (:func:`interpolate_nodes`): the cost does not grow with N.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator

import numpy as np

from simspec.routing.ipf_fit import MAX_SWEEPS, TOLERANCE, FitFailure, fit_factors, fit_log_silent
from simspec.routing.overlap import markov_log_silent

__all__ = ["MAX_SWEEPS", "NODES", "TOLERANCE", "fitted_together", "ipf_log_silent"]

#: Inclusion-probability nodes per layer group; experts between nodes are interpolated.
NODES = 32


def _pair_targets(
    q_true: np.ndarray, q_draft: np.ndarray, tokens: int, true_tokens: int
) -> tuple[int, list[list[tuple[int, np.ndarray]]]]:
    """Per later token t (1-based), the (lag, q) targets of its pairs, and the largest lag."""
    targets: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(tokens + 1)]
    depth = 0
    for t in range(2, tokens + 1):
        profile = q_true if t <= true_tokens else q_draft
        for d in range(1, min(profile.shape[1], t - 1) + 1):
            q = profile[:, d - 1]
            if np.isnan(q).all():
                continue
            targets[t].append((d, q))
            depth = max(depth, d)
    return depth, targets


def ipf_log_silent(
    p: np.ndarray,
    q_true: np.ndarray,
    tokens: int,
    *,
    q_draft: np.ndarray | None = None,
    true_tokens: int | None = None,
) -> np.ndarray:
    """log P(an expert is silent over ``tokens`` tokens) under the max-entropy pattern law.

    Parameters
    ----------
    p : array (M,)
        Inclusion probability of each of M experts (or nodes), 0 < p < 1.
    q_true : array (M, D)
        Target P(x_s = 1, x_{s+d} = 1) for lags d = 1..D.
    tokens : int
        T, the window length.
    q_draft : array (M, D'), optional
        Targets used for pairs whose later token is a rejected draft (index > ``true_tokens``).
    true_tokens : int, optional
        How many leading tokens are true (committed or accepted) tokens; default all.

    Returns
    -------
    array (M,)
        Uses the Markov closed form when only lag-1 pairs are constrained, IPF otherwise.
    """
    p = np.asarray(p, dtype=float)
    q_true = np.asarray(q_true, dtype=float).reshape(len(p), -1)
    q_draft = q_true if q_draft is None else np.asarray(q_draft, dtype=float).reshape(len(p), -1)
    true_tokens = tokens if true_tokens is None else true_tokens
    depth, targets = _pair_targets(q_true, q_draft, tokens, true_tokens)
    if depth == 0:
        return np.log1p(-p)
    if depth == 1:
        return markov_log_silent(p, [targets[t][0][1] for t in range(2, tokens + 1)])
    planned = _PLANNED.get()
    if planned is not None and true_tokens >= tokens and tokens in planned[0]:
        return _planned_log_silent(planned, p, q_true, tokens)
    (out,) = fit_log_silent(p, targets, [tokens], depth)
    if isinstance(out, FitFailure):
        raise FitFailure(*out.args)
    return out


# The window lengths announced by :func:`fitted_together`, and the fits made for them.
_Planned = tuple[frozenset[int], dict[tuple[bytes, tuple[int, ...], int], object]]
_PLANNED: contextvars.ContextVar[_Planned | None] = contextvars.ContextVar(
    "simspec_ipf_planned", default=None
)


@contextlib.contextmanager
def fitted_together(tokens: Iterable[int]) -> Iterator[None]:
    """Inside the block, fit the window lengths ``tokens`` of a law together.

    The first :func:`ipf_log_silent` query of a (p, q) law for one of ``tokens`` (all tokens
    true) fits every length in ``tokens`` in one stacked IPF (:mod:`simspec.routing.ipf_fit`)
    and keeps the answers until the block ends; later queries of that law read them. The
    answers are bit-identical to separate fits: only the numpy calls are shared. Meant for U(T)
    curves, which ask for T = 1..T_max one after another (``simspec routing predict``).

    Examples
    --------
    >>> p, q = np.array([0.0625]), np.array([[0.38, 0.32]]) * 0.0625
    >>> with fitted_together(range(1, 6)):
    ...     together = [ipf_log_silent(p, q, t) for t in range(1, 6)]
    >>> all((a == ipf_log_silent(p, q, t)).all() for t, a in zip(range(1, 6), together))
    True
    """
    token = _PLANNED.set((frozenset(tokens), {}))
    try:
        yield
    finally:
        _PLANNED.reset(token)


def _planned_log_silent(planned: _Planned, p: np.ndarray, q: np.ndarray, tokens: int) -> np.ndarray:
    sizes, answers = planned
    law = (p.tobytes() + q.tobytes(), q.shape)
    if (*law, tokens) not in answers:
        fits = {}  # window length -> its largest lag, for the lengths not yet fitted
        for size in sorted(sizes):
            depth, _ = _pair_targets(q, q, size, size)
            if depth >= 2 and (*law, size) not in answers:
                fits[size] = depth
        largest = max(fits)
        _, targets = _pair_targets(q, q, largest, largest)
        results = fit_log_silent(p, targets, list(fits), max(fits.values()))
        for size, result in zip(fits, results, strict=True):
            answers[(*law, size)] = result
    out = answers[(*law, tokens)]
    if isinstance(out, FitFailure):
        raise FitFailure(*out.args)
    assert isinstance(out, np.ndarray)
    return out.copy()


def pattern_distribution(p: np.ndarray, q: np.ndarray, tokens: int) -> np.ndarray:
    """The max-entropy law of (x_1..x_T) as a dense table (M, 2^T), fitted by IPF.

    Index bit T − j holds x_j (so x_1 is the most significant bit). Used by the Monte-Carlo
    sampler (:mod:`simspec.routing.maxent`) to read conditional laws of the next token.
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float).reshape(len(p), -1)
    depth, targets = _pair_targets(q, q, tokens, tokens)
    if depth == 0:
        law = np.ones((len(p), 1))
        for _ in range(tokens):
            law = np.stack([law * (1.0 - p)[:, None], law * p[:, None]], axis=2).reshape(len(p), -1)
        return law
    factors = fit_factors(p, targets, tokens, depth)
    index = np.arange(1 << tokens)
    law = np.ones((len(p), 1 << tokens))
    for t in range(1, tokens + 1):
        width = min(t, depth + 1)  # x_t at bit width − 1, x_{t−j} at bit j − 1
        col = ((index >> (tokens - t)) & 1) << (width - 1)
        for j in range(1, width):
            col |= ((index >> (tokens - (t - j))) & 1) << (j - 1)
        law *= factors[t][:, col]
    return law / law.sum(axis=1, keepdims=True)


def probability_nodes(p: np.ndarray, nodes: int = NODES) -> np.ndarray:
    """At most ``nodes`` inclusion probabilities spanning ``p`` (equally spaced in logit p).

    The distinct values themselves when there are few of them; values 0 and 1 are excluded
    (those experts are never / always used, no fit needed).
    """
    inner = np.unique(p[(p > 0.0) & (p < 1.0)])
    if len(inner) <= nodes:
        return inner
    lo, hi = np.log(inner[0] / (1 - inner[0])), np.log(inner[-1] / (1 - inner[-1]))
    grid = np.linspace(lo, hi, nodes)
    return 1.0 / (1.0 + np.exp(-grid))


def interpolate_nodes(node_p: np.ndarray, node_values: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Values at ``p`` by linear interpolation in logit p between nodes (clamped at the ends)."""
    if len(node_p) == 1:
        return np.broadcast_to(node_values[0], p.shape).copy()
    x = np.log(node_p) - np.log1p(-node_p)
    with np.errstate(divide="ignore"):
        xp = np.log(p) - np.log1p(-p)
    return np.interp(np.clip(xp, x[0], x[-1]), x, node_values)
