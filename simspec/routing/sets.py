"""Expert sets in three representations: ids, membership tables and history bitmasks.

A token's routing in one MoE layer is the set S of its k_e experts. The samplers store it as
expert ids (int16, k_e per token and layer: compact, and what a trace records); unions and
overlaps are cheapest on boolean membership over the N experts, so the union over every token
of every request in a verify pass is one scatter into a (layers, N) table and one sum
(:func:`union_sizes`). The max-entropy sampler conditions each expert on its own recent past,
kept as one integer per expert whose bit d − 1 says "used d tokens back" (:func:`history_bits`).
"""

from __future__ import annotations

import numpy as np


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
    member = np.zeros((layers, num_experts), dtype=bool)
    layer_index = np.broadcast_to(np.arange(layers)[None, :, None], ids.shape)
    member[layer_index, ids] = True
    return member.sum(axis=1)


def history_bits(previous: list[np.ndarray], num_experts: int) -> np.ndarray:
    """History bitmask for :meth:`simspec.routing.maxent.MaxEntSampler.step` from earlier ids.

    ``previous[d - 1]`` holds the ids (chains, k_e) of the token d positions back (entries < 0
    mean "no such token"). Returns int32 (chains, N).
    """
    chains = previous[0].shape[0] if previous else 0
    bits = np.zeros((chains, num_experts), dtype=np.int32)
    rows = np.arange(chains)[:, None]
    for d, ids in enumerate(previous):
        ids = ids.astype(np.int64)
        valid = ids >= 0
        bits[np.broadcast_to(rows, ids.shape)[valid], ids[valid]] |= 1 << d
    return bits
