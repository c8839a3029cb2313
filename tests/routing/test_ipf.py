"""The max-entropy (IPF) predictor of unique experts: closed forms, IPF itself, the sampler."""

from __future__ import annotations

import time

import numpy as np
import pytest

from simspec.physics.experts import chance_overlap, independent_union_from_inclusion, reuse_fraction
from simspec.routing import ipf
from simspec.routing.maxent import MaxEntSampler
from simspec.routing.overlap import markov_log_silent, overlap_range, pair_probability
from simspec.routing.popularity import inclusion_probabilities
from simspec.routing.predictor import UniqueExpertPredictor
from simspec.routing.sets import to_sets
from tests.reference import ipf as reference_ipf

SLOW = (0.38, 0.32, 0.29, 0.27, 0.26, 0.25)  # slowly decaying overlaps, 0.38 adjacent (Cohere)


def uniform(n: int, k: int, layers: int = 1) -> np.ndarray:
    return np.full((layers, n), k / n)


def zipf(n: int, k: int, exponent: float = 0.8, seed: int = 0) -> np.ndarray:
    ranks = np.arange(1, n + 1, dtype=float) ** -exponent
    return inclusion_probabilities(np.random.default_rng(seed).permutation(ranks)[None], k)


def correlated_profile(p: np.ndarray, lags: int) -> np.ndarray:
    """SLOW's excess over chance (at k/N = 1/16) carried to the chance level of ``p``."""
    chance = float(chance_overlap(p)[0])
    excess = (np.array(SLOW[:lags]) - 1 / 16) / (1 - 1 / 16)
    return chance + excess * (1 - chance)


# -- statistics helpers ---------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.01, 0.2, 0.5, 0.8, 0.99])
@pytest.mark.parametrize("reuse", [0.0, 0.3, 0.9, 1.0])
def test_pair_probability_has_the_margins_and_the_correlation(p, reuse):
    """The 2x2 table of (x_t, x_{t+d}) has margins (1 − p, p) and correlation r."""
    q = float(pair_probability(np.array(p), reuse))
    table = np.array([[1 - 2 * p + q, p - q], [p - q, q]])
    assert (table >= -1e-15).all()
    assert table.sum() == pytest.approx(1.0)
    assert (q - p * p) / (p * (1 - p)) == pytest.approx(reuse, abs=1e-12)


def test_reuse_fraction_matches_aggregate_overlap():
    p = zipf(64, 8)
    for rho in (0.2, 0.38, 0.7):
        r = reuse_fraction(p, [rho])
        assert pair_probability(p, r[0]).sum() / 8 == pytest.approx(rho, abs=1e-12)


def test_unreachable_overlap_is_a_value_error():
    p = np.full(8, 0.75)  # k = 6 of 8: two tokens share at least 4 experts
    low, _ = overlap_range(p)
    assert low == pytest.approx(4 / 6)
    assert reuse_fraction(p, [low])[0] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="reachable range"):
        reuse_fraction(p, [0.5])


def test_inconsistent_lag_overlaps_are_a_value_error():
    # Adjacent tokens identical but tokens two apart nearly disjoint: no process does that.
    with pytest.raises(ValueError, match="cannot be matched"):
        UniqueExpertPredictor(uniform(128, 8), [0.99, 0.0625]).expected_unique([3])


# -- closed forms ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("p", "rho"),
    [
        (0.0625, 0.01),
        (0.0625, 0.38),
        (0.0625, 0.9),
        (0.25, 0.1),
        (0.25, 0.6),
        (0.6, 0.4),
        (0.6, 0.9),
    ],
)
def test_classical_ipf_with_lag1_equals_markov_closed_form(p, rho):
    """With D = 1, IPF over the 2^T patterns equals the closed form to 1e-6."""
    q = float(pair_probability(np.array(p), reuse_fraction(np.array([p]), [rho])[0]))
    for tokens in range(2, 9):
        table = reference_ipf.classical_ipf(p, [q], tokens)
        closed = np.exp(markov_log_silent(np.array([p]), [np.array([q])] * (tokens - 1)))
        assert table.reshape(-1)[0] == pytest.approx(closed[0], abs=1e-6)


@pytest.mark.parametrize("tokens", [3, 5, 8])
def test_product_form_ipf_equals_classical_ipf(tokens):
    p = np.array([0.0625, 0.3])
    q = np.stack([np.array(SLOW[: tokens - 1]) * 0.0625, np.array(SLOW[: tokens - 1]) * 0.3])
    fast = ipf.ipf_log_silent(p, q, tokens)
    for row in range(2):
        dense = reference_ipf.classical_ipf(float(p[row]), list(q[row]), tokens)
        assert fast[row] == pytest.approx(np.log(dense.reshape(-1)[0]), abs=1e-9)
        law = ipf.pattern_distribution(p[row : row + 1], q[row : row + 1], tokens)
        assert law.reshape(-1) == pytest.approx(dense.reshape(-1), abs=1e-9)


