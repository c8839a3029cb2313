"""The max-entropy sampler: exact top-k, marginals, lag overlaps, pinned experts, histories."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.routing.maxent import MaxEntSampler
from simspec.routing.popularity import inclusion_probabilities
from simspec.routing.sets import history_bits, to_sets


def test_max_entropy_sampler_exact_top_k_marginals_and_lag_overlaps():
    rng = np.random.default_rng(4)
    weights = np.stack([rng.permutation(np.arange(1, 129.0) ** -0.8) for _ in range(2)])
    p = inclusion_probabilities(weights, 8)
    targets = np.array([[0.45, 0.38, 0.34, 0.31], [0.35, 0.30, 0.27, 0.25]])  # per layer
    ids = MaxEntSampler(p, targets).sample_sequences(rng, 600, 40)
    sets = to_sets(ids, 128)  # (seq, t, layer, N)
    assert (sets.sum(axis=-1) == 8).all()
    deep = sets[:, 8:]
    assert np.abs(deep.mean(axis=(0, 1)) - p).max() < 0.03
    for d in range(1, 5):
        measured = (deep[:, d:] & deep[:, :-d]).sum(axis=-1).mean(axis=(0, 1)) / 8
        assert measured == pytest.approx(targets[:, d - 1], abs=0.01)


def test_max_entropy_sampler_is_deterministic_and_handles_pinned_experts():
    p = inclusion_probabilities(np.array([[50.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]), 2)
    assert p[0, 0] == 1.0 and p[0, 1] == 0.0
    sampler = MaxEntSampler(p, np.array([[0.6, 0.55]]))
    a = sampler.sample_sequences(np.random.default_rng(1), 50, 30)
    b = sampler.sample_sequences(np.random.default_rng(1), 50, 30)
    assert np.array_equal(a, b)
    sets = to_sets(a, 8)
    assert sets[..., 0].all() and not sets[..., 1].any()


def test_history_bits():
    bits = history_bits([np.array([[0, 2]]), np.array([[2, 3]]), np.array([[-1, -1]])], 5)
    assert bits.tolist() == [[1, 0, 3, 2, 0]]


def test_independent_routing_with_skewed_popularity():
    """D = 0 (no overlap given): tokens independent with marginals p_e, true and rejected ones.

    This configuration (Zipf or Dirichlet popularity, no overlap, Monte-Carlo mode) used to fail
    with an IndexError: the history bits of the previous token leaked into the table index.
    """
    rng = np.random.default_rng(8)
    p = inclusion_probabilities(np.stack([rng.permutation(np.arange(1, 33.0) ** -0.8)] * 2), 4)
    sampler = MaxEntSampler(p, np.zeros((2, 0)))
    assert sampler.depth == 0
    sets = to_sets(sampler.sample_sequences(rng, 3000, 5), 32)
    assert (sets.sum(axis=-1) == 4).all()
    assert np.abs(sets.mean(axis=(0, 1)) - p).max() < 0.03
    chains = np.tile(np.arange(2), 500)
    draft = sampler.step(rng, chains, history_bits([], 32), np.full(1000, 7), draft=True)
    assert draft.shape == (1000, 4)
    assert (np.diff(draft, axis=1) > 0).all()  # k_e distinct experts, sorted


def test_smallest_sorted_equals_argpartition_and_handles_ties():
    from simspec.routing.maxent import smallest_sorted

    rng = np.random.default_rng(8)
    for dtype in (np.float32, np.float64):
        key = rng.random((300, 128)).astype(dtype)
        expected = np.sort(np.argpartition(key, 7, axis=1)[:, :8], axis=1)
        assert np.array_equal(smallest_sorted(key, 8), expected)
    # A tie across the k-th value marks k + 1 columns: the argpartition fallback keeps k.
    tied = np.array([[0.1, 0.3, 0.3, 0.9], [0.2, 0.4, 0.1, 0.8]])
    got = smallest_sorted(tied, 2)
    assert got[0].tolist() in ([0, 1], [0, 2]) and got[1].tolist() == [0, 2]
    assert np.array_equal(got, np.sort(np.argpartition(tied, 1, axis=1)[:, :2], axis=1))
