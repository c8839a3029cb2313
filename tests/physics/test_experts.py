"""The shared closed forms of distinct experts, against hand values and Monte-Carlo counts."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.physics.experts import (
    added_experts,
    chance_overlap,
    independent_union,
    independent_union_from_inclusion,
)
from simspec.routing.maxent import MaxEntSampler
from simspec.routing.popularity import inclusion_probabilities
from simspec.routing.reuse import ReuseSampler
from simspec.routing.sets import to_sets


def _uniform_tokens(rng: np.random.Generator, chains: int, n: int, k: int) -> np.ndarray:
    """k distinct experts of n per chain, uniformly (random permutations): membership rows."""
    ids = np.argsort(rng.random((chains, n)), axis=1)[:, :k]
    return to_sets(ids, n)


def test_independent_union_by_hand():
    # N = 128, k_e = 8: 1 − (15/16)^4 = 0.22752380371..., times 128 = 29.1230... = 3.640 k_e.
    assert independent_union(128, 8, 4) == pytest.approx(128 * (1 - (15 / 16) ** 4), rel=1e-15)
    assert independent_union(128, 8, 4) / 8 == pytest.approx(3.6404, abs=1e-4)
    assert independent_union(8, 2, 2) == pytest.approx(8 - 8 * 0.75**2)  # 3.5
    assert independent_union(16, 16, 3) == 16.0
    assert independent_union(0, 0, 5) == 0.0


@pytest.mark.parametrize(("n", "k", "t"), [(8, 2, 3), (64, 6, 5), (128, 8, 4)])
def test_independent_union_matches_sampled_tokens(n, k, t):
    rng = np.random.default_rng(11)
    member = np.zeros((20_000, n), dtype=bool)
    for _ in range(t):
        member |= _uniform_tokens(rng, len(member), n, k)
    assert member.sum(axis=1).mean() == pytest.approx(independent_union(n, k, t), rel=0.01)


def test_independent_union_rescales_a_union():
    """A union of a tokens taken b times over is the union of a·b tokens (oracle's rescaling)."""
    one = independent_union(128, 8, 6)
    assert independent_union(128, one, 2.5) == pytest.approx(independent_union(128, 8, 15))


def test_union_from_inclusion_by_hand_and_uniform_limit():
    p = np.array([[1.0, 0.5, 0.5, 0.0]])
    assert independent_union_from_inclusion(p, 3).tolist() == [1.0 + 2 * (1 - 0.5**3)]
    uniform = np.full((2, 128), 8 / 128)
    assert independent_union_from_inclusion(uniform, 4) == pytest.approx(
        np.full(2, independent_union(128, 8, 4))
    )


def test_union_from_inclusion_matches_sampled_top_k_tokens():
    """Exact top-k tokens with skewed marginals, independent across tokens (max-entropy, D = 0)."""
    rng = np.random.default_rng(2)
    ranks = np.arange(1, 33, dtype=float) ** -1.0
    p = inclusion_probabilities(np.stack([rng.permutation(ranks) for _ in range(2)]), 4)
    ids = MaxEntSampler(p, np.zeros((2, 0))).sample_sequences(rng, 8000, 6)
    member = to_sets(ids, 32)  # (sequences, tokens, layers, N)
    assert (member.sum(axis=-1) == 4).all()
    for t in (1, 3, 6):
        measured = member[:, :t].any(axis=1).sum(axis=-1).mean(axis=0)
        assert measured == pytest.approx(independent_union_from_inclusion(p, t), rel=0.01)


def test_chance_overlap_by_hand():
    assert chance_overlap(np.full((3, 64), 4 / 64), 4) == pytest.approx(np.full(3, 1 / 16))
    p = np.array([1.0, 0.5, 0.5, 0.0])  # k_e = 2: (1 + 1/4 + 1/4) / 2
    assert float(chance_overlap(p)) == 0.75
    assert float(chance_overlap(p, 2)) == 0.75
    rows = np.array([[1.0, 0.0], [0.5, 0.5]])  # k_e = 1: overlaps 1 and 1/2
    assert chance_overlap(rows, 1, layer_mean=True) == 0.75
    with pytest.raises(ValueError, match="experts_per_token"):
        chance_overlap(rows, layer_mean=True)  # type: ignore[call-overload]


def test_chance_overlap_matches_sampled_independent_tokens():
    rng = np.random.default_rng(5)
    p = inclusion_probabilities(rng.dirichlet(np.full(24, 0.5), size=2), 3)
    ids = MaxEntSampler(p, np.zeros((2, 0))).sample_sequences(rng, 20_000, 2)
    member = to_sets(ids, 24)
    shared = (member[:, 0] & member[:, 1]).sum(axis=-1).mean(axis=0) / 3
    assert shared == pytest.approx(chance_overlap(p, 3), abs=0.01)


def test_added_experts_by_hand():
    # (1 − 1/16)·8·(128 − 8)/(128 − 8) = 7.5 new experts after the first token.
    assert added_experts(np.array([8.0]), 128, 8, 1 / 16).tolist() == [7.5]
    assert added_experts(np.array([68.0]), 128, 8, 0.5).tolist() == [2.0]  # 0.5·8·60/120
    assert added_experts(np.array([128.0]), 128, 8, 0.0).tolist() == [0.0]
    assert added_experts(np.array([3.0]), 0, 0, 0.3).tolist() == [0.0]  # dense model
    assert added_experts(np.array([8.0]), 8, 8, 0.3).tolist() == [0.0]  # every expert used


@pytest.mark.parametrize("overlap", [0.0, 0.38, 0.8])
def test_added_experts_matches_the_reuse_sampler(overlap):
    """Union of two tokens, then a draft reusing Binomial(k_e, rho) of the last one's experts."""
    n, k, chains = 64, 6, 40_000
    rng = np.random.default_rng(9)
    sampler = ReuseSampler(n, k)
    first = sampler.sample(rng, chains)
    last = sampler.sample(rng, chains)
    draft = sampler.sample(rng, chains, last, overlap)
    loaded = to_sets(first, n) | to_sets(last, n)
    new = (to_sets(draft, n) & ~loaded).sum(axis=1)
    union = loaded.sum(axis=1).astype(float)
    assert new.mean() == pytest.approx(added_experts(union, n, k, overlap).mean(), rel=0.02)
