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

from simspec.routing.sets import id_dtype


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
        """``width`` draws with replacement per chain, from its layer's weights (alias method).

        Drawn as (chains, width), returned transposed as int16, (width, chains): draw c of every
        chain is one contiguous row, the layout :func:`_read_round` works in.
        """
        slots = rng.integers(0, self.num_experts, size=(len(layers), width)).T
        if not self.uniform:
            cells = layers * self.num_experts + slots  # (width, chains)
            draws = rng.random((len(layers), width)).T
            keep = draws < self._accept.take(cells)
            slots = np.where(keep, slots, self._alias.take(cells))
        return slots.astype(np.int16, order="C")

    def sample(
        self,
        rng: np.random.Generator,
        layer_of_chain: np.ndarray,
        previous: np.ndarray | None = None,
        overlap: float | np.ndarray | None = None,
        *,
        dtype: type = np.int64,
    ) -> np.ndarray:
        """One token per chain: its k_e expert ids, array (chains, k_e) of ``dtype``.

        With ``previous`` (the preceding token's ids, same shape) and ``overlap`` set (a number,
        or one per chain), the token reuses Binomial(k_e, overlap) of the previous experts and
        samples the rest from the others; otherwise it is an independent weighted sample.

        The reused experts are the first R of ``previous`` in the order of k_e uniform keys
        (a random shuffle); the other slots are filled by rounds of ``k_e − min(count) + 4``
        alias draws per unfinished chain, read in draw order (:func:`_read_round`).
        """
        n, k = len(layer_of_chain), self.k
        if k == 0 or n == 0:
            return np.full((n, k), -1, dtype=dtype)
        if self.num_experts > np.iinfo(np.int16).max:
            raise ValueError(f"at most {np.iinfo(np.int16).max} experts, not {self.num_experts}")
        out = np.empty((n, k), dtype=np.int16)  # every slot is written before the end
        count = np.zeros(n, dtype=np.int64)
        excluded = None  # (k_e, chains): the previous token's experts, which are not drawn
        if previous is not None and overlap is not None:
            previous = np.asarray(previous)
            reuse = rng.binomial(k, overlap, size=n)
            order = np.argsort(rng.random((n, k)), axis=1)
            # The shuffled previous ids; the slots from R on are overwritten by the draws.
            out[:] = previous.reshape(-1)[order + (np.arange(n) * k)[:, None]]
            count = reuse.astype(np.int64)
            excluded = previous.T.astype(np.int16, order="C")
        pending = np.flatnonzero(count < k)
        first = True
        while len(pending):
            width = int(k - count[pending].min()) + 4
            cand = self._candidates(rng, layer_of_chain[pending], width)
            pending = _read_round(out, count, excluded, pending, cand, first=first)
            first = False
        return out.astype(dtype, copy=False)


def _read_round(
    out: np.ndarray,
    count: np.ndarray,
    excluded: np.ndarray | None,
    pending: np.ndarray,
    cand: np.ndarray,
    *,
    first: bool,
) -> np.ndarray:
    """Read one round of draws ``cand`` (width, pending chains) in draw order, all at once.

    Successive sampling reads a chain's draws one by one and keeps a draw when the chain still
    needs experts and the expert is not taken yet (chosen earlier or excluded). Read that way,
    draw c of a chain is kept exactly when (i) its expert was not taken before this round,
    (ii) no earlier draw c' < c of the round has the same expert, and (iii) at most ``need``
    draws up to c pass (i) and (ii): a repeat of an earlier draw is rejected whether that draw
    was kept (its expert is now taken), excluded (taken before) or came after the chain was
    full (it still is). Kept draws fill the chain's free slots in draw order.

    Updates ``out`` (chains, k_e) and ``count`` in place and returns the chains that still
    need experts. In the ``first`` round the chosen experts are the reused ones, all excluded.
    """
    width = len(cand)
    k = out.shape[1]
    whole = len(pending) == len(out)
    rows = out if whole else out[pending]
    have = count[pending]
    fresh = np.ones(cand.shape, dtype=bool)  # (i): against excluded and chosen experts
    differs = np.empty(cand.shape, dtype=bool)
    taken = [] if excluded is None else list(excluded if whole else excluded[:, pending])
    if not first:
        taken += list(np.where(np.arange(k) < have[:, None], rows, -1).T)
    for e in taken:
        fresh &= np.not_equal(cand, e, out=differs)
    for shift in range(1, width):  # (ii): differs from every earlier draw of its chain
        fresh[shift:] &= np.not_equal(cand[shift:], cand[:-shift], out=differs[shift:])
    rank = np.empty(cand.shape, dtype=np.int16)  # draws passing (i) and (ii) up to c
    rank[0] = fresh[0]
    for c in range(1, width):
        np.add(rank[c - 1], fresh[c], out=rank[c])
    need = k - have
    keep = fresh & (rank <= need.astype(np.int16))
    kept = np.minimum(rank[-1], need)
    slot = np.arange(k)
    free = (slot >= have[:, None]) & (slot < (have + kept)[:, None])  # filled in draw order
    rows[free] = cand.T[keep.T]
    if not whole:
        out[pending] = rows
    count[pending] = have + kept
    return pending[have + kept < k]


def sample_sequences(
    sampler: ExpertSampler,
    rng: np.random.Generator,
    num_sequences: int,
    length: int,
    overlap: float | np.ndarray | None,
) -> np.ndarray:
    """Routing of ``num_sequences`` sequences of ``length`` tokens: expert ids.

    ``overlap`` is a number or one value per layer. Returns an array (num_sequences, length,
    num_layers, k_e) of :func:`~simspec.routing.sets.id_dtype` (uint8 up to 256 experts). The
    loop runs over token positions only; sequences and layers are vectorised.
    """
    layers = np.tile(np.arange(sampler.num_layers), num_sequences)
    if isinstance(overlap, np.ndarray):
        overlap = overlap[layers]
    shape = (num_sequences, length, sampler.num_layers, sampler.k)
    out = np.zeros(shape, dtype=id_dtype(sampler.num_experts))
    previous = None
    for t in range(length):
        current = sampler.sample(rng, layers, previous, overlap, dtype=np.int16)
        out[:, t] = current.reshape(num_sequences, sampler.num_layers, sampler.k)
        previous = current
    return out
