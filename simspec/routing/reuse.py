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

numpy reads a round of draws for all chains at once (:func:`_read_round`), in whole-array passes
that cost more than the draws themselves; with numba installed the per-chain work runs as two
compiled loops instead (:mod:`simspec.accel`): :data:`SHUFFLE` orders the reused experts and
:data:`READ_ROUND` reads each round draw by draw. numpy still makes every draw, in the same calls
and order, with the same round widths for the same chains, so ids and Generator states are the
same either way (tests/routing/test_reuse_kernel.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from simspec import accel
from simspec.routing.sets import id_dtype

#: The compiled round's ``draws`` under uniform popularity, and its ``excluded`` without reuse.
_NO_DRAWS = np.empty((0, 0))
_NO_IDS = np.empty((0, 0), dtype=np.int16)


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

    @functools.cached_property
    def _tables(self) -> tuple[np.ndarray, np.ndarray]:
        """The alias tables (:func:`alias_tables`), built on the first draw: an analytic run
        or a scenario check builds a sampler and never draws."""
        return alias_tables(self.weights)

    @property
    def _accept(self) -> np.ndarray:
        return self._tables[0]

    @property
    def _alias(self) -> np.ndarray:
        return self._tables[1]

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
        alias draws per unfinished chain, read in draw order (:func:`_read_round`, or with numba
        the compiled loops, :meth:`_fill_compiled`).
        """
        n, k = len(layer_of_chain), self.k
        if k == 0 or n == 0:
            return np.full((n, k), -1, dtype=dtype)
        if self.num_experts > np.iinfo(np.int16).max:
            raise ValueError(f"at most {np.iinfo(np.int16).max} experts, not {self.num_experts}")
        out = np.empty((n, k), dtype=np.int16)  # every slot is written before the end
        count = np.zeros(n, dtype=np.int64)
        keys = None  # the shuffle's keys, when the token reuses experts of ``previous``
        if previous is not None and overlap is not None:
            previous = np.asarray(previous)
            reuse = rng.binomial(k, overlap, size=n)
            keys = rng.random((n, k))
            count = reuse.astype(np.int64, copy=False)  # binomial draws are already int64
        read = READ_ROUND.compiled(n)  # (None until the process's warm-up work is done)
        shuffle = SHUFFLE.compiled() if read is not None else None
        if read is not None and shuffle is not None:
            self._fill_compiled(read, shuffle, rng, layer_of_chain, out, count, previous, keys)
            return out.astype(dtype, copy=False)
        excluded = None  # (k_e, chains): the previous token's experts, which are not drawn
        if previous is not None and keys is not None:
            order = np.argsort(keys, axis=1)
            # The shuffled previous ids; the slots from R on are overwritten by the draws.
            out[:] = previous.reshape(-1)[order + (np.arange(n) * k)[:, None]]
            excluded = previous.T.astype(np.int16, order="C")
        pending = np.flatnonzero(count < k)
        first = True
        while len(pending):
            width = int(k - count[pending].min()) + 4
            cand = self._candidates(rng, layer_of_chain[pending], width)
            pending = _read_round(out, count, excluded, pending, cand, first=first)
            first = False
        return out.astype(dtype, copy=False)

    def _fill_compiled(
        self,
        read: Callable[..., tuple[int, int]],
        shuffle: Callable[..., bool],
        rng: np.random.Generator,
        layer_of_chain: np.ndarray,
        out: np.ndarray,
        count: np.ndarray,
        previous: np.ndarray | None,
        keys: np.ndarray | None,
    ) -> None:
        """:meth:`sample` after its first draws, by the loops :data:`SHUFFLE` and
        :data:`READ_ROUND`: the same rounds of the same widths, drawn by the same calls in the
        same order as the numpy path (whose ``_candidates`` draws slots, then acceptance draws),
        so the ids and the Generator's state afterwards are identical. Fills ``out``, ``count``.
        """
        k = self.k
        excluded = _NO_IDS  # (chains, k_e): the previous token's experts, which are not drawn
        if previous is not None and keys is not None:
            excluded = np.ascontiguousarray(previous, dtype=np.int16)
            if shuffle(out, excluded, keys):  # two equal keys: their order is argsort's
                order = np.argsort(keys, axis=1)
                out[:] = previous.reshape(-1)[order + (np.arange(len(out)) * k)[:, None]]
        layers = np.ascontiguousarray(layer_of_chain, dtype=np.int64)
        pending = np.flatnonzero(count < k)
        lowest = int(count.min())  # the fewest experts a pending chain has (when there is one)
        while len(pending):
            width = k - lowest + 4
            slots = rng.integers(0, self.num_experts, size=(len(pending), width))
            draws = _NO_DRAWS if self.uniform else rng.random((len(pending), width))
            left, lowest = read(
                out, count, excluded, pending, slots, draws, self._accept, self._alias, layers
            )
            pending = pending[:left]


@accel.kernel
def _shuffle_loop(out, previous, keys):  # type: ignore[no-untyped-def]
    """Row r: out[r, j] = previous[r, order[j]], ``order`` sorting keys[r] ascending (numpy's
    ``argsort`` order whenever the keys differ): previous[r, j] goes to the rank of keys[r, j],
    the number of keys below it (no branches: a sort's comparisons of random keys are
    mispredicted half the time). Returns whether some row has two equal keys, where argsort's
    order is its algorithm's (the caller then redoes the shuffle). Equal keys share a rank, so
    a row's ranks then sum to less than 0 + 1 + ... + (k_e − 1)."""
    chains, k = keys.shape
    distinct = k * (k - 1) // 2
    tied = 0
    for r in range(chains):
        total = 0
        for j in range(k):
            key = keys[r, j]
            rank = 0
            for i in range(k):
                rank += keys[r, i] < key
            total += rank
            out[r, rank] = previous[r, j]
        tied += total != distinct
    return tied > 0


@accel.kernel
def _read_round_loop(out, count, excluded, pending, slots, draws, accept, alias, layer_of_chain):  # type: ignore[no-untyped-def]
    """One round of successive sampling, chain by chain, draw by draw (what :func:`_read_round`
    does all at once). Pending chain p = ``pending[i]`` reads its draws c in order: the expert is
    ``slots[i, c]``, or under weights (``draws`` not empty) the alias table's answer for that
    slot and acceptance draw ``draws[i, c]``; it is kept while the chain needs experts
    (``count`` < k_e) when it is neither among ``excluded[p]`` nor chosen already
    (``out[p, :count[p]]``). Compacts the chains still short of k_e to the front of
    ``pending``, in order; returns how many there are and the fewest experts one of them has
    (k_e when there is none).

    ``stamp[e] == i + 1`` marks expert e taken for the i-th chain: set for its excluded and
    chosen experts before its draws are read, it needs no clearing for the next chain."""
    k = out.shape[1]
    num = accept.shape[1]
    width = slots.shape[1]
    weighted = draws.shape[0] > 0
    stamp = np.zeros(num, dtype=np.int64)
    left = 0
    lowest = k
    for i in range(len(pending)):
        p = pending[i]
        have = count[p]
        layer = layer_of_chain[p]
        for j in range(excluded.shape[1]):
            if 0 <= excluded[p, j] < num:  # ids out of range are never drawn: no mark needed
                stamp[excluded[p, j]] = i + 1
        for j in range(have):
            if 0 <= out[p, j] < num:
                stamp[out[p, j]] = i + 1
        c = 0
        while have < k and c < width:
            expert = slots[i, c]
            if weighted and not draws[i, c] < accept[layer, expert]:
                expert = alias[layer, expert]
            c += 1
            if stamp[expert] != i + 1:
                stamp[expert] = i + 1
                out[p, have] = expert
                have += 1
        count[p] = have
        if have < k:
            pending[left] = p
            left += 1
            lowest = min(lowest, have)
    return left, lowest


#: The shuffle of the reused experts, as an optional compiled kernel.
SHUFFLE: accel.Kernel = _shuffle_loop
#: One round of draws read in draw order, as an optional compiled kernel. ``sample`` passes its
#: chains as work: the first 2^21 of a process (~1 CPU s of numpy; the default scenario samples
#: 1.97M) run on the numpy path, where loading numba (~0.5 s) would cost what it saves.
READ_ROUND: accel.Kernel = _read_round_loop
READ_ROUND.warmup = 1 << 21


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
