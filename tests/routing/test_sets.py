"""Expert-set representations: membership tables, bitmasks, cumulative unions, history bits.

Every vectorised routine is checked against Python sets built token by token.
"""

from __future__ import annotations

import numpy as np
import pytest

from simspec.routing import sets
from simspec.routing.sets import (
    cumulative_union_sizes,
    history_bits,
    to_bits,
    to_sets,
    union_sizes,
)


def _routing(rng: np.random.Generator, shape: tuple[int, ...], n: int, k: int) -> np.ndarray:
    """Random top-k routings: ``shape`` sets of k distinct expert ids out of n (int16)."""
    flat = [rng.permutation(n)[:k] for _ in range(int(np.prod(shape)))]
    return np.array(flat, dtype=np.int16).reshape(*shape, k)


@pytest.mark.parametrize(("n", "k"), [(8, 2), (64, 6), (128, 8), (160, 8), (256, 8)])
def test_bitmasks_hold_exactly_the_ids(n, k):
    ids = _routing(np.random.default_rng(n), (7, 3), n, k)
    bits = to_bits(ids, n)
    assert bits.shape == (7, 3, (n + 63) // 64) and bits.dtype == np.uint64
    for index in np.ndindex(7, 3):
        members = {
            w * 64 + b
            for w in range(bits.shape[-1])
            for b in range(64)
            if (int(bits[index][w]) >> b) & 1
        }
        assert members == {int(e) for e in ids[index]}


@pytest.mark.parametrize(("n", "k"), [(8, 2), (128, 8), (256, 8), (512, 10)])
def test_cumulative_union_sizes_match_python_sets(n, k, monkeypatch):
    monkeypatch.setattr(sets, "BITS_CHUNK", 7)  # several chunks, the last one partial
    rng = np.random.default_rng(k)
    ids = _routing(rng, (5, 9, 4), n, k)  # (states, tokens, layers)
    sizes = cumulative_union_sizes(ids, n)
    assert sizes.shape == (5, 9, 4)
    for s in range(5):
        for layer in range(4):
            seen: set[int] = set()
            for j in range(9):
                seen |= {int(e) for e in ids[s, j, layer]}
                assert sizes[s, j, layer] == len(seen)


def test_union_sizes_match_python_sets():
    rng = np.random.default_rng(2)
    ids = _routing(rng, (12, 5), 128, 8)  # (tokens, layers)
    expected = [len({int(e) for t in range(12) for e in ids[t, layer]}) for layer in range(5)]
    assert union_sizes(ids, 128).tolist() == expected
    assert union_sizes(ids[:0], 128).tolist() == [0] * 5
    assert np.array_equal(union_sizes(ids, 128), to_sets(ids, 128).any(axis=0).sum(axis=-1))


def test_history_bits_match_a_loop_over_tokens():
    rng = np.random.default_rng(3)
    previous = [_routing(rng, (40,), 32, 4).astype(np.int64) for _ in range(3)]
    previous[1][::7] = -1  # no such token for some chains
    bits = history_bits(previous, 32)
    for c in range(40):
        for e in range(32):
            expected = sum(1 << d for d, ids in enumerate(previous) if e in ids[c].tolist())
            assert bits[c, e] == expected
