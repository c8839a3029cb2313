"""Expert sets in three representations: ids, membership tables and history bitmasks.

A token's routing in one MoE layer is the set S of its k_e experts. The samplers store it as
expert ids (k_e per token and layer, in the smallest type that holds them, :func:`id_dtype`:
compact, and what a trace records); the union over every token of every request in a verify
pass is one scatter into a (layers, N) membership table and one count (:func:`union_sizes`).
Growing unions (the k = 0..K passes of one state, every state at once) use bitmasks: a token's
set in one layer packed into ceil(N/64) 64-bit words (:func:`to_bits`), so a running union is
an OR and its size a popcount (:func:`cumulative_union_sizes`; :func:`window_union_sizes` for
the oracle's (state, k) table of a request, reading each stored token once). The max-entropy
sampler conditions each expert on its own recent past, kept as one integer per expert whose
bit d − 1 says "used d tokens back" (:func:`history_bits`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np


def id_dtype(num_experts: int) -> np.dtype:
    """The smallest integer type that stores expert ids 0..N−1: uint8 up to N = 256 (every
    catalog model but the 384- and 512-expert ones), else int16.

    Examples
    --------
    >>> id_dtype(128), id_dtype(384)
    (dtype('uint8'), dtype('int16'))
    """
    return np.dtype(np.uint8 if num_experts <= 256 else np.int16)


def to_sets(ids: np.ndarray, num_experts: int) -> np.ndarray:
    """Expert ids (..., k_e) as boolean membership (..., N).

    Examples
    --------
    >>> to_sets(np.array([[0, 2]]), 4).tolist()
    [[True, False, True, False]]
    """
    sets = np.zeros((*ids.shape[:-1], num_experts), dtype=bool)
    np.put_along_axis(sets, ids.astype(np.int64), True, axis=-1)
    return sets


def union_sizes(ids: np.ndarray, num_experts: int) -> np.ndarray:
    """Distinct experts per layer of the union over tokens.

    ``ids`` is (tokens, layers, k_e); returns int array (layers,): one scatter into a
    (layers, N) membership table and a count.
    """
    tokens, layers = ids.shape[:2]
    if tokens == 0 or layers == 0:
        return np.zeros(layers, dtype=np.int64)
    member = np.zeros(layers * num_experts, dtype=bool)  # (layers, N), flat
    member[(np.arange(layers) * num_experts)[:, None] + ids] = True
    return np.count_nonzero(member.reshape(layers, num_experts), axis=1).astype(np.int64)


def history_bits(previous: list[np.ndarray], num_experts: int) -> np.ndarray:
    """History bitmask for :meth:`simspec.routing.maxent.MaxEntSampler.step` from earlier ids.

    ``previous[d - 1]`` holds the ids (chains, k_e) of the token d positions back (entries < 0
    mean "no such token"). Returns (chains, N) of int8 up to 7 tokens back (a quarter of the
    memory the sampler reads), else int32.
    """
    chains = previous[0].shape[0] if previous else 0
    dtype = np.int8 if len(previous) < 8 else np.int32
    bits = np.zeros((chains, num_experts), dtype=dtype)
    flat = bits.reshape(-1)  # cell c·N + e; a token's ids are distinct, so no cell repeats
    first_cell = (np.arange(chains) * num_experts)[:, None]
    for d, ids in enumerate(previous):
        cells = first_cell + ids
        valid = ids >= 0
        if not valid.all():
            cells = cells[valid]
        flat[cells] |= 1 << d
    return bits


def to_bits(ids: np.ndarray, num_experts: int) -> np.ndarray:
    """Expert ids (..., k_e) as bitmasks (..., ceil(N / 64)) of uint64: expert e is bit e % 64
    of word e // 64.

    A set is the OR of its ids' rows in a table of single bits (:func:`_bit_table`, row e: the
    words of 1 << e): one ``take`` per id slot, ORed in place. A repeated id sets its bit once,
    as a membership table would.

    Examples
    --------
    >>> to_bits(np.array([[0, 2, 64]]), 128).tolist()
    [[5, 1]]
    """
    ids = np.asarray(ids)
    table = _bit_table(num_experts)
    slots = ids.reshape(int(np.prod(ids.shape[:-1])), ids.shape[-1]).T.astype(np.intp)
    if not len(slots):
        return np.zeros((*ids.shape[:-1], table.shape[1]), dtype=np.uint64)
    out = table.take(slots[0], axis=0)
    for slot in slots[1:]:
        out |= table.take(slot, axis=0)
    return out.reshape(*ids.shape[:-1], table.shape[1])


def popcounts(bits: np.ndarray) -> np.ndarray:
    """Set bits of bitmasks (..., words) summed over the words: int64 (...) (one popcount per
    word column, added, rather than a reduction along a short last axis).

    Examples
    --------
    >>> popcounts(to_bits(np.array([[0, 2, 64]]), 128)).tolist()
    [3]
    """
    count = np.bitwise_count(bits[..., 0]).astype(np.int64)
    for w in range(1, bits.shape[-1]):
        count += np.bitwise_count(bits[..., w])
    return count


@functools.cache
def _bit_table(num_experts: int) -> np.ndarray:
    """(N, ceil(N / 64)) uint64: entry (e, w) is 1 << (e % 64) when e // 64 = w, else 0."""
    experts = np.arange(num_experts)
    table = np.zeros((num_experts, (num_experts + 63) // 64), dtype=np.uint64)
    table[experts, experts // 64] = np.left_shift(np.uint64(1), (experts % 64).astype(np.uint64))
    table.flags.writeable = False
    return table


def cumulative_union_sizes(ids: np.ndarray, num_experts: int) -> np.ndarray:
    """Distinct experts per layer of the union of the first j + 1 tokens, for every j.

    ``ids`` is (..., tokens, layers, k_e); returns int64 (..., tokens, layers): entry j is
    |S_0 ∪ ... ∪ S_j| per layer (bitmasks, cumulative OR over tokens, popcount).
    """
    return popcounts(np.bitwise_or.accumulate(to_bits(ids, num_experts), axis=-3))


def window_union_sizes(
    true: np.ndarray,
    rejected: Sequence[np.ndarray],
    accepted: np.ndarray,
    kmax: int,
    num_experts: int,
) -> np.ndarray:
    """Distinct experts per layer of every (state, k) pass of one request: int64 (S, kmax + 1,
    layers), S = len(``accepted``).

    A pass at state s with k drafts feeds the true tokens s..s + min(k, a_s) and then the
    rejected drafts of depths 1..k − a_s of state s (``a_s = accepted[s]``, at most kmax: the
    drafts the target accepts of kmax). ``true`` holds the request's true tokens (T, layers, k_e)
    (T ≥ s + a_s + 1 for every s); ``rejected[r - 1]`` the depth-r rejected drafts (S', layers,
    k_e), row s for state s, for r = 1..max(kmax − a_s). Entry (s, k) equals the union of the
    (s, k) pass's tokens (:func:`cumulative_union_sizes` of the gathered ids), but each stored
    token is read once, not once per window it belongs to: state s's running union starts
    with true token s, takes true tokens s + 1..s + a_s (counts for k ≤ a_s), then its rejected
    drafts in depth order (count for k = a_s + r). Tokens become bitmasks (:func:`to_bits`),
    the running unions ORs and the counts popcounts.
    """
    states = len(accepted)
    accepted = np.asarray(accepted, dtype=np.int64)
    layers = true.shape[1]
    if states == 0:
        return np.zeros((0, kmax + 1, layers), dtype=np.int64)
    deepest = kmax - int(accepted.min())
    # Column j: the pass of j + 1 true tokens (k = j <= a_s); column a_s + r: rejected depth r.
    true_counts = np.empty((states, kmax + 1, layers), dtype=np.int64)
    bits = to_bits(true[: states + kmax], num_experts)
    if len(bits) < states + kmax:  # windows that run past the text are never read
        pad = np.zeros((states + kmax - len(bits), *bits.shape[1:]), dtype=bits.dtype)
        bits = np.concatenate([bits, pad])
    window = bits[:states].copy()  # every state's union of true tokens s..s + j
    base = window.copy()  # ... up to j = a_s
    for j in range(kmax + 1):
        if j:
            window |= bits[j : j + states]
            np.copyto(base, window, where=(accepted == j)[:, None, None])
        true_counts[:, j] = popcounts(window)
    out = true_counts
    rows = np.arange(states)  # the states that read depth r: a_s + r <= kmax
    whole = True  # (then the depth is read as a slice, without a gather)
    for r in range(1, deepest + 1):
        reads = accepted[rows] + r <= kmax
        if not reads.all():
            rows, base, whole = rows[reads], base[reads], False
        ids = rejected[r - 1][:states] if whole else rejected[r - 1][rows]
        base |= to_bits(ids, num_experts)
        out[rows, accepted[rows] + r] = popcounts(base)
    return out
