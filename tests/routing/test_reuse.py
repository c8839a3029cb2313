"""The reuse sampler against closed forms: exact top-k, marginals, lag-1 overlap, unions.

Tolerances are Z standard errors of the sample mean (estimated from the sample itself), so a
test fails when the sampler's law differs from the closed form, not when a stream changes.
"""

from __future__ import annotations

import numpy as np
import pytest

from simspec.physics.experts import independent_union
from simspec.routing.overlap import markov_log_silent
from simspec.routing.reuse import ReuseSampler
from simspec.routing.sets import cumulative_union_sizes, to_sets

Z = 5.0  # standard errors allowed: a false alarm about once in 3.5 million checks


def _close(samples: np.ndarray, expected: float, span: float = 1.0) -> None:
    """The mean of ``samples`` is within Z standard errors of ``expected``, plus the mean's
    resolution ``span`` / n (samples spread over a range ``span`` wide can be all equal when
    the law puts almost all its mass on one value)."""
    samples = np.asarray(samples, dtype=float).ravel()
    error = samples.std(ddof=1) / np.sqrt(len(samples))
    slack = Z * error + span / len(samples)
    assert abs(samples.mean() - expected) <= slack, (samples.mean(), expected, error)


def _sequences(n, k, overlap, sequences=400, length=16, layers=2, seed=1):
    rng = np.random.default_rng(seed)
    return ReuseSampler(n, k).sample_sequences(rng, sequences, layers, length, overlap)


@pytest.mark.parametrize(("n", "k"), [(8, 2), (128, 8), (512, 10)])
@pytest.mark.parametrize("overlap", [None, 0.0, 0.38, 1.0])
def test_every_token_has_k_distinct_sorted_experts(n, k, overlap):
    ids = _sequences(n, k, overlap, sequences=50).astype(np.int64)
    assert ids.min() >= 0 and ids.max() < n
    assert (np.diff(ids, axis=-1) > 0).all()


@pytest.mark.parametrize(("n", "k"), [(8, 2), (128, 8), (256, 8), (512, 10)])
def test_independent_unions_match_the_moesd_closed_form(n, k):
    sizes = cumulative_union_sizes(_sequences(n, k, None, length=32), n)  # (seq, T, layers)
    for t in (1, 2, 4, 8, 16, 32):
        _close(sizes[:, t - 1], independent_union(n, k, t), span=n)


@pytest.mark.parametrize("overlap", [None, 0.0, 0.2, 0.7])
def test_every_expert_is_used_with_probability_k_over_n(overlap):
    n, k = 32, 4
    member = to_sets(_sequences(n, k, overlap, sequences=2000), n)
    chains = member.mean(axis=1).reshape(-1, n)  # per (sequence, layer): independent samples
    for e in range(n):  # each expert's frequency, against k / N
        _close(chains[:, e], k / n)


@pytest.mark.parametrize("overlap", [0.0, 0.03, 0.2, 0.38, 0.7, 1.0])
def test_lag1_overlap_matches_its_target_below_and_above_chance(overlap):
    n, k = 128, 8  # chance overlap k / N = 0.0625
    sets = to_sets(_sequences(n, k, overlap), n)
    shared = (sets[:, 1:] & sets[:, :-1]).sum(axis=-1) / k
    if overlap in (0.0, 1.0):
        assert (shared == overlap).all()
    else:
        _close(shared.mean(axis=1), overlap)  # per (sequence, layer): independent samples


@pytest.mark.parametrize("overlap", [0.1, 0.38, 0.8])
def test_unions_match_the_markov_closed_form(overlap):
    """Each expert's on/off sequence is the two-state chain P(on) = p, P(on | on) = rho:
    U(T) = N (1 − (1 − p)(1 − b)^(T − 1)), b = p (1 − rho) / (1 − p) (physics §7.3)."""
    n, k, length = 128, 8, 12
    sizes = cumulative_union_sizes(_sequences(n, k, overlap, length=length), n)
    p = np.array(k / n)
    for t in range(1, length + 1):
        silent = np.exp(markov_log_silent(p, [p * overlap] * (t - 1)))
        _close(sizes[:, t - 1], float(n * (1 - silent)), span=n)


def test_per_chain_overlaps():
    n, k = 64, 4
    overlap = np.array([0.1, 0.9])  # one per layer
    sets = to_sets(_sequences(n, k, overlap, sequences=1000), n)
    shared = (sets[:, 1:] & sets[:, :-1]).sum(axis=-1) / k  # (seq, T - 1, layers)
    for layer, rho in enumerate(overlap):
        _close(shared[..., layer].mean(axis=1), rho)


def test_fewer_than_2k_experts_forces_the_smallest_feasible_overlap():
    n, k = 10, 8  # two tokens share at least 2 k − N = 6 experts
    sets = to_sets(_sequences(n, k, 0.0, sequences=100), n)
    assert ((sets[:, 1:] & sets[:, :-1]).sum(axis=-1) == 6).all()


def test_a_subset_of_chains_gets_the_ids_the_whole_draw_gives_it():
    sampler = ReuseSampler(128, 8)
    rng = np.random.default_rng(4)
    previous = sampler.sample(rng, 300)
    overlap = np.linspace(0.0, 1.0, 300)
    state = rng.bit_generator.state
    whole = sampler.sample(rng, 300, previous, overlap)
    subset = np.array([0, 7, 150, 299])
    rng.bit_generator.state = state
    assert np.array_equal(sampler.sample(rng, 300, previous, overlap, subset), whole[subset])
    rng.bit_generator.state = state
    assert np.array_equal(sampler.sample(rng, 300, previous, overlap), whole)  # same bytes


def test_same_generator_seed_gives_same_routing():
    a, b, c = (_sequences(64, 4, 0.3, 3, 10, seed=s) for s in (11, 11, 12))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError):
        ReuseSampler(4, 5)
    assert ReuseSampler(16, 0).sample(np.random.default_rng(0), 3).shape == (3, 0)
