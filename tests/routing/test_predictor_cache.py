"""The analytic predictor's answer caches: a cached answer is the answer of a fresh predictor."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.routing.predictor import UniqueExpertPredictor

P = np.full((2, 64), 8 / 64)


@pytest.mark.parametrize("draft", [None, [0.2, 0.1]], ids=["one profile", "draft profile"])
def test_repeated_and_permuted_queries_equal_fresh_answers(draft):
    """Many queries (repeats, permutations, same lengths with other true tokens) through one
    predictor are bit-identical to the same queries each on a new predictor."""
    cached = UniqueExpertPredictor(P, [0.38, 0.2], draft)
    rng = np.random.default_rng(3)
    queries = []
    for _ in range(12):
        lengths = rng.integers(1, 5, 6)
        true = np.minimum(rng.integers(0, 5, 6), lengths)
        order = rng.permutation(6)
        queries += [(lengths, true), (lengths, true), (lengths[order], true[order])]
        queries.append((lengths, np.ones(6, dtype=np.int64)))  # same T, other true tokens
    for lengths, true in queries:
        got = cached.expected_unique(lengths, true)
        want = UniqueExpertPredictor(P, [0.38, 0.2], draft).expected_unique(
            list(lengths), list(true)
        )
        np.testing.assert_array_equal(got, want)
        assert not got.flags.writeable


def test_true_tokens_matter_only_with_a_draft_profile():
    split = UniqueExpertPredictor(P, [0.38], [0.05])
    pooled = UniqueExpertPredictor(P, [0.38])
    lengths = np.array([4, 4, 4])
    all_true = split.expected_unique(lengths, lengths)
    one_true = split.expected_unique(lengths, np.ones(3, dtype=np.int64))
    assert (one_true > all_true).all()  # rejected drafts overlap less: more experts
    np.testing.assert_array_equal(
        pooled.expected_unique(lengths, lengths), pooled.expected_unique(lengths, [1, 1, 1])
    )


def test_odds_ratio_fits_are_cached_exactly_and_read_only():
    """The cached per-layer fit is the fresh bisection's answer bit for bit (pooled and per-layer
    profiles), the same object on a repeat, keyed by the values (an input changed in place
    after the call gets its own fit), and cannot be written through."""
    from simspec.routing import overlap

    rng = np.random.default_rng(11)
    p = np.tile(np.full(32, 4 / 32), (3, 1))
    for rho in (np.array([0.3, 0.2]), np.array([[0.3, 0.2], [0.25, 0.2], [0.4, 0.1]])):
        got = overlap.layer_log_odds_ratios(p, rho)
        fresh = overlap._layer_fit(p, rho)
        assert got.tobytes() == fresh.tobytes()
        assert overlap.layer_log_odds_ratios(p.copy(), rho.copy()) is got
        with pytest.raises(ValueError, match="read-only"):
            got[0, 0] = 0.0
    mutable = np.array([0.3, 0.2])
    first = overlap.layer_log_odds_ratios(p, mutable)
    mutable[0] = 0.35 + rng.uniform(0, 0.01)  # changed in place: a new key, a new fit
    second = overlap.layer_log_odds_ratios(p, mutable)
    assert second[0, 0] > first[0, 0]  # more overlap, a larger odds ratio
    assert second.tobytes() == overlap._layer_fit(p, mutable).tobytes()


def test_unreachable_overlap_raises_on_every_call():
    """A failed fit is not cached as an answer: the error comes back each time."""
    from simspec.routing.overlap import layer_log_odds_ratios

    for _ in range(2):
        with pytest.raises(ValueError, match="outside the reachable range"):
            layer_log_odds_ratios(P, [1.5])
