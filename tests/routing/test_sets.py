"""Expert-set representations: membership tables, bitmasks, cumulative and window unions,
history bits.

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
    window_union_sizes,
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
def test_cumulative_union_sizes_match_python_sets(n, k):
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


def test_to_bits_of_repeated_and_missing_ids():
    assert to_bits(np.array([[3, 3, 70]]), 128).tolist() == [[8, 64]]  # a repeat sets one bit
    assert to_bits(np.zeros((2, 0), dtype=np.uint8), 64).tolist() == [[0], [0]]


@pytest.mark.parametrize("n", [8, 64, 65, 200, 512])
def test_popcounts_equal_the_number_of_ids(n):
    ids = _routing(np.random.default_rng(n), (6, 5), n, min(n, 10))
    bits = to_bits(ids, n)
    assert sets.popcounts(bits).tolist() == [[min(n, 10)] * 5] * 6
    assert sets.popcounts(bits).dtype == np.int64


@pytest.mark.parametrize("words", [1, 2, 3, 4, 8])
def test_popcounts_of_full_sets_do_not_overflow(words):
    full = np.full((2, words), np.iinfo(np.uint64).max, dtype=np.uint64)
    assert sets.popcounts(full).tolist() == [64 * words] * 2


def test_popcounts_of_strided_bitmasks():
    bits = to_bits(_routing(np.random.default_rng(4), (6, 5), 128, 8), 128)
    swapped = bits[..., ::-1]  # words in the other order: a last axis that is not contiguous
    assert sets.popcounts(swapped).tolist() == [[8] * 5] * 6
    assert sets.popcounts(bits.transpose(1, 0, 2)).tolist() == [[8] * 6] * 5


# -- every (state, k) pass of a request: window_union_sizes -----------------------------------


def _windows_case(seed: int, n: int, k: int, dtype, states: int = 11, kmax: int = 4):
    """A request's stored tokens: true ids, rejected ids per depth, accepted drafts a_s."""
    rng = np.random.default_rng(seed)
    layers = 3
    true = _routing(rng, (states + 2, layers), n, k).astype(dtype)
    rejected = [_routing(rng, (states, layers), n, k).astype(dtype) for _ in range(kmax)]
    match = rng.integers(0, kmax + 3, size=states)
    match = np.minimum(match, states - 1 - np.arange(states))
    match[0] = 0
    return true, rejected, np.minimum(match, kmax), kmax


def _windows_by_sets(true, rejected, accepted, kmax) -> np.ndarray:
    """Entry (s, k): the fed tokens written out (true s..s+min(k, a_s), then rejected depths
    1..k − a_s) and their union counted with Python sets."""
    states, layers = len(accepted), true.shape[1]
    out = np.zeros((states, kmax + 1, layers), dtype=np.int64)
    for s in range(states):
        for k in range(kmax + 1):
            a = min(k, int(accepted[s]))
            fed = [true[s + j] for j in range(a + 1)] + [rejected[r][s] for r in range(k - a)]
            for layer in range(layers):
                out[s, k, layer] = len({int(e) for token in fed for e in token[layer]})
    return out


CASES = [  # (N, k_e, id dtype): packed uint8 ids, few ids, 4 words, int16, int64, k_e = 1
    (128, 8, np.uint8),
    (8, 2, np.uint8),
    (200, 8, np.uint8),
    (384, 8, np.int16),
    (64, 5, np.int64),
    (16, 1, np.uint8),  # one expert per token: no id pairs
]


@pytest.mark.parametrize(("n", "k", "dtype"), CASES)
def test_window_unions_equal_python_sets(n, k, dtype):
    case = _windows_case(n + k, n, k, dtype)
    want = _windows_by_sets(*case)
    got = window_union_sizes(*case, n)
    assert got.dtype == np.int32 and np.array_equal(got, want)


def test_window_unions_edge_cases():
    one = _windows_case(5, 128, 8, np.uint8, states=1, kmax=2)  # one state: rejected only
    assert np.array_equal(window_union_sizes(*one, 128), _windows_by_sets(*one))
    full = np.array([2, 2, 2])  # every draft accepted: no rejected depth is read
    true = _routing(np.random.default_rng(9), (5, 2), 16, 3).astype(np.uint8)
    want = _windows_by_sets(true, [], full, 2)
    assert np.array_equal(window_union_sizes(true, [], full, 2, 16), want)
    assert window_union_sizes(true[:0], [], full[:0], 2, 16).shape == (0, 3, 2)
    true, rejected, _, kmax = _windows_case(3, 64, 4, np.uint8, states=9, kmax=3)
    for accepted in (np.zeros(9, dtype=np.int64), np.arange(9) % 3):  # every state reads depth 1
        want = _windows_by_sets(true, rejected, accepted, kmax)
        assert np.array_equal(window_union_sizes(true, rejected, accepted, kmax, 64), want)


def test_window_unions_equal_python_sets_on_long_requests():
    for seed, (n, k, dtype) in enumerate(CASES[:2]):
        case = _windows_case(seed, n, k, dtype, states=60, kmax=8)
        assert np.array_equal(window_union_sizes(*case, n), _windows_by_sets(*case))


@pytest.mark.parametrize("n", [16, 128, 256])
def test_union_sizes_equal_python_sets(n):
    rng = np.random.default_rng(n)
    for tokens in (1, 5, 40):
        ids = _routing(rng, (tokens, 6), n, 8).astype(np.uint8)
        want = [len({int(e) for t in range(tokens) for e in ids[t, layer]}) for layer in range(6)]
        assert union_sizes(ids, n).tolist() == want
        assert union_sizes(ids[..., ::-1], n).tolist() == want  # a non-contiguous view


def test_union_sizes_by_group_match_python_sets():
    rng = np.random.default_rng(4)
    ids = _routing(rng, (30, 5), 128, 8)  # (tokens, layers)
    group = np.sort(rng.integers(0, 6, size=30))
    group[group == 3] = 4  # group 3 holds no token: zeros
    sizes = sets.union_sizes_by(ids, group, 7, 128)
    assert sizes.shape == (7, 5)
    for g in range(7):
        mine = np.flatnonzero(group == g)
        want = [len({int(e) for t in mine for e in ids[t, layer]}) for layer in range(5)]
        assert sizes[g].tolist() == want
