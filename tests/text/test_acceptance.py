"""Acceptance processes: calibration, geometric match lengths, regimes, the registry."""

from __future__ import annotations

import hashlib
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


def test_draws_are_unchanged():
    """Golden digest of every built-in process's draws from before the registry."""
    h = hashlib.sha256()
    for cfg in PROCESS_CONFIGS.values():
        confidence, m = draw_acceptance(cfg, 50, 6, np.random.default_rng(7))
        h.update(confidence.tobytes())
        h.update(m.tobytes())
    assert h.hexdigest() == "74839f135eed1d7c1d87b269cdb72a7abd9ea00d77d42acb639798bd4b0ee5bd"


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
