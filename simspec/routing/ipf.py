"""Expected unique experts from routing statistics: the maximum-entropy (IPF) predictor.

A verify pass loads, in every MoE layer, the union of the experts of all the tokens it feeds.
By linearity of expectation only each expert's own on/off sequence matters: with
X_{e,t} = 1{token t routes to expert e},

    E[U] = Σ_e [1 − Π_b P_b(X_{e,1} = … = X_{e,T_b} = 0)]

for B independent sequences of T_b tokens (MoESD, arXiv 2505.19645, gives the independent case
E[U] = N(1 − (1 − k_e/N)^{BT})). Locatelli et al. (arXiv 2610.38981) model routing overlap
with a maximum-entropy IPF framework and report < 4 % error on unique-expert counts; their text
is not available, so this is our reconstruction from those two facts.

What is known about a router is usually just a few statistics per layer: the inclusion
probabilities p_e (Σ_e p_e = k_e) and the lag-d overlaps rho_d = E|S_t ∩ S_{t+d}| / k_e for
d = 1..D (rho_d includes chance overlap Σ_e p_e² / k_e). The least-committal law of each
expert's pattern (x_1..x_T) that matches them is the maximum-entropy one:

* the aggregate overlap is shared among experts by a common log-odds-ratio lambda_d per lag:
  expert e's table of (x_t, x_{t+d}) has margins (1 − p_e, p_e) and odds ratio e^{lambda_d},
  and lambda_d solves Σ_e q_{d,e} = rho_d·k_e, q = P(1, 1) (:func:`fit_log_odds_ratio`);
* with D = 1 the maximum-entropy law is a stationary binary Markov chain and
  P(silent over T) = (1 − p)(1 − b)^{T−1}, b = (p − q)/(1 − p) (closed form, no fitting);
* with D > 1 it is found by iterative proportional fitting (Deming & Stephan 1940; the limit
  is the max-entropy law, Csiszár 1975) over the 2^T patterns: start uniform and rescale the
  table so each two-way margin (x_t, x_{t+d}) matches its target, sweep until every margin is
  within 1e-10. Every rescaling multiplies the table by a factor of two tokens only, so it is
  kept as the product of those factors and each margin comes from a forward-backward pass over
  windows of D + 1 tokens: the same iterates as raking a dense 2^T table
  (:func:`classical_ipf`, kept for reference and tests), at O(T·2^{D+1}) per margin.

Experts differ only through p_e, so the fit runs on at most ``NODES`` popularity nodes per
layer group (equally spaced in logit p) and every expert reads its value off the nodes: the cost
does not grow with N. Results are cached per (nodes, statistics, T).
Rejected drafts may have their own overlap profile: a pair (s, t) whose later token is a rejected
draft uses the draft profile (:class:`UniqueExpertPredictor`).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence

import numpy as np

#: Popularity nodes per layer group; experts between nodes are interpolated (module docstring).
NODES = 32
#: IPF stops when every two-way margin is within this of its target.
TOLERANCE = 1e-10
MAX_SWEEPS = 20000
_LAMBDA_BOUND = 60.0  # |log odds ratio| beyond this is numerically "perfect" (anti-)association


# -- statistics -----------------------------------------------------------------------------------
def inclusion_probabilities(weights: np.ndarray, experts_per_token: int) -> np.ndarray:
    """Inclusion probabilities p_e of top-k routing proportional to popularity ``weights``.

    p_e = k·w_e / Σ w, capped at 1: an expert that would exceed 1 is always chosen and the
    excess is shared by the others in proportion to their weights (probability-proportional-to-
    size sampling). Works row-wise on (..., N) arrays; rows sum to k.

    Examples
    --------
    >>> inclusion_probabilities(np.array([6.0, 1.0, 1.0, 1.0, 1.0]), 2).tolist()
    [1.0, 0.25, 0.25, 0.25, 0.25]
    """
    w = np.asarray(weights, dtype=float)
    w = w / w.sum(axis=-1, keepdims=True)
    k = float(experts_per_token)
    capped = np.zeros(w.shape, dtype=bool)
    p = k * w
    for _ in range(w.shape[-1] + 1):
        over = (p > 1.0) & ~capped
        if not over.any():
            break
        capped |= over
        free = np.where(capped, 0.0, w)
        left = k - capped.sum(axis=-1, keepdims=True)
        total = free.sum(axis=-1, keepdims=True)
        p = np.where(capped, 1.0, left * free / np.where(total > 0, total, 1.0))
    return p


def chance_overlap(popularity: np.ndarray) -> np.ndarray:
    """Overlap of independent routing, Σ_e p_e² / k_e, per row of ``popularity`` (..., N)."""
    p = np.asarray(popularity, dtype=float)
    return (p * p).sum(axis=-1) / p.sum(axis=-1)


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


def overlap_range(popularity: np.ndarray) -> tuple[float, float]:
    """Smallest and largest lag overlap reachable with inclusion probabilities ``popularity``."""
    p = np.asarray(popularity, dtype=float)
    k = p.sum()
    return float(np.maximum(2.0 * p - 1.0, 0.0).sum() / k), 1.0


def fit_log_odds_ratio(
    popularity: np.ndarray, overlaps: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Common log-odds-ratio lambda_d per lag so that Σ_e q(p_e, lambda_d) = rho_d·Σ_e p_e.

    ``popularity`` may hold several layers (any shape, pooled: one lambda_d for all of them).
    Solved by bisection (Σ_e q is increasing in lambda). Raises ValueError when rho_d is outside
    the reachable range (:func:`overlap_range`).

    Examples
    --------
    >>> lam = fit_log_odds_ratio(np.full(16, 0.125), [0.125])  # chance overlap: independence
    >>> abs(float(lam[0])) < 1e-9
    True
    """
    p = np.asarray(popularity, dtype=float).ravel()
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
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        total = pair_probability(p[None, :], mid[:, None]).sum(axis=1) / k
        below = total < rho
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
        if (hi - lo).max(initial=0.0) < 1e-13:
            break
    return 0.5 * (lo + hi)


