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
(x_{t−d}, x_t) matches its target, sweep until every margin is within :data:`TOLERANCE`. With
D = 1 the closed form replaces the fit. Every rescaling multiplies the table by a factor of two
tokens only, so the law is kept in product form, P(x) ∝ Π_t F_t(x_{t−D}..x_t), and the fit
computes the iterates of raking the dense table (tests/reference/ipf.py holds that textbook
loop) up to the order of floating-point summation, in O(2^{D+1}) per token:

* **All lags of a token from one pass.** Every rescaling of F_t is a 2 × 2 table r_d of
  (x_{t−d}, x_t), so after the lags before d the joint law of token t's window is the joint J
  at the start of the token times Π_{j<d} r_j(x_{t−j}, x_t). Its (x_{t−d}, x_t) margin only needs
  J summed over the tokens older than t − d (the *suffix marginal* S_d, all of them from one
  halving pass over J) contracted with that product over x_{t−1}..x_{t−d+1} (a table of 2^d
  entries, one small matrix product); F_t is multiplied once by the product of its D tables.
* **A column order for contiguous sums.** Column bits, most significant first, are x_t, x_{t−1},
  …, x_{t−w+1} (the oldest token last): the suffix marginals, the forward message (the oldest
  token summed out) and the backward message (x_t summed out) are sums of adjacent or of
  halves of rows, and each margin is a batched matrix product.
* **Several window lengths in one fit** (:func:`fitted_together`). U(T) for T = 1..16 needs one
  fit per T, with the same per-token targets. The fits are stacked as row blocks, longest T
  first, so token t works on a prefix of the rows (the fits with T ≥ t) and one numpy call
  serves every fit. Each fit keeps its own stopping rule: once every margin of its rows is
  within :data:`TOLERANCE` its factors are frozen (rescaled by exactly 1), so each fit returns
  the iterates it would have alone, bit for bit.

Experts differ only through p_e, so fits run on at most ``NODES`` inclusion-probability nodes
per layer group, equally spaced in logit p (:func:`probability_nodes`), and every expert reads
its value off the nodes (:func:`interpolate_nodes`): the cost does not grow with N.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

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
    true) fits every length in ``tokens`` in one stacked IPF
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


# -- the fit ---------------------------------------------------------------------------------
#: IPF stops when every two-way margin is within this of its target.
TOLERANCE = 1e-10
MAX_SWEEPS = 20000

# Per token t: (rows, [(lag d, valid rows or None)], goals (lags, rows, 2, 2), valid (lags, rows))
_Lags = list[tuple[int, np.ndarray | None]]
_Plan = tuple[int, _Lags, np.ndarray, np.ndarray | None]


class FitFailure(ValueError):
    """No routing process has these overlaps: IPF stalls or its table collapses."""


def _failure(worst: float, sweep: int) -> FitFailure:
    return FitFailure(
        "the overlap statistics cannot be matched by any routing process: IPF still "
        f"misses a two-way margin by {worst:.2g} after {sweep} sweeps (inconsistent "
        "lag overlaps?)"
    )


def fit_log_silent(
    p: np.ndarray,
    targets: Sequence[Sequence[tuple[int, np.ndarray]]],
    sizes: Sequence[int],
    depth: int,
) -> list[np.ndarray | FitFailure]:
    """log P(silent over T tokens) of the max-entropy law for each window length T in ``sizes``.

    Parameters
    ----------
    p : array (M,)
        Inclusion probabilities (one row per node), 0 < p < 1.
    targets : list over tokens 0..max(sizes)
        ``targets[t]``: the (lag d, q (M,)) pair targets of token t, d ascending; a nan q leaves
        that row's pair unconstrained. The same for every fit that has token t.
    sizes : sequence of int
        The window lengths T to fit (distinct).
    depth : int
        The largest lag in ``targets`` (D >= 1).

    Returns
    -------
    list
        Per entry of ``sizes``: an array (M,), or the :class:`FitFailure` of that fit.
    """
    m = len(p)
    factors, done, order, width, live = _fit(p, targets, sizes, depth)
    out: list[np.ndarray | FitFailure] = [np.empty(0)] * len(order)
    for s, g in enumerate(order):
        state = done[s]
        if isinstance(state, FitFailure):
            out[g] = state
        else:
            block = [f[s * m : (s + 1) * m] for f in factors[: sizes[g] + 1]]
            out[g] = _log_silent(block, sizes[g], width, live)
    return out


