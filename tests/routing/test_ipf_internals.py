"""The IPF fit (simspec.routing.ipf): margins by brute force, stacked = separate fits, and
agreement with the reference product-form loop and dense IPF (tests/reference/ipf.py)."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.physics.experts import reuse_fraction
from simspec.routing import ipf
from simspec.routing.overlap import pair_probability
from tests.reference import ipf as reference_ipf

SLOW = (0.38, 0.32, 0.29, 0.27, 0.26, 0.25, 0.245, 0.24)


def profile_q(p: np.ndarray, lags: int) -> np.ndarray:
    """Pair targets q (M, lags) with SLOW's overlaps shared by the reuse law."""
    reuse = reuse_fraction(np.full(16, 1 / 16), SLOW[:lags])
    return pair_probability(p[:, None], reuse[None, :])


def reference(p: np.ndarray, q: np.ndarray, tokens: int) -> np.ndarray:
    """log P(silent) from the reference loop (the textbook iterates in product form)."""
    depth, targets = ipf._pair_targets(q, q, tokens, tokens)
    factors, _ = reference_ipf.fit_factors(p, targets, tokens, depth)
    return reference_ipf.log_silent_from_factors(factors, tokens, depth)


@pytest.mark.parametrize("bits", [2, 3, 5])
def test_lag_margins_equal_brute_force_marginals(bits):
    """Each lag's margin (suffix marginal × product of the earlier tables) equals the (x_t,
    x_{t−d}) marginal of the joint after the earlier rescalings, summed over all 2^w cells."""
    rng = np.random.default_rng(bits)
    n = 3
    joint = rng.random((n, 1 << bits))
    lags = [(d, None) for d in range(1, bits)]
    goals = rng.random((len(lags), n, 2, 2))
    goals /= goals.sum(axis=(2, 3), keepdims=True)
    cur = joint.reshape(n, 2, -1)
    suffix = {bits - 1: joint.reshape(n, 2, 2, -1)}
    for d in range(bits - 2, 0, -1):
        half = cur.shape[2] // 2
        cur = cur[:, :, :half] + cur[:, :, half:]
        suffix[d] = cur.reshape(n, 2, 2, -1)
    total = joint.sum(axis=1).reshape(n, 1, 1)
    ratios, raw = ipf._rake_lags(suffix, lags, goals * total, total, careful=False)
    # Brute force: column c has x_t at bit w − 1 and x_{t−j} at bit j − 1.
    cols = np.arange(1 << bits)
    x_t = (cols >> (bits - 1)) & 1
    law = joint.copy()
    for i, (d, _) in enumerate(lags):
        x_d = (cols >> (d - 1)) & 1
        margin = np.zeros((n, 2, 2))
        for c in range(2):
            for a in range(2):
                margin[:, c, a] = law[:, (x_t == c) & (x_d == a)].sum(axis=1)
        assert raw[i] == pytest.approx(margin, rel=1e-12)
        ratio = goals[i] * total / margin
        law = law * ratio[:, x_t, x_d]
        # After the rescaling the margin is the goal.
        check = np.array(
            [[law[:, (x_t == c) & (x_d == a)].sum(axis=1) for a in (0, 1)] for c in (0, 1)]
        )
        assert np.moveaxis(check, 2, 0) / total == pytest.approx(goals[i], rel=1e-12)
    # The product of the tables is the whole rescaling.
    assert (joint * ratios.reshape(n, -1)) == pytest.approx(law, rel=1e-12)


@pytest.mark.parametrize(("tokens", "lags"), [(4, 3), (6, 2), (7, 5), (9, 4)])
def test_matches_the_reference_loop_and_dense_ipf(tokens, lags):
    p = np.array([0.0625, 0.3, 0.01])
    q = profile_q(p, lags)
    fast = ipf.ipf_log_silent(p, q, tokens)
    assert fast == pytest.approx(reference(p, q, tokens), rel=1e-12)
    for row in range(len(p)):
        dense = reference_ipf.classical_ipf(float(p[row]), list(q[row]), tokens)
        assert fast[row] == pytest.approx(np.log(dense.reshape(-1)[0]), rel=1e-8)


def test_stacked_fits_are_bit_identical_to_separate_fits():
    p = np.array([0.0625, 0.2, 0.01])
    q = profile_q(p, 6)
    q[1, 4:] = np.nan  # row 1 has lags 1-4 only
    separate = {t: ipf.ipf_log_silent(p, q, t) for t in range(1, 11)}
    with ipf.fitted_together(range(1, 11)):
        together = {t: ipf.ipf_log_silent(p, q, t) for t in range(1, 11)}
    for t in range(1, 11):
        assert np.array_equal(separate[t], together[t]), t
    depth, targets = ipf._pair_targets(q, q, 10, 10)
    stacked = ipf.fit_log_silent(p, targets, [10, 4, 7], depth)
    for size, result in zip([10, 4, 7], stacked, strict=True):
        assert np.array_equal(result, separate[size])


def test_a_lag_without_targets_in_the_middle():
    """Lag 2 unconstrained for every row (nan column): the product of tables skips a bit."""
    p = np.array([0.0625, 0.25])
    q = profile_q(p, 4)
    q[:, 1] = np.nan
    fast = ipf.ipf_log_silent(p, q, 6)
    assert fast == pytest.approx(reference(p, q, 6), rel=1e-12)


def test_zero_target_cells_take_the_careful_path():
    """q = p (each token repeats the last one's use of the expert): zero goal cells p − q,
    zero margins after the first rescaling, ratio 0 there; P(silent) = 1 − p."""
    p = np.array([0.3, 0.1])
    q = np.array([[0.3, 0.3, 0.3], [0.1, 0.1, 0.1]])
    fast = ipf.ipf_log_silent(p, q, 6)
    assert fast == pytest.approx(reference(p, q, 6), rel=1e-12)
    assert fast == pytest.approx(np.log1p(-p), rel=1e-9)


def test_inconsistent_overlaps_fail_alone_or_together():
    p = np.array([0.0625])
    q = np.array([[0.99, 0.0625 * 0.0625]]) * 0.0625
    with pytest.raises(ValueError, match="cannot be matched") as alone:
        ipf.ipf_log_silent(p, q, 4)
    with ipf.fitted_together(range(1, 6)), pytest.raises(ValueError, match="matched") as together:
        ipf.ipf_log_silent(p, q, 4)
    assert str(alone.value) == str(together.value)