@pytest.mark.parametrize(("n", "k"), [(8, 2), (64, 8), (128, 8), (512, 10)])
@pytest.mark.parametrize("batch", [1, 4, 16])
def test_chance_overlap_gives_moesd_independent_formula(n, k, batch):
    """rho_d at chance level, uniform popularity: N(1 − (1 − k/N)^(B·T)) to 1e-6."""
    pred = UniqueExpertPredictor(uniform(n, k), [k / n] * 3)
    for tokens in (1, 2, 3, 5, 8, 12):
        expected = n * (1 - (1 - k / n) ** (batch * tokens))
        assert pred.expected_unique([tokens] * batch)[0] == pytest.approx(expected, abs=1e-6)


def test_reference_values_by_hand():
    """Hand-computed Markov (rho_1 = 0.38) and slowly decaying values, N=128, k=8."""
    markov = UniqueExpertPredictor(uniform(128, 8), [0.38])
    for tokens, value in ((2, 1.62), (4, 2.78), (8, 4.84)):
        assert markov.expected_unique([tokens])[0] / 8 == pytest.approx(value, abs=0.005)
    slow = UniqueExpertPredictor(uniform(128, 8), SLOW)
    for tokens, value in ((4, 2.64), (8, 4.39)):
        assert slow.expected_unique([tokens])[0] / 8 == pytest.approx(value, abs=0.005)


def test_independent_u4_is_3_64_and_which_overlaps_give_31_percent():
    """Cohere: k/N = 1/16 independent gives U(4) = 3.64 k_e; 2.5 k_e is −31 %.

    Which overlap profiles reach it (max-entropy model): Markov needs rho_1 = 0.482; the
    slowly decaying shape (SLOW) needs rho = (0.434, 0.364, 0.329); with the reported
    rho_1 = 0.38 even flat persistence (rho_2 = rho_3 = 0.38) stops at 2.55 k_e (−30 %).
    """
    p = uniform(128, 8)
    independent = independent_union_from_inclusion(p, 4)[0] / 8
    assert independent == pytest.approx(3.64, abs=0.005)
    assert UniqueExpertPredictor(p, [8 / 128]).expected_unique([4])[0] / 8 == pytest.approx(
        independent, abs=1e-9
    )

    def u4(profile):
        return UniqueExpertPredictor(p, profile).expected_unique([4])[0] / 8

    for profile in ([0.482], [0.434, 0.364, 0.329], [0.40, 0.40, 0.40]):
        assert u4(profile) == pytest.approx(2.50, abs=0.01)
        assert 1 - u4(profile) / independent == pytest.approx(0.31, abs=0.005)
    assert u4([0.38]) == pytest.approx(2.78, abs=0.005)  # Markov at Cohere's rho_1: −24 %
    assert u4([0.38, 0.38, 0.38]) == pytest.approx(2.55, abs=0.005)


def test_node_interpolation_matches_per_expert_fit():
    p = zipf(96, 8, exponent=1.0)
    profile = correlated_profile(p, 4)
    coarse = UniqueExpertPredictor(p, profile)
    exact = UniqueExpertPredictor(p, profile, nodes=96)
    for tokens in (2, 5, 9):
        for batch in (1, 16):
            assert coarse.expected_unique([tokens] * batch)[0] == pytest.approx(
                exact.expected_unique([tokens] * batch)[0], rel=2e-4
            )


def test_more_overlap_fewer_experts_and_batches_add_up():
    p = uniform(128, 8)
    overlaps = (0.1, 0.3, 0.5, 0.7)
    values = [UniqueExpertPredictor(p, [r, r * 0.8]).expected_unique([6])[0] for r in overlaps]
    assert values == sorted(values, reverse=True)
    pred = UniqueExpertPredictor(p, SLOW[:3])
    one = pred.expected_unique([5])[0]
    two = pred.expected_unique([5, 5])[0]
    # Independent sequences: P(silent in both) = P(silent)^2.
    assert two == pytest.approx(128 * (1 - (1 - one / 128) ** 2))
    mixed = pred.expected_unique([2, 7, 3])
    assert pred.expected_unique([3, 2, 7]) is mixed  # cached per batch composition


def test_draft_profile_applies_to_rejected_tokens_only():
    p = uniform(128, 8)
    same = UniqueExpertPredictor(p, SLOW[:3])
    split = UniqueExpertPredictor(p, SLOW[:3], draft_overlaps=[0.1])
    # All tokens true: the draft profile does not matter.
    assert split.expected_unique([5], [5])[0] == pytest.approx(same.expected_unique([5])[0])
    # Rejected drafts overlapping less than true tokens load more experts.
    values = [split.expected_unique([5], [a])[0] for a in (5, 4, 2, 1)]
    assert values == sorted(values)
    assert values[-1] > same.expected_unique([5])[0] * 1.05


