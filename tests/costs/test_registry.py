"""A new cost model is one registered class: the scenario and the engine find it by name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simspec.costs.base import COST_MODELS
from simspec.costs.roofline import RooflineCostModel
from simspec.errors import ScenarioError
from simspec.sim.setup import build_setup
from tests.helpers import simulate, tiny


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DoubledRoofline(RooflineCostModel):
    """The roofline with every target pass twice as long: a stand-in for a user's model."""

    def verify_pass(self, tokens_per_request, context_tokens, unique_experts):
        cost = RooflineCostModel.verify_pass(
            self, tokens_per_request, context_tokens, unique_experts
        )
        return dataclasses.replace(cost, other_s=cost.other_s + cost.total_s)


def test_an_unknown_cost_model_lists_the_registered_ones():
    assert {"roofline", "calibrated"} <= set(COST_MODELS.names())
    with pytest.raises(ScenarioError, match=r"costs\.model.*'calibrated', 'roofline'"):
        tiny('costs.model="nope"')


def test_a_registered_cost_model_is_usable_by_name(monkeypatch):
    monkeypatch.setitem(COST_MODELS._types, "doubled", DoubledRoofline)
    plain, doubled = build_setup(tiny()), build_setup(tiny('costs.model="doubled"'))
    assert type(doubled.cost_model) is DoubledRoofline
    args = (np.array([2, 1]), np.array([100, 300]), np.full(48, 16.0))
    assert doubled.cost_model.verify_pass(*args).total_s == pytest.approx(
        2 * plain.cost_model.verify_pass(*args).total_s
    )
    slow = simulate(tiny('costs.model="doubled"'))["policies"]
    fast = simulate(tiny())["policies"]
    assert all(s["tpot_ms"] > 1.5 * f["tpot_ms"] for s, f in zip(slow, fast, strict=True))
