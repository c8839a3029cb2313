"""Monte-Carlo routing: exact top-k, closed forms, overlap targets, bitmask unions."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.routing.samplers import (
    ExpertSampler,
    RoutingConfig,
    popularity_weights,
    sample_sequences,
    to_sets,
    union_sizes,
)


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


# -- the reuse sampler is unchanged; configs; the max-entropy sampler ---------------------------
def test_reuse_sampler_streams_are_unchanged():
    """Golden digest of the lag-1 reuse sampler from before multi-lag overlap existed."""
    import hashlib

    s = _uniform(4, 64, 4)
    a = sample_sequences(s, np.random.default_rng(11), 3, 10, 0.3)
    prev = a[:, -1].reshape(12, 4).astype(np.int64)
    b = s.sample(np.random.default_rng(5), np.tile(np.arange(4), 3), prev, 0.5)
    w = popularity_weights(RoutingConfig(popularity="zipf"), 4, 64, np.random.default_rng(3))
    z = sample_sequences(ExpertSampler(w, 4), np.random.default_rng(12), 3, 10, 0.3)
    digest = hashlib.sha256(a.tobytes() + b.tobytes() + z.tobytes()).hexdigest()
    assert digest == "eb46446df0093efd0372583cb2d479d457ecaa8c8736f635164c6b659a420106"


def test_profiles_and_which_sampler():
    assert RoutingConfig().true_profile == ()
    assert RoutingConfig(overlap=0.4).true_profile == (0.4,)
    cfg = RoutingConfig(overlap=0.4, overlaps=(0.4, 0.3), draft_overlap=0.2)
    assert cfg.true_profile == (0.4, 0.3) and cfg.draft_profile == (0.2,)
    assert cfg.rejected_overlap == 0.2
    assert RoutingConfig(overlap=0.4).uses_reuse_sampler()
    assert not cfg.uses_reuse_sampler()  # two lags
    assert not RoutingConfig(overlap=0.4, popularity="zipf").uses_reuse_sampler()
    scaled = RoutingConfig(overlaps=(0.4, 0.2), layer_overlap_scale=(0.5, 1.5))
    true, draft = scaled.layer_profiles(3)
    assert draft is None
    assert true == pytest.approx(np.array([[0.2, 0.1], [0.4, 0.2], [0.6, 0.3]]))


def test_max_entropy_sampler_exact_top_k_marginals_and_lag_overlaps():
    from simspec.routing.ipf import inclusion_probabilities
    from simspec.routing.samplers import MaxEntSampler

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
    from simspec.routing.ipf import inclusion_probabilities
    from simspec.routing.samplers import MaxEntSampler

    p = inclusion_probabilities(np.array([[50.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]]), 2)
    assert p[0, 0] == 1.0 and p[0, 1] == 0.0
    sampler = MaxEntSampler(p, np.array([[0.6, 0.55]]))
    a = sampler.sample_sequences(np.random.default_rng(1), 50, 30)
    b = sampler.sample_sequences(np.random.default_rng(1), 50, 30)
    assert np.array_equal(a, b)
    sets = to_sets(a, 8)
    assert sets[..., 0].all() and not sets[..., 1].any()


def test_history_bits():
    from simspec.routing.samplers import history_bits

    bits = history_bits([np.array([[0, 2]]), np.array([[2, 3]]), np.array([[-1, -1]])], 5)
    assert bits.tolist() == [[1, 0, 3, 2, 0]]


@pytest.mark.parametrize(
    ("overrides", "key", "fragment"),
    [
        (("routing.overlaps=[0.4, 0.3]",), "routing.overlaps", "first entry equals overlap"),
        (("routing.overlaps=[]",), "routing.overlaps", "1 to 12"),
        (("routing.overlaps=[0.38, 1.5]",), "routing.overlaps[1]", "<= 1"),
        (("routing.overlaps=[" + ", ".join(["0.3"] * 13) + "]",), "routing.overlaps", "1 to 12"),
        (
            ("routing.draft_overlaps=[0.3, 0.2]", "routing.draft_overlap=0.2"),
            "routing.draft_ov",
            "",
        ),
        (("routing.layer_overlap_scale=[1.0, 3.0]",), "routing.layer_overlap_scale", "<= 1"),
        (('routing.mode="fast"',), "routing.mode", "analytic"),
    ],
)
def test_bad_routing_keys_are_scenario_errors(overrides, key, fragment):
    from simspec.errors import ScenarioError
    from tests.helpers import tiny

    with pytest.raises(ScenarioError) as err:
        tiny(*overrides)
    assert err.value.key_path.startswith(key)
    assert fragment in str(err.value)


def test_draft_keys_need_a_true_profile():
    from simspec.errors import FieldError

    with pytest.raises(FieldError, match="only together with overlap"):
        RoutingConfig(draft_overlaps=(0.3,))
    with pytest.raises(FieldError, match="only together with overlap"):
        RoutingConfig(layer_overlap_scale=(1.0,))