def layer_log_odds_ratios(
    popularity: np.ndarray, overlaps: Sequence[float] | np.ndarray
) -> np.ndarray:
    """lambda_d per layer, array (L, D), for inclusion probabilities ``popularity`` (L, N).

    A single profile (D,), or identical rows of an (L, D) array, is a pooled statistic: one
    common odds ratio per lag for all layers. Distinct rows are fitted layer by layer.
    """
    p = np.atleast_2d(np.asarray(popularity, dtype=float))
    rho = np.asarray(overlaps, dtype=float)
    if rho.ndim == 2 and len(rho) and not (rho == rho[0]).all():
        if rho.shape[0] != p.shape[0]:
            raise ValueError(f"{rho.shape[0]} overlap rows for {p.shape[0]} layers")
        return np.stack([fit_log_odds_ratio(p[i], rho[i]) for i in range(len(rho))])
    profile = rho if rho.ndim == 1 else (rho[0] if len(rho) else np.zeros(0))
    return np.tile(fit_log_odds_ratio(p, profile), (p.shape[0], 1))


def independent_unique_experts(popularity: np.ndarray, tokens: float) -> np.ndarray:
    """Σ_e [1 − (1 − p_e)^T] per row: unique experts of T independently routed tokens."""
    p = np.asarray(popularity, dtype=float)
    return (1.0 - (1.0 - p) ** tokens).sum(axis=-1)


# -- Markov closed form (D = 1) -------------------------------------------------------------------
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


# -- IPF over T-token patterns --------------------------------------------------------------------
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


