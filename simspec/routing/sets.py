"""Expert sets in three representations: ids, membership tables and history bitmasks.

A token's routing in one MoE layer is the set S of its k_e experts. The samplers store it as
expert ids (k_e per token and layer, in the smallest type that holds them, :func:`id_dtype`:
compact, and what a trace records); the union over every token of every request in a verify
pass is one scatter into a (layers, N) membership table and one count (:func:`union_sizes`).
Growing unions (the k = 0..K passes of one state, every state at once) use bitmasks: a token's
set in one layer packed into ceil(N/64) 64-bit words (:func:`to_bits`), so a running union is
an OR and its size a popcount (:func:`cumulative_union_sizes`; :func:`window_union_sizes` for
the oracle's (state, k) table of a request, reading each stored token once). Those loops have
optional compiled forms (:mod:`simspec.accel`) that give the same integers. The max-entropy
sampler conditions each expert on its own recent past, kept as one integer per expert whose
bit d − 1 says "used d tokens back" (:func:`history_bits`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from simspec import accel

BITS_CHUNK = 65536  # sets converted to bitmasks per step (bounds the k_e x sets temporaries)


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

    ``ids`` is (tokens, layers, k_e); returns int array (layers,). Eight uint8 ids per token
    and layer (most catalog models) run as a compiled loop when numba is installed
    (:data:`UNION_PACKED`: bitmasks ORed along layers, then popcounts); otherwise one scatter
    into a (layers, N) membership table and a count. The same integers either way.
    """
    tokens, layers, size = ids.shape
    if tokens == 0 or layers == 0:
        return np.zeros(layers, dtype=np.int64)
    union = UNION_PACKED.compiled(1) if ids.dtype == np.uint8 and size == 8 else None
    if union is not None:
        words = (num_experts + 63) // 64
        out = np.empty(layers, dtype=np.int64)
        acc = np.zeros((words + words % 2, layers), dtype=np.uint64)
        union(np.ascontiguousarray(ids).view(np.uint64)[..., 0], acc, out)
        return out
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

    Word w of a set is the OR of its ids' entries in a table of single bits (:func:`_bit_table`,
    row w: 1 << (e % 64) for the experts e of that word, 0 for the others): one ``take`` per
    word, laid out id slot by id slot so the k_e − 1 ORs run over contiguous rows, a chunk of
    sets at a time. A repeated id sets its bit once, as a membership table would.

    Examples
    --------
    >>> to_bits(np.array([[0, 2, 64]]), 128).tolist()
    [[5, 1]]
    """
    ids = np.asarray(ids)
    table = _bit_table(num_experts)
    flat = ids.reshape(int(np.prod(ids.shape[:-1])), ids.shape[-1])
    out = np.zeros((len(flat), len(table)), dtype=np.uint64)
    for start in range(0, len(flat), BITS_CHUNK):
        slots = flat[start : start + BITS_CHUNK].T  # (k_e, sets)
        for w, row in enumerate(table):
            bits = row.take(slots)  # each id's bit in word w, (k_e, sets) contiguous
            word = bits[0].copy() if len(bits) else np.zeros(slots.shape[1], dtype=np.uint64)
            for slot in bits[1:]:
                word |= slot
            out[start : start + len(word), w] = word
    return out.reshape(*ids.shape[:-1], len(table))


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
    """(ceil(N / 64), N) uint64: entry (w, e) is 1 << (e % 64) when e // 64 = w, else 0."""
    experts = np.arange(num_experts)
    table = np.zeros(((num_experts + 63) // 64, num_experts), dtype=np.uint64)
    table[experts // 64, experts] = np.left_shift(np.uint64(1), (experts % 64).astype(np.uint64))
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
    the running unions ORs and the counts popcounts. With numba the steps run as compiled
    loops that give the same integers: :data:`TRUE_WINDOWS`, then one :data:`REJECTED_DEPTH`
    call per depth (:data:`REJECTED_DEPTH_PACKED` for eight uint8 ids, read as one uint64:
    a set's order does not matter, so neither does the byte order).
    """
    states = len(accepted)
    accepted = np.asarray(accepted, dtype=np.int64)
    layers = true.shape[1]
    words = (num_experts + 63) // 64
    out = np.empty((states, kmax + 1, layers), dtype=np.int64)
    deepest = kmax - int(accepted.min(initial=kmax))
    windows = TRUE_WINDOWS.compiled(out.size)
    if windows is not None:  # running unions (S, words, layers), an even number of words
        acc = np.zeros((states, words + words % 2, layers), dtype=np.uint64)
        windows(np.ascontiguousarray(true[: states + kmax]), accepted, acc, out)
        for r in range(1, deepest + 1):
            ids = np.ascontiguousarray(rejected[r - 1][:states])
            kernel = REJECTED_DEPTH
            if ids.dtype == np.uint8 and ids.shape[-1] == 8:  # one uint64 per token and layer
                kernel, ids = REJECTED_DEPTH_PACKED, ids.view(np.uint64)[..., 0]
            (kernel.compiled() or kernel.python)(ids, accepted, r, kmax, acc, out)
        return out
    acc = np.zeros((states, layers, words), dtype=np.uint64)  # every state's running union
    bits = to_bits(true[: states + kmax], num_experts)
    for j in range(int(accepted.max(initial=-1)) + 1):  # true token s + j, for a_s ≥ j
        rows = np.flatnonzero(accepted >= j)
        acc[rows] |= bits[rows + j]
        out[rows, j] = popcounts(acc[rows])
    for r in range(1, deepest + 1):  # rejected depth r, at k = a_s + r <= kmax
        rows = np.flatnonzero(accepted + r <= kmax)
        acc[rows] |= to_bits(rejected[r - 1][rows], num_experts)
        out[rows, accepted[rows] + r] = popcounts(acc[rows])
    return out


# Popcount of a uint64 by the parallel bit-count (Anderson, "Bit Twiddling Hacks",
# graphics.stanford.edu/~seander/bithacks.html#CountBitsSetParallel), which LLVM compiles to a
# popcnt instruction (or its vector form). Run uncompiled, the final multiply overflows on
# purpose (it wraps, as compiled); numpy warns, so tests run the Python kernels in np.errstate.
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_S1, _S2, _S4, _S56 = np.uint64(1), np.uint64(2), np.uint64(4), np.uint64(56)
_ZERO, _ONE, _LOW, _BYTE = np.uint64(0), np.uint64(1), np.uint64(63), np.uint64(255)


@accel.kernel
def _true_windows(true, accepted, acc, out):  # type: ignore[no-untyped-def]
    """Compiled first step of :func:`window_union_sizes`: every state's union of true tokens.

    ``acc`` is (S, words, layers) (an even number of words), zero. Token by token: token t's
    bitmask (word w: the OR of 1 << (e − 64 w) over its ids e in that word, two words per pass
    over the ids), ORed into ``acc[s]`` of each state s = t − j (j = 0..kmax, a_s ≥ j) that
    feeds it, with its popcount in ``out[s, j]``. A state gets its tokens in order; the states
    open at once are the last kmax + 1 (a few kB of ``acc``); the inner loops run along layers.
    """
    states, words, layers = acc.shape
    size = true.shape[2]
    kmax = out.shape[1] - 1
    bits = np.empty((words, layers), dtype=np.uint64)  # token t's sets
    for t in range(min(true.shape[0], states + kmax)):
        for w in range(0, words, 2):
            for layer in range(layers):
                lo, hi = _ZERO, _ZERO
                for e in range(size):
                    x = np.uint64(np.int64(true[t, layer, e]) - 64 * w)
                    bit = _ONE << (x & _LOW)
                    if x < 64:
                        lo |= bit
                    elif x < 128:
                        hi |= bit
                bits[w, layer], bits[w + 1, layer] = lo, hi
        for s in range(max(t - kmax, 0), min(t + 1, states)):
            j = t - s
            if accepted[s] < j:
                continue
            row = out[s, j]
            row[:] = 0
            for w in range(words):
                union, token = acc[s, w], bits[w]
                for layer in range(layers):
                    v = union[layer] | token[layer]
                    union[layer] = v
                    v = v - ((v >> _S1) & _M1)
                    v = (v & _M2) + ((v >> _S2) & _M2)
                    v = (v + (v >> _S4)) & _M4
                    row[layer] += np.int64((v * _H01) >> _S56)


@accel.kernel
def _rejected_depth(ids, accepted, depth, kmax, acc, out):  # type: ignore[no-untyped-def]
    """Compiled rejected-draft step of :func:`window_union_sizes` for one depth r: at every
    state s with a_s + r ≤ kmax, OR the draft's ids (row s of ``ids``) into ``acc[s]`` ((words,
    layers), two words per pass over the ids) and write the popcount to ``out[s, a_s + r]``."""
    states, words, layers = acc.shape
    size = ids.shape[2]
    for s in range(states):
        k = accepted[s] + depth
        if k > kmax:
            continue
        row = out[s, k]
        for w in range(0, words, 2):
            lo_row, hi_row, token = acc[s, w], acc[s, w + 1], ids[s]
            for layer in range(layers):
                lo, hi = lo_row[layer], hi_row[layer]
                for e in range(size):
                    x = np.uint64(np.int64(token[layer, e]) - 64 * w)
                    bit = _ONE << (x & _LOW)
                    if x < 64:
                        lo |= bit
                    elif x < 128:
                        hi |= bit
                lo_row[layer], hi_row[layer] = lo, hi
                lo = lo - ((lo >> _S1) & _M1)  # two popcounts
                hi = hi - ((hi >> _S1) & _M1)
                lo = (lo & _M2) + ((lo >> _S2) & _M2)
                hi = (hi & _M2) + ((hi >> _S2) & _M2)
                lo = (lo + (lo >> _S4)) & _M4
                hi = (hi + (hi >> _S4)) & _M4
                count = np.int64((lo * _H01) >> _S56) + np.int64((hi * _H01) >> _S56)
                row[layer] = count if w == 0 else row[layer] + count


@accel.kernel
def _rejected_depth_packed(packed, accepted, depth, kmax, acc, out):  # type: ignore[no-untyped-def]
    """:data:`REJECTED_DEPTH` for eight uint8 ids per token and layer read as one uint64
    (``packed`` (S, layers), id e in byte e, little-endian): the eight ids unroll, so the loop
    along layers runs in vector registers (twice as fast as reading the ids one by one)."""
    states, words, layers = acc.shape
    for s in range(states):
        k = accepted[s] + depth
        if k > kmax:
            continue
        row = out[s, k]
        for w in range(0, words, 2):
            lo_row, hi_row, token = acc[s, w], acc[s, w + 1], packed[s]
            for layer in range(layers):
                lo, hi, q = lo_row[layer], hi_row[layer], token[layer]
                for e in range(8):
                    x = np.uint64(np.int64((q >> np.uint64(8 * e)) & _BYTE) - 64 * w)
                    bit = _ONE << (x & _LOW)
                    lo |= bit if x < 64 else _ZERO
                    hi |= bit if x - np.uint64(64) < 64 else _ZERO
                lo_row[layer], hi_row[layer] = lo, hi
                lo = lo - ((lo >> _S1) & _M1)  # two popcounts
                hi = hi - ((hi >> _S1) & _M1)
                lo = (lo & _M2) + ((lo >> _S2) & _M2)
                hi = (hi & _M2) + ((hi >> _S2) & _M2)
                lo = (lo + (lo >> _S4)) & _M4
                hi = (hi + (hi >> _S4)) & _M4
                count = np.int64((lo * _H01) >> _S56) + np.int64((hi * _H01) >> _S56)
                row[layer] = count if w == 0 else row[layer] + count


@accel.kernel
def _union_packed(packed, acc, out):  # type: ignore[no-untyped-def]
    """Compiled :func:`union_sizes` for eight uint8 ids per token and layer read as one uint64
    (``packed`` (tokens, layers)): every token ORed into ``acc`` (words, layers), an even
    number of words, two words per pass, the eight ids unrolled and layers in vector lanes;
    then each layer's popcount into ``out``."""
    tokens, layers = packed.shape
    words = acc.shape[0]
    for t in range(tokens):
        for w in range(0, words, 2):
            lo_row, hi_row, token = acc[w], acc[w + 1], packed[t]
            for layer in range(layers):
                lo, hi, q = lo_row[layer], hi_row[layer], token[layer]
                for e in range(8):
                    x = np.uint64(np.int64((q >> np.uint64(8 * e)) & _BYTE) - 64 * w)
                    bit = _ONE << (x & _LOW)
                    lo |= bit if x < 64 else _ZERO
                    hi |= bit if x - np.uint64(64) < 64 else _ZERO
                lo_row[layer], hi_row[layer] = lo, hi
    out[:] = 0
    for w in range(words):
        for layer in range(layers):
            v = acc[w, layer]
            v = v - ((v >> _S1) & _M1)
            v = (v & _M2) + ((v >> _S2) & _M2)
            v = (v + (v >> _S4)) & _M4
            out[layer] += np.int64((v * _H01) >> _S56)


#: The loops of :func:`window_union_sizes` as optional compiled kernels; the first 2^24 counts
#: of a process (~0.6 CPU s of numpy) run on numpy unless numba is loaded already.
TRUE_WINDOWS: accel.Kernel = _true_windows
TRUE_WINDOWS.warmup = 1 << 24
REJECTED_DEPTH: accel.Kernel = _rejected_depth
REJECTED_DEPTH_PACKED: accel.Kernel = _rejected_depth_packed
#: :func:`union_sizes`'s loop as an optional compiled kernel, after 2^14 passes on numpy
#: (~0.8 CPU s) unless numba is loaded already.
UNION_PACKED: accel.Kernel = _union_packed
UNION_PACKED.warmup = 1 << 14
