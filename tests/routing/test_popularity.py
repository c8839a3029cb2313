"""Popularity laws: the registry, the weights every law draws, inclusion probabilities."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.stats

from simspec.errors import FieldError, ScenarioError
from simspec.routing.config import RoutingConfig
from simspec.routing.popularity import (
    POPULARITIES,
    draw_inclusion_probabilities,
    inclusion_probabilities,
    popularity_weights,
)
from simspec.sim.setup import build_setup
from tests.commands.test_cli import run_main
from tests.helpers import tiny


@dataclass(frozen=True, slots=True)
class TwoTierPopularity:
    """A law defined only in this test: the first half of the experts twice as popular."""

    def weights(self, num_layers: int, num_experts: int, rng: np.random.Generator) -> np.ndarray:
        w = np.ones((num_layers, num_experts))
        w[:, : num_experts // 2] = 2.0
        return w / w.sum(axis=1, keepdims=True)


@pytest.fixture
def two_tier(monkeypatch):
    """Register "two_tier" for one test (the registry is restored afterwards)."""
    monkeypatch.setattr(POPULARITIES, "_types", dict(POPULARITIES.items()))
    POPULARITIES.register("two_tier")(TwoTierPopularity)
    return "two_tier"


@pytest.mark.parametrize("name", POPULARITIES.names())
def test_every_law_draws_normalised_weights_reproducibly(name):
    config = RoutingConfig(popularity=name)
    w = popularity_weights(config, 5, 64, np.random.default_rng(1))
    assert w.shape == (5, 64)
    assert (w > 0).all()
    assert w.sum(axis=1) == pytest.approx(np.ones(5))
    assert np.array_equal(w, popularity_weights(config, 5, 64, np.random.default_rng(1)))
    p = draw_inclusion_probabilities(config, 5, 64, 6, np.random.default_rng(1))
    assert p.sum(axis=1) == pytest.approx(np.full(5, 6.0))
    assert p.max() <= 1.0


def test_uniform_draws_nothing_and_skewed_laws_differ_per_layer():
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    popularity_weights(RoutingConfig(), 4, 16, rng)
    assert rng.bit_generator.state == before
    for name in ("zipf", "dirichlet"):
        w = popularity_weights(RoutingConfig(popularity=name), 4, 16, rng)
        assert not np.array_equal(w[0], w[1])  # a different hot set per layer


def test_law_parameters_come_from_the_routing_table():
    steep = popularity_weights(
        RoutingConfig(popularity="zipf", zipf_exponent=2.0), 1, 32, np.random.default_rng(0)
    )
    flat = popularity_weights(
        RoutingConfig(popularity="zipf", zipf_exponent=0.0), 1, 32, np.random.default_rng(0)
    )
    assert steep.max() / steep.min() == pytest.approx(32.0**2)
    assert flat == pytest.approx(np.full((1, 32), 1 / 32))


def test_zipf_draws_a_uniform_permutation_of_the_rank_weights():
    """Each layer's weights are the normalised ranks^-s in some order, and the hottest expert's
    position is uniform over the N experts (chi-square test against the uniform law)."""
    n, layers, s = 8, 4000, 0.8
    w = popularity_weights(RoutingConfig(popularity="zipf", zipf_exponent=s), layers, n, _rng(5))
    ranks = np.arange(1, n + 1, dtype=float) ** -s
    assert np.sort(w, axis=1) == pytest.approx(np.tile(np.sort(ranks / ranks.sum()), (layers, 1)))
    counts = np.bincount(w.argmax(axis=1), minlength=n)
    expected = layers / n
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < scipy.stats.chi2.ppf(1 - 1e-6, n - 1)


@pytest.mark.parametrize("concentration", [0.3, 2.0])
def test_dirichlet_weights_have_the_dirichlet_mean_and_variance(concentration):
    """Dirichlet(c, ..., c) over N experts: E w_e = 1/N, Var w_e = (1/N)(1 − 1/N) / (N c + 1)."""
    n, layers = 16, 4000
    config = RoutingConfig(popularity="dirichlet", dirichlet_concentration=concentration)
    w = popularity_weights(config, layers, n, _rng(6))[:, 0]  # one expert: independent layers
    variance = (1 / n) * (1 - 1 / n) / (n * concentration + 1)
    assert abs(w.mean() - 1 / n) < 5 * np.sqrt(variance / layers)
    # The sample variance of n draws has standard error ~ sqrt((m4 − s^4) / n); m4 from the data.
    centred = w - w.mean()
    error = np.sqrt(((centred**4).mean() - centred.var() ** 2) / layers)
    assert abs(centred.var() - variance) < 5 * error


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_inclusion_probabilities_sum_to_k_and_cap_at_one():
    rng = np.random.default_rng(1)
    w = rng.dirichlet(np.full(64, 0.3), size=5)
    p = inclusion_probabilities(w, 8)
    assert p.sum(axis=1) == pytest.approx(np.full(5, 8.0))
    assert (p <= 1.0 + 1e-12).all() and (p >= 0).all()
    free = p < 1.0  # uncapped experts keep the weights' proportions
    for row in range(5):
        ratio = p[row, free[row]] / w[row, free[row]]
        assert ratio == pytest.approx(np.full(ratio.shape, ratio[0]))


def test_a_registered_law_is_selectable_by_name(two_tier, capsys):
    config = RoutingConfig(popularity=two_tier, overlaps=(0.3, 0.25))
    w = popularity_weights(config, 2, 8, np.random.default_rng(0))
    assert w[0].tolist() == pytest.approx([2 / 12] * 4 + [1 / 12] * 4)
    refs = build_setup(tiny(f'routing.popularity="{two_tier}"')).references
    n, k = refs.num_experts, refs.shape.experts_per_token
    weights = TwoTierPopularity().weights(1, n, np.random.default_rng(0))
    assert refs.inclusion_probabilities[0] == pytest.approx(inclusion_probabilities(weights, k)[0])
    assert refs.pass_unique_experts([(0, 1, 2)]).shape == (refs.num_layers,)
    code, out, _ = run_main(
        capsys, "routing", "predict", "--model", "qwen3-30b-a3b", "--popularity", two_tier
    )
    assert code == 0 and f"{two_tier} popularity" in out


def test_unknown_law_error_lists_the_registered_names(two_tier):
    with pytest.raises(ScenarioError) as err:
        tiny('routing.popularity="pareto"')
    assert err.value.key_path == "routing.popularity"
    assert "one of 'dirichlet', 'two_tier', 'uniform', 'zipf'" in str(err.value)
    with pytest.raises(FieldError, match="found 'pareto'"):
        RoutingConfig(popularity="pareto")
