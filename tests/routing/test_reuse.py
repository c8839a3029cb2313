"""The reuse sampler: exact top-k, closed forms, overlap targets, bitmask unions."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.routing.config import RoutingConfig
from simspec.routing.popularity import popularity_weights
from simspec.routing.reuse import ExpertSampler, sample_sequences
from simspec.routing.sets import to_sets, union_sizes


def _uniform(n_layers, n, k):
    return ExpertSampler(np.full((n_layers, n), 1.0 / n), k)


@pytest.mark.parametrize(("n", "k"), [(8, 2), (128, 8), (256, 8), (512, 10)])
def test_independent_uniform_unique_experts_match_moesd_formula(n, k):
    sampler = _uniform(4, n, k)
    seqs = sample_sequences(sampler, np.random.default_rng(7), 100, 64, None)  # 400 chains
    for t in (1, 2, 4, 8, 16, 32, 64):
        sizes = np.array([union_sizes(seqs[s, :t], n) for s in range(len(seqs))])
        expected = n * (1 - (1 - k / n) ** t)
        assert sizes.mean() == pytest.approx(expected, rel=0.02), t


def test_every_token_routes_to_exactly_k_distinct_experts():
    rng = np.random.default_rng(3)
    for popularity in ("uniform", "zipf", "dirichlet"):
        w = popularity_weights(RoutingConfig(popularity=popularity), 6, 64, rng)
        seqs = sample_sequences(ExpertSampler(w, 6), rng, 5, 20, 0.5)
        sets = to_sets(seqs, 64)
        assert (sets.sum(axis=-1) == 6).all()


@pytest.mark.parametrize("overlap", [0.0, 0.2, 0.38, 0.7, 1.0])
def test_lag1_overlap_matches_target(overlap):
    sampler = _uniform(8, 128, 8)
    sets = to_sets(sample_sequences(sampler, np.random.default_rng(1), 50, 40, overlap), 128)
    measured = (sets[:, 1:] & sets[:, :-1]).sum(axis=-1).mean() / 8
    assert measured == pytest.approx(overlap, abs=0.01)


def test_markov_closed_form_u4():
    """Physics §7.3: N=128, k_e=8, rho_1=0.38 gives U(4) = 2.78 k_e (max-entropy Markov chain)."""
    sampler = _uniform(8, 128, 8)
    seqs = sample_sequences(sampler, np.random.default_rng(2), 200, 4, 0.38)
    u4 = np.mean([union_sizes(s, 128).mean() for s in seqs]) / 8
    assert u4 == pytest.approx(2.78, abs=0.03)


def test_overlap_above_chance_lowers_unique_experts_at_equal_marginals():
    rng = np.random.default_rng(5)
    sampler = _uniform(8, 128, 8)
    indep = sample_sequences(sampler, rng, 100, 8, None)
    chance = 8 / 128
    corr = sample_sequences(sampler, rng, 100, 8, 0.4)
    for seqs in (indep, corr):  # same marginals: every expert used with frequency k/N
        freq = to_sets(seqs, 128).mean(axis=(0, 1, 2))
        assert freq.mean() == pytest.approx(chance)
        assert np.abs(freq - chance).max() < 0.02
    for t in (2, 4, 8):
        u_i = np.mean([union_sizes(s[:t], 128).mean() for s in indep])
        u_c = np.mean([union_sizes(s[:t], 128).mean() for s in corr])
        assert u_c < 0.9 * u_i


def test_popularity_skew_concentrates_routing():
    rng = np.random.default_rng(0)
    cfg = RoutingConfig(popularity="zipf", zipf_exponent=1.2)
    w = popularity_weights(cfg, 4, 128, rng)
    assert w.sum(axis=1) == pytest.approx(np.ones(4))
    skewed = sample_sequences(ExpertSampler(w, 8), rng, 50, 16, None)
    uniform = sample_sequences(_uniform(4, 128, 8), rng, 50, 16, None)
    u_skew = np.mean([union_sizes(s, 128).mean() for s in skewed])
    assert u_skew < np.mean([union_sizes(s, 128).mean() for s in uniform])
    # The hottest expert of each layer is chosen far more often than 1/N of the time.
    sets = to_sets(skewed, 128)
    hot = w.argmax(axis=1)
    for layer in range(4):
        assert sets[:, :, layer, hot[layer]].mean() > 3 * 8 / 128


def test_union_sizes_counts_distinct_ids_per_layer():
    ids = np.array([[[0, 1], [5, 6]], [[1, 2], [5, 6]], [[0, 2], [7, 6]]])  # 3 tokens, 2 layers
    assert union_sizes(ids, 8).tolist() == [3, 3]
    assert union_sizes(ids[:0], 8).tolist() == [0, 0]


def test_same_generator_seed_gives_same_routing():
    s = _uniform(4, 64, 4)
    a = sample_sequences(s, np.random.default_rng(11), 3, 10, 0.3)
    b = sample_sequences(s, np.random.default_rng(11), 3, 10, 0.3)
    c = sample_sequences(s, np.random.default_rng(12), 3, 10, 0.3)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_reuse_sampler_streams_are_unchanged():
    """Golden digest of the lag-1 reuse sampler from before multi-lag overlap existed."""
    import hashlib

    s = _uniform(4, 64, 4)
    a = sample_sequences(s, np.random.default_rng(11), 3, 10, 0.3)
    prev = a[:, -1].reshape(12, 4).astype(np.int64)
    b = s.sample(np.random.default_rng(5), np.tile(np.arange(4), 3), prev, 0.5)
    w = popularity_weights(RoutingConfig(popularity="zipf"), 4, 64, np.random.default_rng(3))
    z = sample_sequences(ExpertSampler(w, 4), np.random.default_rng(12), 3, 10, 0.3)
    # Ids are stored in the smallest type (uint8 here); the digest was taken on int16.
    a, z = a.astype(np.int16), z.astype(np.int16)
    digest = hashlib.sha256(a.tobytes() + b.tobytes() + z.tobytes()).hexdigest()
    assert digest == "eb46446df0093efd0372583cb2d479d457ecaa8c8736f635164c6b659a420106"
