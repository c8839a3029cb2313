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
import math
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


#: Tokens whose cells :func:`union_sizes_by` marks at once (its int64 cell indices).
_UNION_TOKENS = 4096


def union_sizes_by(ids: np.ndarray, group: np.ndarray, groups: int, num_experts: int) -> np.ndarray:
    """:func:`union_sizes` of each group of tokens: ``ids`` (tokens, layers, k_e), token t in
    group ``group[t]`` of 0..``groups`` - 1; int array (groups, layers). The tokens are marked
    in a (groups, layers, N) membership table, a bounded slice at a time, then counted."""
    tokens, layers = ids.shape[:2]
    if tokens == 0 or layers == 0:
        return np.zeros((groups, layers), dtype=np.int64)
    member = np.zeros(groups * layers * num_experts, dtype=bool)  # (groups, layers, N), flat
    group = np.asarray(group, dtype=np.int64)
    layer = np.arange(layers)
    for start in range(0, tokens, _UNION_TOKENS):
        mine = slice(start, start + _UNION_TOKENS)
        first = (group[mine, None] * layers + layer) * num_experts
        member[first[:, :, None] + ids[mine]] = True
    return np.count_nonzero(member.reshape(groups, layers, num_experts), axis=2).astype(np.int64)


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

    A set is the OR of table rows. Up to 256 experts the ids are bytes, and two neighbouring
    ids read as one 16-bit number index a table of id pairs (:func:`_pair_table`, row
    a + 256·b: the words of {a, b}; a pair's row does not depend on byte order, since a union
    is symmetric), so a set of k_e ids costs ceil(k_e / 2) ``take`` calls, ORed in place;
    beyond 256 experts each id indexes a table of single bits (:func:`_bit_table`). A
    repeated id sets its bit once, as a membership table would.

    Examples
    --------
    >>> to_bits(np.array([[0, 2, 64]]), 128).tolist()
    [[5, 1]]
    """
    ids = np.asarray(ids)
    words = (num_experts + 63) // 64
    lookups = _lookups(ids, num_experts)
    if not lookups:
        return np.zeros((*ids.shape[:-1], words), dtype=np.uint64)
    out = np.empty((len(lookups[0][1]), words), dtype=np.uint64)
    _or_rows(lookups, out)
    return out.reshape(*ids.shape[:-1], words)


def _or_bits(base: np.ndarray, ids: np.ndarray, num_experts: int, out: np.ndarray) -> None:
    """``out = base | to_bits(ids)`` for bitmasks (rows, ..., words) and ids (rows, ..., k_e),
    without the intermediate bitmask array."""
    flat = out.reshape(-1, out.shape[-1])
    lookups = _lookups(ids, num_experts)
    if lookups:
        _or_rows(lookups, flat)
        flat |= base.reshape(flat.shape)
    else:
        flat[...] = base.reshape(flat.shape)


def _or_rows(lookups: list[tuple[np.ndarray, np.ndarray]], out: np.ndarray) -> None:
    """``out`` (rows, words) = the OR of the looked-up table rows, each gathered into one
    scratch array (``take`` into a given array; ``clip``, since every index is in range, so
    that it writes there directly)."""
    (table, slot), *rest = lookups
    table.take(slot, axis=0, out=out, mode="clip")
    scratch = np.empty_like(out) if rest else out
    for table, slot in rest:
        table.take(slot, axis=0, out=scratch, mode="clip")
        out |= scratch


def _lookups(ids: np.ndarray, num_experts: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(table, row per set) pairs whose rows ORed give :func:`to_bits` of ``ids``."""
    rows, width = math.prod(ids.shape[:-1]), ids.shape[-1]
    if not rows or not width:
        return []
    flat = ids.reshape(rows, width)
    lookups: list[tuple[np.ndarray, np.ndarray]] = []
    if num_experts <= 256 and width > 1:
        pairs = np.ascontiguousarray(flat[:, : width - width % 2], dtype=np.uint8)
        table = _pair_table((num_experts + 63) // 64)
        lookups += [(table, slot) for slot in pairs.view(np.uint16).T.astype(np.intp, order="C")]
        flat = flat[:, width - width % 2 :]
    if flat.shape[1]:
        table = _bit_table(num_experts)
        lookups += [(table, slot) for slot in flat.T.astype(np.intp, order="C")]
    return lookups


def popcounts(bits: np.ndarray) -> np.ndarray:
    """Set bits of bitmasks (..., words) summed over the words: int64 (...).

    Examples
    --------
    >>> popcounts(to_bits(np.array([[0, 2, 64]]), 128)).tolist()
    [3]
    """
    return _small_popcounts(bits).astype(np.int64)


def _small_popcounts(bits: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`popcounts` in the smallest type that holds them (uint8 up to three words, at
    most 192 bits, else int16): one popcount of the whole array, then the word columns added,
    rather than a reduction along a short last axis. Written into ``out`` if given."""
    per_word = np.bitwise_count(bits)
    words = bits.shape[-1]
    if words == 1:
        return per_word[..., 0] if out is None else _fill(out, per_word[..., 0])
    if words == 2 and per_word.strides[-1] == 1:  # a (low, high) byte pair as low + 256·high
        pair = per_word.view(np.uint16)[..., 0]  # (either byte order: the sum is symmetric)
        total = pair >> 8  # plus that >> 8: the low byte is low + high (at most 128)
        total += pair
        return total.astype(np.uint8) if out is None else _fill(out, total)
    count = np.add(per_word[..., 0], per_word[..., 1], dtype=np.uint8 if words <= 3 else np.int16)
    for w in range(2, words):
        count += per_word[..., w]
    return count if out is None else _fill(out, count)


def _fill(out: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``out`` = ``values`` cast to its type (a uint16 sum to uint8 keeps its low byte)."""
    np.copyto(out, values, casting="unsafe")
    return out


@functools.cache
def _bit_table(num_experts: int) -> np.ndarray:
    """(N, ceil(N / 64)) uint64: entry (e, w) is 1 << (e % 64) when e // 64 = w, else 0."""
    experts = np.arange(num_experts)
    table = np.zeros((num_experts, (num_experts + 63) // 64), dtype=np.uint64)
    table[experts, experts // 64] = np.left_shift(np.uint64(1), (experts % 64).astype(np.uint64))
    table.flags.writeable = False
    return table


@functools.cache
def _pair_table(words: int) -> np.ndarray:
    """(65536, words) uint64: row a + 256·b is the bitmask of the expert pair {a, b}, for ids
    a, b < min(256, 64·words) (other rows are never read)."""
    single = _bit_table(min(256, 64 * words))
    pairs = np.arange(65536)
    low, high = pairs % 256, pairs // 256
    valid = (low < len(single)) & (high < len(single))
    table = np.zeros((65536, words), dtype=np.uint64)
    table[valid] = single[low[valid]] | single[high[valid]]
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
    """Distinct experts per layer of every (state, k) pass of one request: int32 (S, kmax + 1,
    layers), S = len(``accepted``) (int32: the oracle's cost tables index with these counts,
    and half the bytes of int64 make that indexing measurably faster).

    A pass at state s with k drafts feeds the true tokens s..s + min(k, a_s) and then the
    rejected drafts of depths 1..k − a_s of state s (``a_s = accepted[s]``, at most kmax: the
    drafts the target accepts of kmax). ``true`` holds the request's true tokens (T, layers, k_e)
    (T ≥ s + a_s + 1 for every s); ``rejected[r - 1]`` the depth-r rejected drafts (S', layers,
    k_e), row s for state s, for r = 1..max(kmax − a_s). Entry (s, k) equals the union of the
    (s, k) pass's tokens (:func:`cumulative_union_sizes` of the gathered ids), but each stored
    token is converted to a bitmask once (:func:`to_bits`) and each union is one OR of the one
    before it: state s's running union starts with true token s, takes true tokens
    s + 1..s + a_s (the passes k ≤ a_s), then its rejected drafts in depth order (k = a_s + r).

    The unions sit in one array with a row per (state, k) entry, counted by one popcount and
    then put in (state, k) order. Its blocks are prefixes of two orderings of the states, so
    each block is the prefix of the block before it ORed with one gathered token per state:
    the k = j true-token unions of the states with a_s ≥ j (by a_s descending), then the
    depth-r unions of the states with a_s ≤ kmax − r (by a_s ascending).
    """
    states = len(accepted)
    accepted = np.asarray(accepted, dtype=np.int64)
    layers = true.shape[1]
    if states == 0:
        return np.zeros((0, kmax + 1, layers), dtype=np.int32)
    width = kmax + 1
    descending = np.argsort(-accepted, kind="stable")
    ascending = descending[::-1]
    at_least = states - np.concatenate([[0], np.cumsum(np.bincount(accepted, minlength=width))])
    with_true = at_least[:width]  # index j: the states with a pass of j + 1 true tokens
    with_depth = states - at_least[kmax:0:-1]  # index r - 1: those that read depth r
    with_depth = with_depth[with_depth > 0]
    bits = to_bits(true[: states + kmax], num_experts)
    if len(bits) < states + kmax:  # windows that run past the text are never read
        pad = np.zeros((states + kmax - len(bits), *bits.shape[1:]), dtype=bits.dtype)
        bits = np.concatenate([bits, pad])
    starts = np.concatenate([[0], np.cumsum(with_true)])  # where each true block starts
    unions = np.empty((int(starts[-1]), *bits.shape[1:]), dtype=np.uint64)
    bits.take(descending, axis=0, out=unions[:states])
    with_true, start = with_true.tolist(), states
    for j in range(1, width):
        rows = descending[: with_true[j]]
        previous = unions[int(starts[j - 1]) : int(starts[j - 1]) + len(rows)]
        np.bitwise_or(previous, bits.take(rows + j, axis=0), out=unions[start : start + len(rows)])
        start += len(rows)
    counts = np.empty((states * width, layers), dtype=np.uint8 if bits.shape[-1] <= 3 else np.int16)
    _small_popcounts(unions, counts[:start])
    order = np.empty(states, dtype=np.int64)  # each state's place in every true block
    order[descending] = np.arange(states)
    # Depth r's unions from depth r - 1's (at first: from all the true tokens), in two arrays
    # used in turn, each counted as soon as it is made.
    previous = unions.take(starts[accepted[ascending]] + order[ascending], axis=0)
    current = np.empty_like(previous)
    for r, count in enumerate(with_depth.tolist()):
        drafts = rejected[r].take(ascending[:count], axis=0)
        _or_bits(previous[:count], drafts, num_experts, current[:count])
        _small_popcounts(current[:count], counts[start : start + count])
        previous, current, start = current, previous, start + count
    true_rows = np.concatenate([descending[:count] for count in with_true])
    depth_rows = np.concatenate([ascending[:count] for count in [0, *with_depth.tolist()]])
    entry = np.concatenate(  # the (state, k) entry of each row
        [
            true_rows * width + np.repeat(np.arange(width), with_true),
            depth_rows * width
            + accepted[depth_rows]
            + np.repeat(np.arange(1, len(with_depth) + 1), with_depth),
        ]
    )
    row = np.empty_like(entry)  # the row of each (state, k) entry
    row[entry] = np.arange(len(entry))
    ordered = counts.take(row, axis=0)  # (small integers: an eighth of the bytes, or less)
    return ordered.reshape(states, width, layers).astype(np.int32)
