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


def test_unreachable_overlap_raises_on_every_call():
    """A failed fit is not cached as an answer: the error comes back each time."""
    from simspec.routing.overlap import layer_reuse

    for _ in range(2):
        with pytest.raises(ValueError, match="outside the reachable range"):
            layer_reuse(P, [1.5])