def test_cached_queries_take_under_a_millisecond():
    rng = np.random.default_rng(0)
    weights = np.stack([rng.permutation(np.arange(1, 129.0) ** -0.8) for _ in range(48)])
    pred = UniqueExpertPredictor(inclusion_probabilities(weights, 8), SLOW[:4])
    batch = [int(t) for t in rng.integers(1, 10, size=32)]
    pred.expected_unique(batch)  # first query fits the tables
    start = time.perf_counter()
    for _ in range(200):
        pred.expected_unique(batch)
    assert (time.perf_counter() - start) / 200 < 1e-3
    compositions = [[int(t) for t in rng.integers(1, 10, size=32)] for _ in range(50)]
    start = time.perf_counter()
    for c in compositions:  # new batch compositions, tables already fitted
        pred.expected_unique(c)
    assert (time.perf_counter() - start) / 50 < 1e-3


# -- against the sampler (a fast subset of studies/ipf_vs_sampler.py's grid) ----------------------
def sampled_unique(p, profile, tokens, batches, sequences, seed=0, offset=8):
    """Mean unique experts of B sampled sequences, windows starting at ``offset``."""
    sampler = MaxEntSampler(p, profile[None, :])
    ids = sampler.sample_sequences(np.random.default_rng(seed), sequences, offset + max(tokens))
    sets = to_sets(ids[:, :, 0], p.shape[1])
    out = {}
    for b in batches:
        groups = sequences // b
        for t in tokens:
            window = sets[: groups * b, offset : offset + t].any(axis=1)
            out[b, t] = window.reshape(groups, b, -1).any(axis=1).sum(axis=1).mean()
    return out


def test_ipf_matches_sampler_within_two_percent():
    """IPF vs the sampler with the same statistics, mean |relative error| < 2 %.

    A subset of the validation grid (studies/ipf_vs_sampler.py runs all of it): T in {2, 4, 8, 12},
    B in {1, 4}, (N, k_e) in {(8, 2), (128, 8)}, uniform and Zipf popularity, Markov and
    slowly decaying (6 lags) overlaps. Small N is the hardest case: forcing exactly k_e of 8
    experts per token raises the realised overlap by ~0.01-0.02.
    """
    tokens, batches = (2, 4, 8, 12), (1, 4)
    per_config = {}
    for n, k in ((8, 2), (128, 8)):
        for popularity in ("uniform", "zipf"):
            p = uniform(n, k) if popularity == "uniform" else zipf(n, k)
            for lags in (1, 6):
                profile = correlated_profile(p, lags)
                sampled = sampled_unique(p, profile, tokens, batches, sequences=1600)
                pred = UniqueExpertPredictor(p, profile)
                per_config[n, popularity, lags] = [
                    sampled[b, t] / pred.expected_unique([t] * b)[0] - 1
                    for b in batches
                    for t in tokens
                ]
    errors = np.abs(np.array(list(per_config.values())))
    assert errors.mean() < 0.02
    assert errors.mean(axis=1).max() < 0.03, per_config
    assert errors.max() < 0.05


@pytest.mark.parametrize(("tokens", "lags"), [(7, 3), (9, 2), (6, 5)])
def test_windowed_ipf_equals_classical_ipf_beyond_the_window(tokens, lags):
    """T > D + 1: tokens past the first D + 1 use the full window, the oldest token leaves it."""
    p = np.array([0.0625, 0.3, 0.01])
    q = np.stack([np.array(SLOW[:lags]) * row for row in p])
    fast = ipf.ipf_log_silent(p, q, tokens)
    for row in range(len(p)):
        dense = reference_ipf.classical_ipf(float(p[row]), list(q[row]), tokens)
        assert fast[row] == pytest.approx(np.log(dense.reshape(-1)[0]), rel=1e-8)


def test_rows_without_a_lag_are_fitted_as_with_fewer_lags():
    p = np.array([0.0625, 0.2])
    q = np.stack([np.array(SLOW[:3]) * row for row in p])
    q[1, 2] = np.nan  # row 1: lags 1-2 only
    both = ipf.ipf_log_silent(p, q, 7)
    alone = ipf.ipf_log_silent(p[1:], q[1:, :2], 7)
    assert both[1] == pytest.approx(alone[0], rel=1e-8)
    assert both[0] == pytest.approx(ipf.ipf_log_silent(p[:1], q[:1], 7)[0], rel=1e-12)


def test_batch_composition_key_ignores_order_and_empty_sequences():
    pred = UniqueExpertPredictor(zipf(64, 4), list(SLOW[:3]), draft_overlaps=[0.2, 0.1])
    first = pred.expected_unique([3, 5, 3, 0], [2, 5, 9, 0])
    assert pred.expected_unique([5, 3, 3], [5, 3, 2]) is first  # one cache entry
    expected = pred.log_silent(3, 2) + pred.log_silent(3, 3) + pred.log_silent(5, 5)
    assert first == pytest.approx((1.0 - np.exp(expected)).sum(axis=1), rel=1e-12)
    plain = UniqueExpertPredictor(zipf(64, 4), list(SLOW[:3]))
    assert plain.expected_unique([4, 0, 4]) is plain.expected_unique(np.array([4, 4]))
    with pytest.raises(ValueError, match="differ in length"):
        pred.expected_unique([3, 4], [1])
