"""Acceptance processes: calibration, geometric match lengths, regimes."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.text.acceptance import AcceptanceConfig, draw_acceptance, match_lengths, slot_alphas


def test_confidences_are_calibrated():
    rng = np.random.default_rng(0)
    cfg = AcceptanceConfig(alpha=0.6, confidence_concentration=4.0)
    alpha = slot_alphas(cfg, 200_000, 1, rng)
    from simspec.text.acceptance import draw_confidences

    conf = draw_confidences(alpha, cfg.confidence_concentration, rng)[:, 0]
    accepted = rng.random(len(conf)) < conf
    bins = np.linspace(0, 1, 11)
    idx = np.digitize(conf, bins) - 1
    for b in range(10):
        sel = idx == b
        if sel.sum() > 2000:
            assert accepted[sel].mean() == pytest.approx(conf[sel].mean(), abs=0.02)


@pytest.mark.parametrize("alpha", [0.3, 0.7, 0.9])
def test_iid_match_lengths_are_geometric(alpha):
    _, m = draw_acceptance(AcceptanceConfig(alpha=alpha), 100_000, 8, np.random.default_rng(1))
    for j in range(1, 9):
        assert (m >= j).mean() == pytest.approx(alpha**j, abs=0.01)
    assert m.max() <= 8


def test_per_position_alphas():
    cfg = AcceptanceConfig(process="per_position", alphas=(0.9, 0.5))
    _, m = draw_acceptance(cfg, 100_000, 4, np.random.default_rng(2))
    assert (m >= 1).mean() == pytest.approx(0.9, abs=0.01)
    assert (m >= 2).mean() == pytest.approx(0.9 * 0.5, abs=0.01)
    assert (m >= 3).mean() == pytest.approx(0.9 * 0.5 * 0.5, abs=0.01)  # last value repeats


def test_bursty_regime_has_stationary_mix_and_runs():
    cfg = AcceptanceConfig(
        process="bursty", alpha_easy=0.9, alpha_hard=0.3, easy_to_hard=0.02, hard_to_easy=0.06
    )
    a = slot_alphas(cfg, 200_000, 1, np.random.default_rng(3))[:, 0]
    easy = a == 0.9
    assert easy.mean() == pytest.approx(0.06 / 0.08, abs=0.03)
    switches = np.count_nonzero(easy[1:] != easy[:-1])
    # Mean run lengths 50 (easy) and ~17 (hard): far fewer switches than i.i.d. regimes.
    assert switches < 0.05 * len(a)


def test_match_lengths_leading_run():
    acc = np.array([[1, 1, 0, 1], [0, 1, 1, 1], [1, 1, 1, 1]], dtype=bool)
    assert match_lengths(acc).tolist() == [2, 0, 4]


def test_alpha_zero_and_one_are_deterministic():
    _, m0 = draw_acceptance(AcceptanceConfig(alpha=0.0), 100, 4, np.random.default_rng(0))
    _, m1 = draw_acceptance(AcceptanceConfig(alpha=1.0), 100, 4, np.random.default_rng(0))
    assert (m0 == 0).all() and (m1 == 4).all()
