"""Latent-state routers: routing that is not max-entropy (a topic router, a drifting hot set).

The max-entropy sampler (:mod:`simspec.routing.maxent`) draws the law the IPF predictor assumes,
so it cannot tell how wrong that law is for a real router. These two samplers draw from a
different law, in which persistence comes from a hidden state, and test the predictors honestly:

* :class:`TopicSampler` — each sequence has, per MoE layer, a *topic*: a set H of k_e experts.
  Each token follows its topic (S_t = H_t) with probability ``reuse``, else it draws k_e
  experts afresh from the popularity p_e. After every token each topic expert is replaced, with
  probability ``drift``, by an expert outside H drawn in proportion to p_e/(1 − p_e), which
  keeps each expert in the topic with probability ~p_e (the topic drifts).
* :class:`HotSetSampler` — each sequence has, per layer, a *hot set* of h experts that takes a
  share ``hot_share`` of the routing mass: a token draws exactly k_e experts with inclusion
  probability k_e·s/h for a hot expert and k_e(1 − s)/(N − h) for a cold one (Pareto order
  sampling). The hot set drifts like a topic (each member replaced with probability ``drift``).

Both give every expert a hidden two-state chain (in H or not) and, given that chain, tokens that
use the expert independently: the two-state hidden-Markov law of :mod:`simspec.routing.hmm`,
whose parameters :meth:`latent_model` returns (exact for uniform popularity, where the
replacement rule makes each expert's membership a Markov chain with leave rate ``drift`` and
enter rate h·drift/(N − h); with Zipf(0.8) popularity its U(T) is within 2 % of the topic
router's and 8 % of the hot set's, whose hottest experts are nearly always hot). Every token
has exactly k_e distinct experts; ids are returned in the samplers' common format, int16
(sequences, tokens, layers, k_e), sorted per token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.routing.hmm import LatentRoutingModel

_EPS = 1e-9  # hidden-state probabilities stay inside (0, 1), as simspec.routing.hmm keeps them


def _uniform(num_experts: int, k: int) -> np.ndarray:
    return np.full((1, num_experts), k / num_experts)


def _layer_probabilities(p: np.ndarray | None, num_experts: int, k: int) -> np.ndarray:
    """Inclusion probabilities per layer (L, N): ``p``, or uniform k/N on one layer."""
    if p is None:
        return _uniform(num_experts, k)
    return np.atleast_2d(np.asarray(p, dtype=float))


def _draw(rng: np.random.Generator, targets: np.ndarray, k: int) -> np.ndarray:
    """Exactly ``k`` experts per row with inclusion close to ``targets`` (Pareto order
    sampling, Rosén 1997: the k smallest odds(U_e) / odds(target_e)); boolean (rows, N)."""
    u = rng.random(targets.shape)
    with np.errstate(divide="ignore"):
        key = (u / (1.0 - u)) * ((1.0 - targets) / targets)
    key = np.where(targets >= 1.0, -1.0, key)
    chosen = np.argpartition(key, k - 1, axis=1)[:, :k]
    member = np.zeros(targets.shape, dtype=bool)
    np.put_along_axis(member, chosen, True, axis=1)
    return member


def _replace(
    rng: np.random.Generator, member: np.ndarray, drift: float, weights: np.ndarray
) -> np.ndarray:
    """Replace each member with probability ``drift`` by a non-member drawn in proportion to
    ``weights`` (without replacement: exponential race), keeping the set size."""
    leave = member & (rng.random(member.shape) < drift)
    count = leave.sum(axis=1)
    if not count.any():
        return member
    rows = np.flatnonzero(count)
    race = rng.exponential(size=(len(rows), member.shape[1]))
    with np.errstate(divide="ignore"):
        race /= weights[rows]
    race[member[rows]] = np.inf  # current members (also those leaving) cannot be drawn
    rank = np.argsort(np.argsort(race, axis=1, kind="stable"), axis=1, kind="stable")
    out = member & ~leave
    out[rows] |= rank < count[rows, None]
    return out


def _odds(p: np.ndarray) -> np.ndarray:
    """Replacement weights p/(1 − p): leave rate drift, enter rate ~ drift·p/(1 − p), so each
    expert is in the set with probability ~p (exactly for uniform p)."""
    return p / np.maximum(1.0 - p, 1e-9)


def _ids(member: np.ndarray, k: int) -> np.ndarray:
    """Sorted ids of the k members of each row, int (rows, k)."""
    return np.sort(np.argsort(~member, axis=1, kind="stable")[:, :k], axis=1)


def _check(p: np.ndarray, k: int, drift: float) -> None:
    if not 0 < k < p.shape[1]:
        raise ValueError(f"experts per token must be in [1, N); got k_e = {k}, N = {p.shape[1]}")
    if not 0.0 <= drift <= 1.0:
        raise ValueError(f"drift must be a probability; got {drift}")
    if not np.allclose(p.sum(axis=1), k, rtol=1e-6):
        raise ValueError(f"inclusion probabilities must sum to k_e = {k} in every layer")


@dataclass(frozen=True)
class TopicSampler:
    """Topic router (module docstring): follow the topic with probability ``reuse``.

    Parameters
    ----------
    num_experts, experts_per_token : int
        N and k_e.
    reuse : float
        Probability that a token uses exactly its topic's experts.
    drift : float
        Per-token probability that each topic expert is replaced.
    inclusion_probabilities : array (L, N), optional
        Popularity p_e per layer for fresh draws and replacements (default uniform, one layer).
    """

    num_experts: int
    experts_per_token: int
    reuse: float
    drift: float
    inclusion_probabilities: np.ndarray | None = None

    def _p(self) -> np.ndarray:
        return _layer_probabilities(
            self.inclusion_probabilities, self.num_experts, self.experts_per_token
        )

    def sample_sequences(
        self, rng: np.random.Generator, num_sequences: int, length: int
    ) -> np.ndarray:
        """Routing of ``num_sequences`` sequences of ``length`` tokens: int16 (S, T, L, k_e).

        The topic starts as one popularity draw, the stationary law for uniform popularity.
        """
        p, k = self._p(), self.experts_per_token
        _check(p, k, self.drift)
        if not 0.0 <= self.reuse <= 1.0:
            raise ValueError(f"reuse must be a probability; got {self.reuse}")
        layers = p.shape[0]
        targets = np.tile(p, (num_sequences, 1))  # chain c = sequence * L + layer
        odds = _odds(targets)
        topic = _draw(rng, targets, k)
        out = np.zeros((num_sequences, length, layers, k), dtype=np.int16)
        for t in range(length):
            fresh = _draw(rng, targets, k)
            follow = rng.random(len(targets)) < self.reuse
            member = np.where(follow[:, None], topic, fresh)
            out[:, t] = _ids(member, k).reshape(num_sequences, layers, k)
            topic = _replace(rng, topic, self.drift, odds)
        return out

    def latent_model(self) -> LatentRoutingModel:
        """The two-state hidden-Markov law of each expert (exact for uniform popularity)."""
        return LatentRoutingModel.topic(self._p(), self.reuse, self.drift)


@dataclass(frozen=True)
class HotSetSampler:
    """Drifting hot-set router (module docstring).

    Parameters
    ----------
    num_experts, experts_per_token : int
        N and k_e.
    hot_size : int
        h, experts in the hot set (k_e·hot_share < h < N).
    hot_share : float
        s, share of the routing mass on the hot set.
    drift : float
        Per-token probability that each hot expert is replaced by a cold one.
    inclusion_probabilities : array (L, N), optional
        Base popularity per layer: which experts join the hot set (default uniform, one layer).
    """

    num_experts: int
    experts_per_token: int
    hot_size: int
    hot_share: float
    drift: float
    inclusion_probabilities: np.ndarray | None = None

    def _p(self) -> np.ndarray:
        return _layer_probabilities(
            self.inclusion_probabilities, self.num_experts, self.experts_per_token
        )

    def sample_sequences(
        self, rng: np.random.Generator, num_sequences: int, length: int
    ) -> np.ndarray:
        """Routing of ``num_sequences`` sequences of ``length`` tokens: int16 (S, T, L, k_e)."""
        p, k, h, s = self._p(), self.experts_per_token, self.hot_size, self.hot_share
        _check(p, k, self.drift)
        n = self.num_experts
        if not (k * s < h < n and 0.0 <= s <= 1.0 and k * (1.0 - s) < n - h):
            raise ValueError(f"need k_e·s < h < N and k_e(1 − s) < N − h; got h = {h}, s = {s}")
        layers = p.shape[0]
        member_p = np.tile(np.clip(p * (h / k), 0.0, 1.0 - 1e-9), (num_sequences, 1))
        weights = _odds(member_p)
        hot = _draw(rng, member_p, h)
        hot_rate, cold_rate = k * s / h, k * (1.0 - s) / (n - h)
        out = np.zeros((num_sequences, length, layers, k), dtype=np.int16)
        for t in range(length):
            member = _draw(rng, np.where(hot, hot_rate, cold_rate), k)
            out[:, t] = _ids(member, k).reshape(num_sequences, layers, k)
            hot = _replace(rng, hot, self.drift, weights)
        return out

    def latent_model(self) -> LatentRoutingModel:
        """The two-state hidden-Markov law of each expert (exact for uniform popularity, up to
        Pareto sampling's inclusion probabilities)."""
        return hot_set_model(
            self._p(), self.hot_size, self.hot_share, self.drift, self.experts_per_token
        )


def hot_set_model(
    inclusion_probabilities: np.ndarray,
    hot_size: int,
    hot_share: float,
    drift: float,
    experts_per_token: int,
) -> LatentRoutingModel:
    """The drifting hot set's latent law: usage k_e·s/h in the hot set, k_e(1 − s)/(N − h)
    outside."""
    p = np.atleast_2d(np.asarray(inclusion_probabilities, dtype=float))
    k, n, h = experts_per_token, p.shape[1], hot_size
    hidden = np.clip(h * p / k, _EPS, 1.0 - _EPS)
    on = np.full(p.shape, min(1.0, k * hot_share / h))
    off = np.full(p.shape, k * (1.0 - hot_share) / (n - h))
    params = {"hot_size": float(h), "hot_share": float(hot_share), "drift": float(drift)}
    return LatentRoutingModel(hidden, on, off, float(drift), params)
