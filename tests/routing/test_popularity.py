"""Popularity laws: the registry, the weights every law draws, inclusion probabilities."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pytest

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


def test_draws_are_unchanged():
    """Golden digest of the inclusion probabilities of the three laws before the registry.

    Rounded to 1e-10 before hashing: numpy's power and sums take other SIMD paths on CPUs with
    AVX-512 (``X86_V4``), which move a zipf weight by one ulp (3e-16 relative), so the exact
    bytes belong to the CPU. The digest is the same with and without those paths
    (``NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL"``); a change of the draws or the laws moves
    far more than 1e-10.
    """
    h = hashlib.sha256()
    for name in ("uniform", "zipf", "dirichlet"):
        config = RoutingConfig(popularity=name)
        p = draw_inclusion_probabilities(config, 4, 64, 6, np.random.default_rng(5))
        h.update(np.round(p, 10).tobytes())
    assert h.hexdigest() == "922f6ba1da43c42b92775f7be9ce9c35191bd846af463993e40d7f534821f54a"


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
