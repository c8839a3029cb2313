"""The reuse sampler: exact top-k_e expert sets with uniform popularity and a lag-1 overlap.

Used for uniform popularity with at most a lag-1 overlap profile
(:meth:`~simspec.routing.config.RoutingConfig.uses_reuse_sampler`); every other routing goes
through the max-entropy sampler (:mod:`simspec.routing.maxent`), whose per-expert law (the
two-state chain below) this one shares, at a fraction of its cost: it draws O(k_e) numbers per
token, not O(N).

A token takes exactly k_e distinct experts out of N. Given its predecessor's set S_{t−1}, it
keeps each of those experts independently with probability rho_1 (so it reuses
R ~ Binomial(k_e, rho_1) of them, a uniform subset) and fills the other k_e − R slots with a
uniform sample without replacement from the N − k_e experts not in S_{t−1}. Its expected overlap
with its predecessor is then exactly rho_1, every expert is used with probability k_e / N, and
each expert's on/off sequence is the two-state Markov chain of the max-entropy closed form
(:func:`simspec.routing.overlap.markov_log_silent`); unlike the max-entropy sampler it also
reaches overlaps below chance. Without a predecessor a token is a uniform k_e-subset. When
N < 2 k_e a token must reuse at least 2 k_e − N experts, and lower overlaps are raised to that.

The uniform sample without replacement is Floyd's algorithm (Bentley & Floyd, "Programming
pearls: a sample of brilliance", CACM 30(9), 1987), run for all chains at once: for
j = n − m, ..., n − 1 draw t uniform in 0..j and take t, or j when t is taken already. Its
indices into the complement of S_{t−1} become expert ids by stepping over S_{t−1}'s sorted ids.
"""

from __future__ import annotations

import numpy as np

from simspec.routing.sets import id_dtype

CHUNK_CHAINS = 4096  # chains per vectorised call: small enough to stay in cache


class ReuseSampler:
    """Draws exact top-k_e expert sets, uniform popularity, for many independent chains at once.

    A chain is one (sequence, layer) pair. :meth:`sample` returns sorted expert ids, int16
    (chains, k_e).
    """

    def __init__(self, num_experts: int, experts_per_token: int):
        if not 0 <= experts_per_token <= num_experts:
            raise ValueError(f"k_e = {experts_per_token} of N = {num_experts} experts")
        if num_experts > np.iinfo(np.int16).max:
            raise ValueError(f"at most {np.iinfo(np.int16).max} experts, not {num_experts}")
        self.num_experts = num_experts
        self.k = experts_per_token

    def sample(
        self,
        rng: np.random.Generator,
        chains: int,
        previous: np.ndarray | None = None,
        overlap: float | np.ndarray | None = None,
        subset: np.ndarray | None = None,
    ) -> np.ndarray:
        """One token per chain: its k_e expert ids, int16 (chains, k_e), ascending.

        With ``previous`` (the preceding token's ids, (chains, k_e), ascending) and ``overlap``
        set (a number, or one per chain), each previous expert is kept with probability
        ``overlap`` and the rest are drawn from the experts not in ``previous``; otherwise the
        token is a uniform k_e-subset of the N experts.

        ``subset`` (chain indices) computes only those chains, (len(subset), k_e): the draws
        are made for every chain, so a chain's ids do not depend on which others are computed.
        """
        k, n = self.k, self.num_experts
        dependent = previous is not None and overlap is not None
        u_keep = rng.random((k, chains)) if dependent and k else None
        u_fill = rng.random((k, chains))
        if subset is not None:
            u_fill = u_fill[:, subset]
            chains = len(subset)
        if k == 0 or chains == 0:
            return np.zeros((chains, k), dtype=np.int16)
        if not dependent:
            return np.sort(_floyd(u_fill, n, np.full(chains, k)).T, axis=1)
        assert u_keep is not None and previous is not None and overlap is not None
        # Work column by column, (k_e, chains): every operation runs along the chains.
        before = np.asarray(previous if subset is None else previous[subset]).T.astype(np.int16)
        rho = np.asarray(overlap, dtype=float)
        if subset is not None:
            u_keep = u_keep[:, subset]
            rho = rho[subset] if rho.ndim else rho
        keep = u_keep < rho
        fresh = k - keep.sum(axis=0, dtype=np.int64)
        excess = fresh - (n - k)  # N < 2 k_e: too few experts outside ``previous``
        if excess.max() > 0:
            dropped = ~keep
            keep |= dropped & (np.cumsum(dropped, axis=0) <= excess)
            fresh = k - keep.sum(axis=0, dtype=np.int64)
        both = np.empty((2 * k, chains), dtype=np.int16)
        index = both[k:]
        index[:] = _floyd(u_fill, n - k, fresh)  # -1 beyond each chain's ``fresh`` entries
        step = np.empty(index.shape, dtype=bool)
        for j in range(k):  # the index-th expert not in ``previous``, by its sorted ids
            index += np.less_equal(before[j], index, out=step)  # (-1 stays -1)
        np.copyto(both[:k], np.where(keep, before, np.int16(-1)))
        rows = both.T.copy()
        rows.sort(axis=1)  # k entries -1 (dropped or unused), then the k ids
        return rows[:, k:]

    def sample_sequences(
        self,
        rng: np.random.Generator,
        num_sequences: int,
        num_layers: int,
        length: int,
        overlap: float | np.ndarray | None,
    ) -> np.ndarray:
        """Routing of ``num_sequences`` sequences of ``length`` tokens from their start: ids
        (num_sequences, length, num_layers, k_e) of :func:`~simspec.routing.sets.id_dtype`.

        ``overlap`` is a number or one value per layer; the loop runs over positions only.
        """
        chains = num_sequences * num_layers
        if isinstance(overlap, np.ndarray):
            overlap = np.tile(overlap, num_sequences)
        out = np.zeros((num_sequences, length, num_layers, self.k), id_dtype(self.num_experts))
        previous = None
        for t in range(length):
            previous = self.sample(rng, chains, previous, overlap)
            out[:, t] = previous.reshape(num_sequences, num_layers, self.k)
        return out


