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
import functools
import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from simspec.routing.ipf_fit import MAX_SWEEPS, TOLERANCE, FitFailure, fit_log_silent
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


@functools.lru_cache(maxsize=256)
def _pair_maps(span: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """For the pair (x_{t−d}, x_t) in a window of ``span`` columns: the column → cell index
    2·x_{t−d} + x_t, and the (2, span/2) indicators of x_{t−d} over the column pairs
    (x_t is bit 0, so the columns of one pair are adjacent)."""
    cols = np.arange(span)
    cell = 2 * ((cols >> d) & 1) + (cols & 1)
    bit = ((cols[::2] >> d) & 1).astype(float)
    return cell, np.stack([1.0 - bit, bit])


def _fit_factors(
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


def _log_silent_from_factors(factors: list[np.ndarray], tokens: int, depth: int) -> np.ndarray:
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
    factors, _ = _fit_factors(p, targets, tokens, depth)
    index = np.arange(1 << tokens)
    law = np.ones((len(p), 1 << tokens))
    for t in range(1, tokens + 1):
        col = np.zeros(len(index), dtype=np.int64)
        for d in range(depth + 1):
            if t - d >= 1:
                col |= ((index >> (tokens - (t - d))) & 1) << d
        law *= factors[t][:, col]
    return law / law.sum(axis=1, keepdims=True)


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