def _fit_factors(
    p: np.ndarray, targets: list[list[tuple[int, np.ndarray]]], tokens: int, depth: int
) -> tuple[list[np.ndarray], int]:
    """Classical IPF in product form: the factor table F_t over (x_{t−D}..x_t) of every token.

    Returns (factors, sweeps). ``factors[t]`` has shape (M, 2^{D+1}); bit d of a column index is
    x_{t−d}. The pattern law is P(x) ∝ Π_t F_t.
    """
    m = len(p)
    width = 1 << (depth + 1)
    states = 1 << depth
    cols = np.arange(width)
    prev, nxt = cols >> 1, cols & (states - 1)
    onehot = []
    for d in range(depth + 1):
        h = np.zeros((width, 4))
        h[cols, 2 * ((cols >> d) & 1) + (cols & 1)] = 1.0
        onehot.append(h)
    factors = [np.ones((m, width)) for _ in range(tokens + 1)]
    goals = [
        [
            (d, np.stack([1.0 - 2.0 * p + q, p - q, p - q, q], axis=1), ~np.isnan(q))
            for d, q in targets[t]
        ]
        for t in range(tokens + 1)
    ]
    start = np.zeros((m, states))
    start[:, 0] = 1.0  # tokens before the first one do not exist: their bits stay 0
    history = [np.inf]
    # nan / inf from inconsistent margins are detected below, not warned about.
    with np.errstate(all="ignore"):
        for sweep in range(1, MAX_SWEEPS + 1):
            beta = [np.ones((m, states)) for _ in range(tokens + 1)]
            for t in range(tokens - 1, 0, -1):
                b = (factors[t + 1] * beta[t + 1][:, nxt]).reshape(m, states, 2).sum(axis=2)
                beta[t] = b / b.sum(axis=1, keepdims=True)
            alpha = start
            worst = 0.0
            for t in range(1, tokens + 1):
                base = alpha[:, prev] * beta[t][:, nxt]
                f = factors[t]
                for d, goal, valid in goals[t]:
                    joint = base * f
                    margin = joint @ onehot[d]
                    margin /= margin.sum(axis=1, keepdims=True)
                    ratio = np.where(margin > 0.0, goal / margin, 0.0)
                    miss = np.abs(margin - goal)
                    if not valid.all():  # rows without this lag (nan target) are left alone
                        miss = miss[valid]
                        ratio[~valid] = 1.0
                    miss_max = float(miss.max(initial=0.0))
                    worst = max(worst, miss_max) if np.isfinite(miss_max) else np.inf
                    f *= ratio[:, 2 * ((cols >> d) & 1) + (cols & 1)]
                a = (alpha[:, prev] * f).reshape(m, 2, states).sum(axis=1)
                alpha = a / a.sum(axis=1, keepdims=True)
            if worst < TOLERANCE:
                return factors, sweep
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
        Inclusion probability of each of M experts (or popularity nodes), 0 < p < 1.
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
    factors, _ = _fit_factors(p, targets, tokens, depth)
    return _log_silent_from_factors(factors, tokens, depth)


