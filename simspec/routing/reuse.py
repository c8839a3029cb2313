"""The reuse sampler: exact top-k_e expert sets with popularity weights and lag-1 overlap.

The original Monte-Carlo router of simspec, kept for uniform popularity with a lag-1 overlap
only (:meth:`~simspec.routing.config.RoutingConfig.uses_reuse_sampler`), so those scenarios
reproduce byte for byte; every other routing goes through :mod:`simspec.routing.maxent`.

A token takes exactly k_e distinct experts. Without memory it is a weighted sample without
replacement: draws with replacement from its layer's popularity weights (Walker/Vose alias
tables, O(1) per draw), repeats skipped, in draw order (successive sampling). With a lag-1
overlap rho_1, token t reuses R ~ Binomial(k_e, rho_1) experts chosen uniformly from S_{t−1} and
fills the other k_e − R slots from the experts not in S_{t−1}, so its expected overlap with its
predecessor is exactly rho_1 and each expert's on/off sequence is the two-state Markov chain
of the max-entropy closed form (:func:`simspec.routing.overlap.markov_log_silent`); unlike the
max-entropy sampler it also reaches overlaps below chance. A rejected draft continues the chain
from its predecessor with its own overlap.
"""

from __future__ import annotations

import numpy as np


def alias_tables(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker/Vose alias tables, one per row of ``weights`` (rows need not be normalised).

    Drawing slot j uniformly, then keeping j with probability ``accept[j]`` and otherwise taking
    ``alias[j]``, samples index j with probability weights[j] / Σ weights, in O(1) per draw.
    """
    rows, n = weights.shape
    accept = np.ones((rows, n))
    alias = np.tile(np.arange(n), (rows, 1))
    for r in range(rows):
        scaled = weights[r] * n / weights[r].sum()
        small = [j for j in range(n) if scaled[j] < 1.0]
        large = [j for j in range(n) if scaled[j] >= 1.0]
        while small and large:
            s, g = small.pop(), large.pop()
            accept[r, s], alias[r, s] = scaled[s], g
            scaled[g] -= 1.0 - scaled[s]
            (small if scaled[g] < 1.0 else large).append(g)
    return accept, alias


class ExpertSampler:
    """Draws exact top-k_e expert sets for many independent chains at once.

    A chain is one (sequence, layer) pair; ``layer_of_chain`` says which layer's popularity it
    uses. Methods take an explicit Generator and return expert ids, shape (chains, k_e).
    """

    def __init__(self, weights: np.ndarray, experts_per_token: int):
        self.weights = weights
        self.num_layers, self.num_experts = weights.shape
        self.k = experts_per_token
        self.uniform = bool(np.allclose(weights, 1.0 / self.num_experts))
        self._accept, self._alias = alias_tables(weights)

    def _candidates(self, rng: np.random.Generator, layers: np.ndarray, width: int) -> np.ndarray:
        """``width`` draws with replacement per chain, from its layer's weights (alias method)."""
        slots = rng.integers(0, self.num_experts, size=(len(layers), width))
        if self.uniform:
            return slots
        rows = layers[:, None]
        keep = rng.random((len(layers), width)) < self._accept[rows, slots]
        return np.where(keep, slots, self._alias[rows, slots])

    def sample(
        self,
        rng: np.random.Generator,
        layer_of_chain: np.ndarray,
        previous: np.ndarray | None = None,
        overlap: float | np.ndarray | None = None,
    ) -> np.ndarray:
        """One token per chain: its k_e expert ids, int array (chains, k_e).

        With ``previous`` (the preceding token's ids, same shape) and ``overlap`` set (a number,
        or one per chain), the token reuses Binomial(k_e, overlap) of the previous experts and
        samples the rest from the others; otherwise it is an independent weighted sample.
        """
        n, k = len(layer_of_chain), self.k
        out = np.full((n, k), -1, dtype=np.int64)
        if k == 0 or n == 0:
            return out
        count = np.zeros(n, dtype=np.int64)
        excluded = None
        if previous is not None and overlap is not None:
            reuse = rng.binomial(k, overlap, size=n)
            order = np.argsort(rng.random((n, k)), axis=1)
            shuffled = np.take_along_axis(previous, order, axis=1)
            out = np.where(np.arange(k)[None, :] < reuse[:, None], shuffled, -1)
            count = reuse.astype(np.int64)
            excluded = previous
        # taken[c, e]: expert e is already chosen for chain c, or excluded (previous token).
        taken = np.zeros((n, self.num_experts), dtype=bool)
        rows = np.arange(n)
        if excluded is not None:
            taken[rows[:, None], excluded] = True
        pending = np.flatnonzero(count < k)
        while len(pending):
            # Successive sampling: draws with replacement, skipping repeats, in draw order.
            width = int(k - count[pending].min()) + 4
            cand = self._candidates(rng, layer_of_chain[pending], width)
            for c in range(width):
                col = cand[:, c]
                ok = (count[pending] < k) & ~taken[pending, col]
                chosen, expert = pending[ok], col[ok]
                taken[chosen, expert] = True
                out[chosen, count[chosen]] = expert
                count[chosen] += 1
            pending = pending[count[pending] < k]
        return out


def sample_sequences(
    sampler: ExpertSampler,
    rng: np.random.Generator,
    num_sequences: int,
    length: int,
    overlap: float | np.ndarray | None,
) -> np.ndarray:
    """Routing of ``num_sequences`` sequences of ``length`` tokens: expert ids.

    ``overlap`` is a number or one value per layer. Returns int16 array (num_sequences, length,
    num_layers, k_e). The loop runs over token positions only; sequences and layers are
    vectorised.
    """
    layers = np.tile(np.arange(sampler.num_layers), num_sequences)
    if isinstance(overlap, np.ndarray):
        overlap = overlap[layers]
    out = np.zeros((num_sequences, length, sampler.num_layers, sampler.k), dtype=np.int16)
    previous = None
    for t in range(length):
        current = sampler.sample(rng, layers, previous, overlap)
        out[:, t] = current.reshape(num_sequences, sampler.num_layers, sampler.k)
        previous = current
    return out
