"""Latent routing law: each expert follows a hidden two-state chain; U(T) from it exactly.

A router whose persistence comes from a hidden state (a topic, a hot set; :mod:`simspec.routing.
latent`) gives every expert e a hidden chain z_t ∈ {0, 1} (in the latent set or not) with
stationary probability pi_e, leave rate ``drift`` and enter rate drift·pi_e/(1 − pi_e), and,
given the chain, independent tokens that use e with probability a_e (in the set) or b_e (not).
Then the probability that e stays silent over T tokens is a product of 2 × 2 matrices (the
forward recursion of a hidden Markov model), and by linearity of expectation

    E[U] = Σ_e [1 − Π_b P(e silent over the T_b tokens of sequence b)]

exactly, for any batch composition. Lag overlaps decay geometrically, rho_d = chance·(1 +
C·r^d) with r = 1 − drift/(1 − pi), so unlike the max-entropy law given the same rho_d, the
latent law has strong higher-order correlation: a used expert is likely to be used again much
later too, and the union grows more slowly than IPF predicts.

The fitted family (:meth:`LatentRoutingModel.latent_set`) has three parameters, h (experts in the
latent set), s (share of each token's experts taken from it) and the drift: pi_e = h·p_e/k_e,
a_e = k_e·s/h + (1 − s)·p_e, b_e = (1 − s)·p_e. A topic router is h = k_e, s = reuse; for
uniform popularity every (pi, a, b) is one of these. :func:`fit_latent` fits it by moments:
r and C from the lag overlaps, then h and s in closed form from the three-token overlap
tau = mean |S_t ∩ S_{t+1} ∩ S_{t+2}| / k_e (for uniform popularity, with y = z − pi and
c = (a − b)/p: C = c²·pi(1 − pi) and E[y_0 y_1 y_2] = pi(1 − pi)(1 − 2pi)·r²).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

_EPS = 1e-9


@dataclass(frozen=True)
class LatentRoutingModel:
    """Per-expert two-state hidden-Markov routing law (module docstring); arrays (L, N).

    ``hidden`` is pi_e, ``on`` / ``off`` the usage probabilities a_e / b_e in and out of the
    latent set, ``drift`` the per-token probability of leaving it. ``params`` describes the
    construction (for reports).
    """

    hidden: np.ndarray
    on: np.ndarray
    off: np.ndarray
    drift: float
    params: dict[str, float] = field(default_factory=dict)

    @classmethod
    def latent_set(
        cls, inclusion_probabilities: np.ndarray, hidden_size: float, share: float, drift: float
    ) -> LatentRoutingModel:
        """The fitted family: a latent set of ``hidden_size`` experts drawn with popularity
        p_e, from which each token takes a ``share`` of its k_e experts (module docstring)."""
        p = np.atleast_2d(np.asarray(inclusion_probabilities, dtype=float))
        k = float(p[0].sum())
        h = float(hidden_size)
        hidden = np.clip(h * p / k, _EPS, 1.0 - _EPS)
        # a_e − b_e = k_e·s/h; where pi_e is capped, keep p_e = pi a + (1 − pi) b exactly.
        off = np.maximum(p - hidden * (k * share / h), 0.0)
        on = (p - (1.0 - hidden) * off) / hidden
        over = on > 1.0
        on = np.where(over, 1.0, on)
        off = np.where(over, (p - hidden) / (1.0 - hidden), off)
        params = {"hidden_size": h, "share": float(share), "drift": float(drift)}
        return cls(hidden, on, off, float(drift), params)

    @classmethod
    def topic(
        cls, inclusion_probabilities: np.ndarray, reuse: float, drift: float
    ) -> LatentRoutingModel:
        """The topic router: latent set of k_e experts, followed with probability ``reuse``."""
        p = np.atleast_2d(np.asarray(inclusion_probabilities, dtype=float))
        return cls.latent_set(p, float(p[0].sum()), reuse, drift)

    @property
    def inclusion_probabilities(self) -> np.ndarray:
        """p_e = pi_e·a_e + (1 − pi_e)·b_e, (L, N)."""
        return self.hidden * self.on + (1.0 - self.hidden) * self.off

    def _rates(self) -> tuple[np.ndarray, np.ndarray]:
        leave = np.full(self.hidden.shape, self.drift)
        enter = np.clip(self.drift * self.hidden / (1.0 - self.hidden), 0.0, 1.0)
        return leave, enter

    def log_silent(self, tokens: int) -> np.ndarray:
        """log P(expert silent over ``tokens`` consecutive tokens of one sequence), (L, N)."""
        if tokens <= 0:
            return np.zeros(self.hidden.shape)
        leave, enter = self._rates()
        quiet_on, quiet_off = 1.0 - self.on, 1.0 - self.off
        out_ = (1.0 - self.hidden) * quiet_off
        in_ = self.hidden * quiet_on
        log_scale = np.zeros(self.hidden.shape)
        for _ in range(tokens - 1):
            out_, in_ = (
                (out_ * (1.0 - enter) + in_ * leave) * quiet_off,
                (out_ * enter + in_ * (1.0 - leave)) * quiet_on,
            )
            total = out_ + in_
            safe = np.where(total > 0.0, total, 1.0)
            log_scale += np.log(safe)
            out_, in_ = out_ / safe, in_ / safe
        with np.errstate(divide="ignore"):
            return log_scale + np.log(out_ + in_)

    def expected_unique(self, tokens_per_sequence: Sequence[int]) -> np.ndarray:
        """E[unique experts] per layer for independent sequences of T_b tokens, array (L,)."""
        total = np.zeros(self.hidden.shape)
        for t in tokens_per_sequence:
            total = total + self.log_silent(int(t))
        return (1.0 - np.exp(total)).sum(axis=1)

    def unique_curve(self, max_tokens: int, batch: int = 1) -> np.ndarray:
        """E[U](T) for T = 1..max_tokens with ``batch`` sequences each, (max_tokens, L)."""
        return np.stack(
            [
                (1.0 - np.exp(batch * self.log_silent(t))).sum(axis=1)
                for t in range(1, max_tokens + 1)
            ]
        )

    def _joint_used(self, gaps: Sequence[int]) -> np.ndarray:
        """P(expert used at tokens 0, g_1, g_1 + g_2, ...), (L, N)."""
        leave, enter = self._rates()
        r = 1.0 - leave - enter
        out_, in_ = (1.0 - self.hidden) * self.off, self.hidden * self.on
        for gap in gaps:
            rd = r**gap
            stay_in = self.hidden + (1.0 - self.hidden) * rd  # P(z_d = 1 | z_0 = 1)
            go_in = self.hidden * (1.0 - rd)  # P(z_d = 1 | z_0 = 0)
            out_, in_ = (
                (out_ * (1.0 - go_in) + in_ * (1.0 - stay_in)) * self.off,
                (out_ * go_in + in_ * stay_in) * self.on,
            )
        return out_ + in_

    def overlaps(self, max_lag: int) -> np.ndarray:
        """Lag overlaps rho_d = Σ_e P(used at t and t + d) / k_e, d = 1..max_lag, (L, D)."""
        k = self.inclusion_probabilities.sum(axis=1)
        return np.stack([self._joint_used([d]).sum(axis=1) / k for d in range(1, max_lag + 1)], 1)

    def triple_overlap(self) -> np.ndarray:
        """tau = Σ_e P(used at t, t + 1 and t + 2) / k_e, (L,)."""
        return self._joint_used([1, 1]).sum(axis=1) / self.inclusion_probabilities.sum(axis=1)


@dataclass(frozen=True)
class LatentFit:
    """A fitted :class:`LatentRoutingModel` and how well its form matches the lag profile."""

    model: LatentRoutingModel
    persistence: float  # r, decay per lag of the excess overlap
    excess: float  # C, rho_d / chance − 1 = C·r^d
    profile_error: float  # max |rho_d(model) / rho_d(trace) − 1| over the fitted lags


def triple_overlap_of(expert_ids: np.ndarray, sequence: np.ndarray, num_experts: int) -> np.ndarray:
    """Measured tau = mean |S_t ∩ S_{t+1} ∩ S_{t+2}| / k_e per layer over token triples of one
    sequence; ``expert_ids`` (tokens, L, k_e), ``sequence`` the sequence of each token."""
    from simspec.routing.sets import to_sets

    same = (sequence[2:] == sequence[:-2]) & (sequence[1:-1] == sequence[:-2])
    if not same.any():
        raise ValueError("no sequence has 3 tokens: the three-token overlap cannot be measured")
    k = expert_ids.shape[2]
    total = np.zeros(expert_ids.shape[1])
    rows = np.flatnonzero(same)
    for chunk in np.array_split(rows, max(1, len(rows) // 4096)):
        a = to_sets(expert_ids[chunk], num_experts)
        b = to_sets(expert_ids[chunk + 1], num_experts)
        c = to_sets(expert_ids[chunk + 2], num_experts)
        total += (a & b & c).sum(axis=(0, 2))
    return total / (len(rows) * k)


def fit_latent(
    inclusion_probabilities: np.ndarray, overlaps: np.ndarray, triple: np.ndarray | float
) -> LatentFit:
    """Fit the latent-set family (module docstring) to p_e, rho_1..rho_D and tau.

    Parameters
    ----------
    inclusion_probabilities : array (L, N)
    overlaps : array (L, D) or (D,)
        Lag overlaps, D >= 2 (the decay needs two lags).
    triple : array (L,) or float
        Three-token overlap tau.

    Raises
    ------
    ValueError
        Fewer than two lags.
    """
    p = np.atleast_2d(np.asarray(inclusion_probabilities, dtype=float))
    layers, n = p.shape
    k = p.sum(axis=1)
    rho = np.asarray(overlaps, dtype=float)
    if rho.ndim == 1:
        rho = np.tile(rho, (layers, 1))
    if rho.shape[1] < 2:
        raise ValueError("the latent fit needs the overlaps of at least two lags")
    s2, s3 = (p**2).sum(axis=1) / k, (p**3).sum(axis=1) / k
    excess = (rho / s2[:, None] - 1.0).mean(axis=0)  # C·r^d, pooled over layers
    lags = np.arange(1, rho.shape[1] + 1)
    positive = excess > 1e-6
    if positive.sum() >= 2:
        w = excess[positive]
        slope, intercept = np.polyfit(lags[positive], np.log(excess[positive]), 1, w=w)
        r = float(np.clip(np.exp(slope), 1e-6, 1.0 - 1e-6))
        c_excess = float(np.exp(intercept))
    else:  # (almost) no correlation: independent routing
        r, c_excess = 0.5, 0.0
    q = float(np.mean(np.asarray(triple, dtype=float) / s3 - 1.0))
    pi = 1.0 / n
    share = 0.0
    if c_excess > 0.0:
        k1 = (q - c_excess * (2 * r + r * r)) / (c_excess * r * r)  # c·(1 − 2 pi)
        c = float(np.sqrt(k1 * k1 + 4.0 * c_excess))
        pi = float(np.clip((1.0 - k1 / c) / 2.0, float(k.mean()) / n / 8, 1.0 - 1.0 / n))
        # c is better determined by C and pi than by k1 when pi is clipped.
        c = float(np.sqrt(c_excess / (pi * (1.0 - pi))))
        share = float(np.clip(c * pi, 0.0, 1.0))
    drift = (1.0 - r) * (1.0 - pi)
    if c_excess > 0.0:
        pi, share, drift = _refine(p, rho.mean(axis=0), float(np.mean(triple)), pi, share, drift)
    model = LatentRoutingModel.latent_set(p, pi * n, share, drift)
    model_rho = model.overlaps(rho.shape[1])
    with np.errstate(divide="ignore"):  # a lag the trace never repeats: infinitely off
        profile_error = float(np.abs(model_rho.mean(axis=0) / rho.mean(axis=0) - 1.0).max())
    return LatentFit(model, r, c_excess, profile_error)


def _refine(
    p: np.ndarray, rho: np.ndarray, triple: float, pi: float, share: float, drift: float
) -> tuple[float, float, float]:
    """Least-squares (h, s, drift) matching the pooled rho_d and tau with the exact (capped,
    per-expert) moments, from the uniform-popularity closed form: for skewed popularity the
    excess overlap is not proportional to the chance overlap."""
    from scipy.optimize import least_squares

    n = p.shape[1]
    k = float(p[0].sum())
    lo = np.array([np.log(0.5), 0.0, np.log(1e-6)])
    hi = np.array([np.log(n - 0.5), 1.0, np.log(0.999)])

    def residuals(x: np.ndarray) -> np.ndarray:
        model = LatentRoutingModel.latent_set(p, float(np.exp(x[0])), x[1], float(np.exp(x[2])))
        fit_rho = model.overlaps(len(rho)).mean(axis=0) / rho - 1.0
        fit_tau = model.triple_overlap().mean() / triple - 1.0
        return np.append(fit_rho, fit_tau)

    # Several starts (the closed form, and latent sets of k/2 .. N/2 experts): the moments
    # have local minima at the share bound.
    r = 1.0 - drift / (1.0 - pi)
    starts = [(pi * n, share, drift)]
    starts += [
        (h, 0.5, (1.0 - r) * (1.0 - h / n)) for h in k * 2.0 ** np.arange(-1, 8) if h < n / 2
    ]
    best = None
    for h, s, d in starts:
        x0 = np.clip(np.array([np.log(h), s, np.log(max(d, 1e-6))]), lo, hi)
        found = least_squares(residuals, x0, bounds=(lo, hi), x_scale=[1.0, 0.1, 1.0])
        if best is None or found.cost < best.cost:
            best = found
    assert best is not None
    return float(np.exp(best.x[0])) / n, float(best.x[1]), float(np.exp(best.x[2]))