def pattern_distribution(p: np.ndarray, q: np.ndarray, tokens: int) -> np.ndarray:
    """The max-entropy law of (x_1..x_T) as a dense table (M, 2^T), fitted by IPF.

    Index bit T − j holds x_j (so x_1 is the most significant bit). Used by the Monte-Carlo
    sampler (:mod:`simspec.routing.samplers`) to read conditional laws of the next token.
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


# -- nodes and the cached predictor ---------------------------------------------------------------
def popularity_nodes(p: np.ndarray, nodes: int = NODES) -> np.ndarray:
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


@functools.lru_cache(maxsize=4096)
def _node_log_silent(
    node_bytes: bytes,
    q_true_bytes: bytes,
    q_draft_bytes: bytes,
    shape: tuple[int, int, int],
    tokens: int,
    true_tokens: int,
) -> np.ndarray:
    m, d_true, d_draft = shape
    p = np.frombuffer(node_bytes).copy()
    q_true = np.frombuffer(q_true_bytes).reshape(m, d_true)
    q_draft = np.frombuffer(q_draft_bytes).reshape(m, d_draft)
    out = ipf_log_silent(p, q_true, tokens, q_draft=q_draft, true_tokens=true_tokens)
    out.setflags(write=False)
    return out


def _pad(q: np.ndarray, width: int) -> np.ndarray:
    """Pad lag columns with nan (no constraint) up to ``width``."""
    out = np.full((q.shape[0], width), np.nan)
    out[:, : q.shape[1]] = q
    return np.ascontiguousarray(out)


class UniqueExpertPredictor:
    """Expected unique experts per layer for a batch of sequences, from (p_e, rho_1..rho_D).

    Parameters
    ----------
    popularity : array (L, N)
        Inclusion probabilities per layer (each row sums to k_e).
    overlaps : array (D,) or (L, D)
        Lag-1..D overlaps of true tokens: one profile pooled over all layers (a common odds
        ratio per lag) or one per layer.
    draft_overlaps : array (D',) or (L, D'), optional
        Overlap profile of rejected drafts with the tokens before them; default ``overlaps``.
    nodes : int
        Popularity nodes per layer group (module docstring).

    Tables of log P(silent) per (T, true tokens) and answers per batch composition are cached,
    so repeated queries cost a dictionary lookup.

    Examples
    --------
    >>> pred = UniqueExpertPredictor(np.full((1, 128), 8 / 128), [0.38])
    >>> round(float(pred.expected_unique([4])[0]) / 8, 2)  # Markov closed form: U(4) = 2.78 k_e
    2.78
    """

    def __init__(
        self,
        popularity: np.ndarray,
        overlaps: Sequence[float] | np.ndarray,
        draft_overlaps: Sequence[float] | np.ndarray | None = None,
        *,
        nodes: int = NODES,
    ):
        self.popularity = np.atleast_2d(np.asarray(popularity, dtype=float))
        self.num_layers, self.num_experts = self.popularity.shape
        self.nodes = nodes
        self._lam_true = self._fit(overlaps)
        self.split = draft_overlaps is not None
        self._lam_draft = self._lam_true if draft_overlaps is None else self._fit(draft_overlaps)
        # Layers sharing their odds ratios share nodes (pooled statistics: one group).
        joint = np.concatenate([self._lam_true, self._lam_draft], axis=1)
        _, self._group_of_layer = np.unique(joint, axis=0, return_inverse=True)
        self._group_of_layer = self._group_of_layer.ravel()
        self._tables: dict[tuple[int, int], np.ndarray] = {}
        self._answers: dict[tuple[tuple[int, int, int], ...], np.ndarray] = {}

    def _fit(self, overlaps: Sequence[float] | np.ndarray) -> np.ndarray:
        return layer_log_odds_ratios(self.popularity, overlaps)

    def log_silent(self, tokens: int, true_tokens: int | None = None) -> np.ndarray:
        """log P(expert silent over ``tokens`` tokens of one sequence), array (L, N).

        ``true_tokens`` leading tokens are true tokens; the rest are rejected drafts (only
        matters when a draft profile was given).
        """
        n_true = tokens if (true_tokens is None or not self.split) else min(true_tokens, tokens)
        key = (tokens, n_true)
        table = self._tables.get(key)
        if table is not None:
            return table
        p = self.popularity
        table = np.zeros_like(p)
        with np.errstate(divide="ignore"):
            table[p >= 1.0] = -np.inf
        inner = (p > 0.0) & (p < 1.0)
        fits = []  # (layers, node p, q true, q draft) of every group that needs IPF
        for g in range(int(self._group_of_layer.max(initial=-1)) + 1):
            layers = np.flatnonzero(self._group_of_layer == g)
            lam_t, lam_d = self._lam_true[layers[0]], self._lam_draft[layers[0]]
            group_p = p[layers]
            if lam_t.shape[0] <= 1 and lam_d.shape[0] <= 1:
                # Lag-1 only: the closed form is exact per expert, no nodes needed.
                q_t = pair_probability(group_p, lam_t[0]) if len(lam_t) else group_p * group_p
                q_d = pair_probability(group_p, lam_d[0]) if len(lam_d) else group_p * group_p
                pairs = [q_t if t <= n_true else q_d for t in range(2, tokens + 1)]
                values = markov_log_silent(group_p, pairs)
                table[layers] = np.where(inner[layers], values, table[layers])
                continue
            node_p = popularity_nodes(group_p.ravel(), self.nodes)
            if len(node_p):
                q_t = pair_probability(node_p[:, None], lam_t[None, :])
                q_d = pair_probability(node_p[:, None], lam_d[None, :])
                fits.append((layers, node_p, q_t, q_d))
        if fits:
            # One vectorised IPF over the nodes of every group (profiles padded with nan =
            # unconstrained lags).
            width_t = max(f[2].shape[1] for f in fits)
            width_d = max(f[3].shape[1] for f in fits)
            all_p = np.concatenate([f[1] for f in fits])
            all_t = np.concatenate([_pad(f[2], width_t) for f in fits])
            all_d = np.concatenate([_pad(f[3], width_d) for f in fits])
            silent = _node_log_silent(
                all_p.tobytes(),
                all_t.tobytes(),
                all_d.tobytes(),
                (len(all_p), width_t, width_d),
                tokens,
                n_true,
            )
            start = 0
            for layers, node_p, _, _ in fits:
                node_silent = silent[start : start + len(node_p)]
                start += len(node_p)
                # Interpolate the effective number of independent tokens, log P / log(1 − p):
                # nearly flat in p, unlike log P itself.
                ratio = node_silent / np.log1p(-node_p)
                group_p = p[layers]
                safe = np.where(inner[layers], group_p, 0.5)
                values = interpolate_nodes(node_p, ratio, safe) * np.log1p(-safe)
                table[layers] = np.where(inner[layers], values, table[layers])
        table.setflags(write=False)
        self._tables[key] = table
        return table

    def expected_unique(
        self, tokens_per_sequence: Sequence[int], true_tokens: Sequence[int] | None = None
    ) -> np.ndarray:
        """E[unique experts] per layer for B independent sequences, array (L,).

        Parameters
        ----------
        tokens_per_sequence : sequence of int
            T_b for each sequence of the pass (draft tokens + 1 in a verify pass).
        true_tokens : sequence of int, optional
            How many of each sequence's tokens are true tokens (accepted drafts + 1); the rest
            are rejected drafts. Ignored unless a draft profile was given.
        """
        if true_tokens is None or not self.split:
            counts = Counter((int(t), int(t)) for t in tokens_per_sequence)
        else:
            counts = Counter(
                (int(t), min(int(a), int(t)))
                for t, a in zip(tokens_per_sequence, true_tokens, strict=True)
            )
        key = tuple(sorted((t, a, c) for (t, a), c in counts.items() if t > 0))
        answer = self._answers.get(key)
        if answer is not None:
            return answer
        total = np.zeros_like(self.popularity)
        for t, a, c in key:
            total = total + c * self.log_silent(t, a)
        answer = (1.0 - np.exp(total)).sum(axis=1)
        answer.setflags(write=False)
        if len(self._answers) > 100_000:
            self._answers.clear()
        self._answers[key] = answer
        return answer

    def unique_curve(self, max_tokens: int, batch: int = 1) -> np.ndarray:
        """E[U](T) for T = 1..max_tokens with ``batch`` sequences each, array (max_tokens, L)."""
        return np.stack([self.expected_unique([t] * batch) for t in range(1, max_tokens + 1)])


def predict_unique_experts(
    popularity: np.ndarray,
    overlaps: Sequence[float] | np.ndarray,
    tokens_per_sequence: Sequence[int],
) -> np.ndarray:
    """One-shot :meth:`UniqueExpertPredictor.expected_unique` (see there), array (L,).

    Examples
    --------
    >>> p = np.full((1, 128), 8 / 128)
    >>> u = predict_unique_experts(p, [8 / 128], [4])  # chance overlap = independence
    >>> round(float(u[0]) / 8, 2)  # N(1 − (1 − k/N)^4) / k
    3.64
    """
    return UniqueExpertPredictor(popularity, overlaps).expected_unique(tokens_per_sequence)


def unique_curves(
    popularity: np.ndarray, overlaps: np.ndarray, tokens: int, batch: int = 1
) -> dict[str, np.ndarray]:
    """Predicted U(T), T = 1..tokens, averaged over layers: independent, Markov and multi-lag.

    ``popularity`` is (layers, N) expert usage; ``overlaps`` the lag profile rho_1..rho_D
    (shape (D,) or (layers, D); empty for independent routing). Raises ValueError for overlaps
    no top-k router can have.
    """
    overlaps = np.asarray(overlaps, dtype=float)
    if overlaps.ndim == 1:
        overlaps = np.tile(overlaps, (popularity.shape[0], 1))
    out = {
        "independent": np.array(
            [independent_unique_experts(popularity, float(batch * t)) for t in range(1, tokens + 1)]
        )
    }
    if overlaps.shape[-1] >= 1:
        out["Markov (rho_1)"] = UniqueExpertPredictor(popularity, overlaps[:, :1]).unique_curve(
            tokens, batch
        )
    if overlaps.shape[-1] >= 2:
        full = UniqueExpertPredictor(popularity, overlaps)
        out[f"IPF (rho_1..rho_{overlaps.shape[-1]})"] = full.unique_curve(tokens, batch)
    return {label: values.mean(axis=1) for label, values in out.items()}
