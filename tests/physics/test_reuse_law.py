"""The reuse law's union (skew and temporal overlap together) against Monte-Carlo routers.

The references live in tests/reference/reuse_router.py: the law sampled expert by expert (the
closed form must match it within sampling error), and a top-k router that keeps each of its
predecessor's experts with a probability and fills the rest by popularity (exactly k experts a
token; the closed form, given that router's measured p_e and lag-1 overlap, is an
approximation of it, and this file pins how good).
"""

from __future__ import annotations

import numpy as np
import pytest

from simspec.physics.experts import (
    independent_union_from_inclusion,
    reuse_fraction,
    reuse_union,
)
from simspec.routing.popularity import inclusion_probabilities
from simspec.routing.predictor import UniqueExpertPredictor
from tests.reference import reuse_router

PASSES = [(1, 4), (1, 16), (16, 5), (64, 2)]  # (sequences, tokens each)


def zipf_weights(n: int, exponent: float) -> np.ndarray:
    return np.arange(1, n + 1, dtype=float) ** -exponent


@pytest.mark.parametrize(("n", "k"), [(32, 4), (128, 8), (256, 8)])
@pytest.mark.parametrize("exponent", [0.0, 1.2])
@pytest.mark.parametrize("reuse", [0.0, 0.4, 0.8])
def test_closed_form_matches_the_law_sampled_expert_by_expert(n, k, exponent, reuse):
    rng = np.random.default_rng([n, k, int(10 * exponent), int(10 * reuse)])
    p = inclusion_probabilities(zipf_weights(n, exponent)[None], k)[0]
    sets = reuse_router.sample_expert_chains(rng, p, reuse, 4096, 16)
    _, overlap = reuse_router.statistics(sets)
    # The law's own overlap: chance + r (1 − chance), chance = Σ p² / Σ p.
    chance = float((p * p).sum() / p.sum())
    assert overlap == pytest.approx(chance + reuse * (1 - chance), abs=0.01)
    for batch, tokens in PASSES:
        unions = reuse_router.pass_unions(sets, batch, tokens)
        mean, error = unions.mean(), unions.std() / np.sqrt(len(unions))
        rho = chance + reuse * (1 - chance)
        closed = float(reuse_union(p[None], rho, [tokens] * batch)[0])
        # Near saturation every sample may touch all N: the missed experts are then a rare
        # count, with a Poisson error of sqrt(N − U) per pass.
        error = max(error, np.sqrt((n - closed) / len(unions)))
        assert abs(closed - mean) <= 4.5 * error, (batch, tokens, closed, mean, error)


@pytest.mark.parametrize(
    ("n", "k", "exponent", "reuse", "bound"),
    [(128, 8, 0.0, 0.4, 0.005), (128, 8, 0.8, 0.4, 0.025), (256, 8, 1.2, 0.8, 0.07)],
)
def test_closed_form_approximates_a_top_k_router(n, k, exponent, reuse, bound):
    """Given the router's measured p_e and lag-1 overlap, the closed form is within ``bound``
    of its unions: exact without skew, within 2.5 % at Zipf 0.8 and 7 % at Zipf 1.2 with
    reuse 0.8 (forcing exactly k experts makes a cold expert's return rarer than the law's)."""
    rng = np.random.default_rng([n, k, int(10 * exponent), int(10 * reuse), 1])
    sets = reuse_router.sample_sets(rng, zipf_weights(n, exponent), k, reuse, 4096, 16)
    p, overlap = reuse_router.statistics(sets)
    for batch, tokens in PASSES:
        mean = reuse_router.pass_unions(sets, batch, tokens).mean()
        closed = float(reuse_union(p[None], overlap, [tokens] * batch)[0])
        independent = float(independent_union_from_inclusion(p[None], batch * tokens)[0])
        assert abs(closed / mean - 1) <= bound, (batch, tokens, closed, mean)
        assert closed <= independent + 1e-9  # reuse never loads more than independence


def test_skew_and_overlap_compound():
    """With skew the overlap still acts: at the same reuse (overlap in excess of chance) the
    union is below both the uniform-popularity union and the independent union at the same
    skew."""
    n, k, reuse = 128, 8, 0.34
    skewed = inclusion_probabilities(zipf_weights(n, 1.2)[None], k)
    uniform = np.full((1, n), k / n)
    chance = float((skewed * skewed).sum() / k)
    for batch, tokens in [(1, 16), (16, 5)]:
        both = reuse_union(skewed, chance + reuse * (1 - chance), [tokens] * batch)[0]
        overlap_only = reuse_union(uniform, 1 / 16 + reuse * 15 / 16, [tokens] * batch)[0]
        skew_only = independent_union_from_inclusion(skewed, batch * tokens)[0]
        assert both < overlap_only and both < skew_only


def test_predictor_is_the_closed_form_at_lag_one():
    """The analytic mode's Markov path and the closed form are the same law."""
    rng = np.random.default_rng(5)
    p = inclusion_probabilities(rng.permutation(zipf_weights(128, 0.9))[None], 8)
    for rho in (0.2, 0.38, 0.7):
        predictor = UniqueExpertPredictor(p, [rho])
        for lengths in ([4], [5, 5, 2], [16] * 8):
            assert predictor.expected_unique(lengths)[0] == pytest.approx(
                reuse_union(p, rho, lengths)[0], rel=1e-12
            )


def test_reuse_fraction_spans_the_reachable_range():
    p = inclusion_probabilities(zipf_weights(64, 1.0)[None], 8)[0]
    chance = float((p * p).sum() / 8)
    least = float(np.maximum(2 * p - 1, 0).sum() / 8)
    assert reuse_fraction(p, [chance, 1.0, least]).tolist() == pytest.approx([0.0, 1.0, -1.0])
    with pytest.raises(ValueError, match="reachable range"):
        reuse_fraction(p, [least - 0.01])
