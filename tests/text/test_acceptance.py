"""Acceptance processes: calibration, geometric match lengths, regimes, the registry."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from simspec.errors import FieldError, ScenarioError
from simspec.sim.setup import build_setup
from simspec.text.acceptance import (
    ACCEPTANCE_PROCESSES,
    AcceptanceConfig,
    draw_acceptance,
    draw_confidences,
    match_lengths,
    slot_alphas,
)
from tests.helpers import tiny


def test_confidences_are_calibrated():
    rng = np.random.default_rng(0)
    cfg = AcceptanceConfig(alpha=0.6, confidence_concentration=4.0)
    alpha = slot_alphas(cfg, 200_000, 1, rng)
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


# -- the registry of acceptance processes -------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FirstSlotSure:
    """A process defined only in this test: slot 1 always accepted, later slots alpha."""

    alpha: float

    def slot_alphas(self, positions: int, slots: int, rng: np.random.Generator) -> np.ndarray:
        out = np.full((positions, slots), self.alpha)
        out[:, 0] = 1.0
        return out


@pytest.fixture
def first_sure(monkeypatch):
    """Register "first_sure" for one test (the registry is restored afterwards)."""
    monkeypatch.setattr(ACCEPTANCE_PROCESSES, "_types", dict(ACCEPTANCE_PROCESSES.items()))
    ACCEPTANCE_PROCESSES.register("first_sure")(FirstSlotSure)
    return "first_sure"


PROCESS_CONFIGS = {
    "iid": AcceptanceConfig(alpha=0.6),
    "per_position": AcceptanceConfig(process="per_position", alphas=(0.9, 0.5, 0.3)),
    "bursty": AcceptanceConfig(process="bursty"),
}


def test_every_registered_process_is_covered():
    assert sorted(PROCESS_CONFIGS) == ACCEPTANCE_PROCESSES.names()


@pytest.mark.parametrize("name", sorted(PROCESS_CONFIGS))
def test_every_process_gives_probabilities_reproducibly(name):
    cfg = PROCESS_CONFIGS[name]
    a = slot_alphas(cfg, 500, 5, np.random.default_rng(4))
    assert a.shape == (500, 5)
    assert ((a >= 0) & (a <= 1)).all()
    assert np.array_equal(a, slot_alphas(cfg, 500, 5, np.random.default_rng(4)))
    confidence, m = draw_acceptance(cfg, 500, 5, np.random.default_rng(4))
    assert confidence.shape == (500, 5) and ((m >= 0) & (m <= 5)).all()


def _acceptance_length(alphas: list[float], k: int) -> float:
    """Mean tokens committed by a k-draft pass when slot j is accepted with probability
    alphas[j − 1] (the last repeating): 1 + Σ_{j<=k} Π_{i<=j} alpha_i; for a constant alpha,
    Leviathan et al.'s (1 − alpha^(k+1)) / (1 − alpha)."""
    slot = [alphas[min(j, len(alphas) - 1)] for j in range(k)]
    return 1.0 + float(np.cumprod(slot).sum())


BURSTY = PROCESS_CONFIGS["bursty"]
_EASY = BURSTY.hard_to_easy / (BURSTY.easy_to_hard + BURSTY.hard_to_easy)
CLOSED_FORMS = {  # process -> acceptance length with k drafts
    "iid": lambda k: _acceptance_length([0.6], k),
    "per_position": lambda k: _acceptance_length([0.9, 0.5, 0.3], k),
    "bursty": lambda k: (
        _EASY * _acceptance_length([BURSTY.alpha_easy], k)
        + (1 - _EASY) * _acceptance_length([BURSTY.alpha_hard], k)
    ),
}


def test_leviathan_closed_form_by_hand():
    assert _acceptance_length([0.6], 3) == pytest.approx((1 - 0.6**4) / (1 - 0.6))


@pytest.mark.parametrize("name", sorted(PROCESS_CONFIGS))
def test_acceptance_length_matches_its_closed_form(name):
    """E[min(m, k)] + 1 over independent texts (the bursty regime persists along a text, so a
    text's mean is one sample), within 5 standard errors, for k = 1..6."""
    cfg, texts, positions = PROCESS_CONFIGS[name], 1500, 40
    rng = np.random.default_rng(7)
    m = np.stack([draw_acceptance(cfg, positions, 6, rng)[1] for _ in range(texts)])
    for k in range(1, 7):
        samples = (np.minimum(m, k) + 1).mean(axis=1)
        error = samples.std(ddof=1) / np.sqrt(texts)
        assert abs(samples.mean() - CLOSED_FORMS[name](k)) < 5 * error, k


@pytest.mark.parametrize("alpha", [0.2, 0.7])
def test_confidences_are_calibrated_beta_draws(alpha):
    """c ~ Beta(alpha kappa, (1 − alpha) kappa): mean alpha, variance
    alpha (1 − alpha) / (kappa + 1), and a slot is accepted with probability alpha."""
    cfg = AcceptanceConfig(alpha=alpha, confidence_concentration=8.0)
    confidence, m = draw_acceptance(cfg, 200_000, 1, np.random.default_rng(3))
    c = confidence[:, 0]
    variance = alpha * (1 - alpha) / 9.0
    assert abs(c.mean() - alpha) < 5 * np.sqrt(variance / len(c))
    assert c.var() == pytest.approx(variance, rel=0.03)  # ~10 standard errors at this size
    assert abs(m.mean() - alpha) < 5 * np.sqrt(alpha * (1 - alpha) / len(m))


def test_a_registered_process_is_selectable_by_name(first_sure):
    cfg = AcceptanceConfig(process=first_sure, alpha=0.0)
    _, m = draw_acceptance(cfg, 200, 4, np.random.default_rng(0))
    assert (m == 1).all()  # slot 1 always accepted, slot 2 never
    scenario = tiny(f'acceptance.process="{first_sure}"', "acceptance.alpha=0.0")
    assert scenario.acceptance.acceptance_process() == FirstSlotSure(alpha=0.0)
    refs = build_setup(scenario).references
    seq = refs.sequence(0)
    assert (seq.match_lengths[1:-2] == 1).all()


def test_process_errors_name_the_key_and_list_the_processes(first_sure):
    with pytest.raises(ScenarioError) as err:
        tiny('acceptance.process="markov"')
    assert err.value.key_path == "acceptance.process"
    assert "one of 'bursty', 'first_sure', 'iid', 'per_position'" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        tiny('acceptance.process="per_position"')
    assert err.value.key_path == "acceptance.alphas"
    with pytest.raises(FieldError, match="easy_to_hard"):
        AcceptanceConfig(process="bursty", easy_to_hard=0.0, hard_to_easy=0.0)