def fit_factors(
    p: np.ndarray, targets: Sequence[Sequence[tuple[int, np.ndarray]]], tokens: int, depth: int
) -> list[np.ndarray]:
    """The fitted factor tables F_1..F_T of one window length (``factors[0]`` unused).

    ``factors[t]`` is (M, 2^w), w = min(t, D + 1): column bit w − 1 is x_t and bit j − 1 is
    x_{t−j}. The pattern law is P(x) ∝ Π_t F_t. Raises :class:`FitFailure` as
    :func:`fit_log_silent` reports it.
    """
    factors, done, _, _, _ = _fit(p, targets, [tokens], depth)
    if isinstance(done[0], FitFailure):
        raise done[0]
    return factors


def _fit(
    p: np.ndarray,
    targets: Sequence[Sequence[tuple[int, np.ndarray]]],
    sizes: Sequence[int],
    depth: int,
) -> tuple[list[np.ndarray], list[int | FitFailure | None], list[int], list[int], list[int]]:
    """The stacked fit of :func:`fit_log_silent`: (factors, per-fit outcome, the fits' order
    (longest first), window bits and message bits per token)."""
    m = len(p)
    order = sorted(range(len(sizes)), key=lambda g: -sizes[g])  # longest first
    fits = len(order)
    size = [sizes[g] for g in order]
    tmax = size[0]
    # Bits of token t's window and of its forward/backward message (tokens before 1 do not exist).
    width = [min(t, depth + 1) for t in range(tmax + 2)]
    live = [min(t, depth) for t in range(tmax + 2)]
    rows = [m * sum(s >= t for s in size) for t in range(tmax + 2)]
    factors = [np.ones((rows[t], 1 << width[t])) for t in range(tmax + 1)]
    goal_of = {}  # (t, d) -> goal (rows[t], 4), cells 2·x_t + x_{t−d}; validity of each row
    for t in range(1, tmax + 1):
        for d, q in targets[t]:
            goal = np.stack([1.0 - 2.0 * p + q, p - q, p - q, q], axis=1)
            goal_of[t, d] = (np.tile(goal, (rows[t] // m, 1)), np.tile(~np.isnan(q), rows[t] // m))
    done: list[int | FitFailure | None] = [None] * fits  # converged sweep, or the failure
    history = [[math.inf] for _ in range(fits)]
    plans = _plans(goal_of, targets, rows, done, m, tmax)
    worst = np.zeros(rows[1])
    # nan / inf from inconsistent margins are detected below, not warned about.
    with np.errstate(all="ignore"):
        for sweep in range(1, MAX_SWEEPS + 1):
            worst[:] = 0.0
            _sweep(factors, plans, width, live, worst)
            per_fit = worst.reshape(fits, m).max(axis=1)
            changed = False
            for g in range(fits):
                if done[g] is not None:
                    continue
                miss = float(per_fit[g])
                if miss < TOLERANCE:
                    done[g], changed = sweep, True
                    continue
                # Consistent margins converge geometrically; inconsistent ones stall (or
                # collapse the table to zeros, nan). Either way no process has these overlaps.
                miss = miss if math.isfinite(miss) else math.inf
                history[g].append(miss)
                stalled = sweep >= 200 and miss > 1e-6 and miss > 0.999 * history[g][-101]
                if not math.isfinite(miss) or stalled or sweep == MAX_SWEEPS:
                    done[g], changed = _failure(miss, sweep), True
            if all(state is not None for state in done):
                break
            if changed:
                plans = _plans(goal_of, targets, rows, done, m, tmax)
    return factors, done, order, width, live


def _plans(
    goal_of: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]],
    targets: Sequence[Sequence[tuple[int, np.ndarray]]],
    rows: list[int],
    done: list[int | FitFailure | None],
    m: int,
    tmax: int,
) -> list[_Plan]:
    """What each token works on this sweep: the rows up to the last unfinished fit (finished
    fits inside that prefix are rescaled by 1), its lags, goals and valid rows."""
    frozen = np.repeat([state is not None for state in done], m)
    last = max((s for s, state in enumerate(done) if state is None), default=-1)
    plans: list[_Plan] = [(0, [], np.empty(0), None)]
    for t in range(1, tmax + 1):
        n = min(rows[t], (last + 1) * m)
        lags: _Lags = []
        for d, _ in targets[t]:
            ok = goal_of[t, d][1][:n] & ~frozen[:n]
            lags.append((d, None if ok.all() else ok))
        goals: np.ndarray = np.empty(0)
        valid_all = None
        if lags:
            goals = np.stack([goal_of[t, d][0][:n] for d, _ in lags]).reshape(len(lags), n, 2, 2)
            if any(ok is not None for _, ok in lags):
                valid_all = np.stack([np.ones(n, bool) if ok is None else ok for _, ok in lags])
        plans.append((n, lags, goals, valid_all))
    return plans


def _sweep(
    factors: list[np.ndarray],
    plans: list[_Plan],
    width: list[int],
    live: list[int],
    worst: np.ndarray,
) -> None:
    """One IPF sweep over every token and lag, in place; each row's largest miss into ``worst``.

    Token t's window columns: x_t is the top bit, x_{t−j} bit j − 1 (j = 1..w − 1). The forward
    message alpha_t has x_{t−i} at bit i (it is token t + 1's window without x_{t+1}); the
    backward message beta_t has token t's window layout without the oldest token.
    """
    tmax = len(plans) - 1
    beta = [np.empty(0)] * (tmax + 1)
    beta[tmax] = np.ones((plans[tmax][0], 1 << live[tmax]))
    for t in range(tmax - 1, 0, -1):
        n, later = plans[t][0], plans[t + 1][0]
        prod = _times_after(factors[t + 1][:later], beta[t + 1], width[t + 1] > live[t + 1])
        half = prod.shape[1] // 2
        b = prod[:, :half] + prod[:, half:]  # x_{t+1} summed out; x_t is now bit 0: rotate
        out = np.empty((n, half)) if later == n else np.ones((n, half))
        quarter = half // 2
        total = b.sum(axis=1, keepdims=True)
        np.divide(b[:, 0::2], total, out=out[:later, :quarter])
        np.divide(b[:, 1::2], total, out=out[:later, quarter:])
        beta[t] = out
    alpha = np.ones((plans[1][0], 1))
    for t in range(1, tmax + 1):
        n, lags, goals, valid_all = plans[t]
        f = factors[t][:n]
        before = np.concatenate([alpha[:n], alpha[:n]], axis=1)  # x_t on top
        if lags:
            joint = _times_after(before, beta[t], width[t] > live[t]) * f
            _rake_token(f, joint, lags, goals, valid_all, width[t], worst)
        alpha = _forward(before * f, width[t] > live[t])


def _times_after(x: np.ndarray, beta: np.ndarray, drop: bool) -> np.ndarray:
    """x times the backward message, which does not depend on the window's oldest token."""
    if not drop:
        return x * beta
    n = len(x)
    half = beta.shape[1] // 2
    return (x.reshape(n, 2, 2, half) * beta.reshape(n, 2, 1, half)).reshape(n, -1)


def _forward(a: np.ndarray, drop: bool) -> np.ndarray:
    """The normalised forward message from before × F_t: the oldest token summed out if it
    leaves the window, x_t moved from the top bit to bit 0."""
    n = len(a)
    if drop:
        quarter = a.shape[1] // 4
        a4 = a.reshape(n, 2, 2, quarter)
        a = (a4[:, :, 0] + a4[:, :, 1]).reshape(n, -1)
    half = a.shape[1] // 2
    total = a.sum(axis=1, keepdims=True)
    out = np.empty_like(a)
    np.divide(a[:, :half], total, out=out[:, 0::2])
    np.divide(a[:, half:], total, out=out[:, 1::2])
    return out


def _rake_token(
    f: np.ndarray,
    joint: np.ndarray,
    lags: _Lags,
    goals: np.ndarray,
    valid_all: np.ndarray | None,
    bits: int,
    worst: np.ndarray,
) -> None:
    """Rescale F_t lag by lag (d ascending) from the window's joint law at the token's start."""
    n = len(f)
    # suffix[d]: the joint summed over the tokens older than t − d, shape
    # (n, 2 [x_t], 2 [x_{t−d}], 2^{d−1} [x_{t−1}..x_{t−d+1}, x_{t−j} at bit j − 1]).
    cur = joint.reshape(n, 2, -1)
    suffix = {bits - 1: joint.reshape(n, 2, 2, -1)}
    for d in range(bits - 2, lags[0][0] - 1, -1):
        half = cur.shape[2] // 2
        cur = cur[:, :, :half] + cur[:, :, half:]
        suffix[d] = cur.reshape(n, 2, 2, -1)
    # Each table r_d keeps the total mass (its goal sums to 1), so every margin of the token
    # is normalised by the same total.
    total = np.add.reduce(cur.reshape(n, -1), axis=1).reshape(n, 1, 1)
    ratios, raw = _rake_lags(suffix, lags, goals * total, total, careful=False)
    if not np.isfinite(ratios).all():  # a zero margin cell: its ratio is 0, as in the textbook
        ratios, raw = _rake_lags(suffix, lags, goals, total, careful=True)
    covered = ratios.shape[3]
    view = f.reshape(n, 2, -1, covered)
    view *= ratios
    miss = np.abs(np.stack(raw) / total - goals)
    if valid_all is None:
        np.maximum(worst[:n], miss.max(axis=(0, 2, 3)), out=worst[:n])
    else:
        miss = np.where(valid_all, miss.max(axis=(2, 3)), 0.0)
        np.maximum(worst[:n], miss.max(axis=0), out=worst[:n])


def _rake_lags(
    suffix: dict[int, np.ndarray],
    lags: _Lags,
    goals: np.ndarray,
    total: np.ndarray,
    careful: bool,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The product of the token's tables, shape (n, 2 [x_t], 1, 2^d) in the suffix layout, and
    each lag's unnormalised margin (n, 2 [x_t], 2 [x_{t−d}]).

    ``goals`` are the targets times the total mass, unless ``careful``: then they are the
    targets, margins are normalised first and a zero margin cell gets ratio 0.
    """
    n = len(total)
    ratios = None  # Π of the tables so far; None: all ones
    raw = []
    add = np.add
    for i, (d, valid) in enumerate(lags):
        span = 1 << (d - 1)
        s = suffix[d]
        if ratios is None and span == 1:
            margin = s[..., 0]
        else:
            if ratios is None:
                ratios = np.ones((n, 2, 1, 1))
            if ratios.shape[3] < span:  # lags without targets in between: factor 1
                ratios = np.tile(ratios, (1, 1, 1, span // ratios.shape[3]))
            margin = add.reduce(s * ratios, axis=3)
        if careful:
            normal = margin / total
            ratio = np.where(normal > 0.0, goals[i] / normal, 0.0)
        else:
            ratio = goals[i] / margin
        if valid is not None:  # rows without this lag (nan goal) or already fitted
            ratio[~valid] = 1.0
        grown = ratio[..., None] if ratios is None else ratio[..., None] * ratios
        ratios = grown.reshape(n, 2, 1, 2 * span)
        raw.append(margin)
    assert ratios is not None
    return ratios, raw


def _log_silent(
    factors: list[np.ndarray], tokens: int, width: list[int], live: list[int]
) -> np.ndarray:
    """log P(x_1 = … = x_T = 0) of the product-form law (one normalised forward pass)."""
    m = len(factors[1])
    alpha = np.ones((m, 1))
    log_z = np.zeros(m)
    log_zero = np.zeros(m)
    with np.errstate(divide="ignore"):  # an impossible silent pattern has log P = −inf
        for t in range(1, tokens + 1):
            a = np.concatenate([alpha, alpha], axis=1) * factors[t]
            log_zero += np.log(factors[t][:, 0])
            c = a.sum(axis=1)  # before the oldest token leaves: the same sum for every depth
            log_z += np.log(c)
            if width[t] > live[t]:
                quarter = a.shape[1] // 4
                a4 = a.reshape(m, 2, 2, quarter)
                a = (a4[:, :, 0] + a4[:, :, 1]).reshape(m, -1)
            half = a.shape[1] // 2
            alpha = np.empty_like(a)
            alpha[:, 0::2] = a[:, :half] / c[:, None]
            alpha[:, 1::2] = a[:, half:] / c[:, None]
    return log_zero - log_z