def continue_drafts(
    sampler: ReuseSampler,
    previous: np.ndarray,
    overlap: float | np.ndarray | None,
    rng: np.random.Generator,
    keep: np.ndarray | None = None,
) -> np.ndarray:
    """One more draft after each of the given tokens (ids (sequences, length, layers, k_e),
    ascending), by the reuse sampler, chunk by chunk; ``overlap`` is a number or one value per
    layer. With ``keep`` (sequences, length) only the marked tokens' drafts are computed (the
    others are zeros); each chunk's draws are made for all its chains, so a draft's ids do not
    depend on ``keep``."""
    shape = previous.shape
    flat = previous.reshape(-1, shape[-1])
    out = np.zeros_like(flat) if keep is not None else np.empty_like(flat)
    layers = np.tile(np.arange(shape[2]), shape[0] * shape[1])
    wanted = None if keep is None else np.repeat(keep.reshape(-1), shape[2])
    for start in range(0, len(flat), CHUNK_CHAINS):
        stop = min(start + CHUNK_CHAINS, len(flat))
        chunk = overlap[layers[start:stop]] if isinstance(overlap, np.ndarray) else overlap
        if wanted is None:
            out[start:stop] = sampler.sample(rng, stop - start, flat[start:stop], chunk)
            continue
        subset = np.flatnonzero(wanted[start:stop])
        ids = sampler.sample(rng, stop - start, flat[start:stop], chunk, subset)
        out[start + subset] = ids
    return out.reshape(shape)


def _floyd(u: np.ndarray, n: int, m: np.ndarray) -> np.ndarray:
    """Row c: ``m[c]`` distinct integers drawn uniformly from 0..n − 1 by Floyd's algorithm
    from the uniforms ``u[:, c]``, in entries 0..m[c] − 1 of column c, −1 in the others: int16
    (width, rows), width = len(u) ≥ max m."""
    width, rows = u.shape
    out = np.full((width, rows), -1, dtype=np.int16)  # column by column, each contiguous
    taken = np.empty(rows, dtype=bool)
    same = np.empty(rows, dtype=bool)
    for i in range(int(m.max(initial=0))):
        j = np.minimum(n - m + i, n - 1)  # this step's top value (chains done: any value < n)
        t = (u[i] * (j + 1)).astype(np.int16)
        taken[:] = False
        for prior in out[:i]:
            taken |= np.equal(prior, t, out=same)
        out[i] = np.where(i < m, np.where(taken, j, t), -1)
    return out
