"""Expert sets in three representations: ids, membership tables and history bitmasks.

A token's routing in one MoE layer is the set S of its k_e experts. The samplers store it as
expert ids (k_e per token and layer, in the smallest type that holds them, :func:`id_dtype`:
compact, and what a trace records); unions and overlaps are cheapest on boolean membership
over the N experts, so the union over every token of every request in a verify pass is one
scatter into a (layers, N) table and one sum (:func:`union_sizes`). Growing unions (the
k = 0..K passes of one state, every state at once) use bitmasks: a token's set in one layer
packed into ceil(N/64) 64-bit words (:func:`to_bits`), so a running union is a cumulative OR
and its size a popcount (:func:`cumulative_union_sizes`). The max-entropy sampler conditions
each expert on its own recent past, kept as one integer per expert whose bit d − 1 says "used
d tokens back" (:func:`history_bits`).
"""

from __future__ import annotations

import numpy as np

BITS_CHUNK = 65536  # sets converted to bitmasks per step (bounds the membership table)


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

    ``ids`` is (tokens, layers, k_e); returns int array (layers,).
    """
    tokens, layers, _ = ids.shape
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

    Built as a membership table (a chunk of sets at a time) packed eight experts to a byte,
    least significant bit first, and read as little-endian 64-bit words.

    Examples
    --------
    >>> to_bits(np.array([[0, 2, 64]]), 128).tolist()
    [[5, 1]]
    """
    ids = np.asarray(ids)
    words = (num_experts + 63) // 64
    flat = ids.reshape(-1, ids.shape[-1])
    out = np.empty((len(flat), words), dtype=np.uint64)
    for start in range(0, len(flat), BITS_CHUNK):
        chunk = flat[start : start + BITS_CHUNK]
        member = np.zeros(len(chunk) * words * 64, dtype=bool)
        member[(np.arange(len(chunk)) * (words * 64))[:, None] + chunk] = True
        packed = np.packbits(member.reshape(len(chunk), -1), axis=1, bitorder="little")
        out[start : start + len(chunk)] = packed.view("<u8")
    return out.reshape(*ids.shape[:-1], words)


def cumulative_union_sizes(ids: np.ndarray, num_experts: int) -> np.ndarray:
    """Distinct experts per layer of the union of the first j + 1 tokens, for every j.

    ``ids`` is (..., tokens, layers, k_e); returns int64 (..., tokens, layers): entry j is
    |S_0 ∪ ... ∪ S_j| per layer (bitmasks, cumulative OR over tokens, popcount).
    """
    bits = np.bitwise_or.accumulate(to_bits(ids, num_experts), axis=-3)
    return np.bitwise_count(bits).sum(axis=-1, dtype=np.int64)
