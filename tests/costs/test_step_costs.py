"""Decode steps priced together (:func:`simspec.costs.batch.step_costs`) cost what each costs
priced alone, for every cost model and split: the deferred schedule relies on it."""

from __future__ import annotations

import numpy as np
import pytest

from simspec import catalog
from simspec.calibrate import analytic_profile
from simspec.costs.batch import draft_phase_s, step_costs
from simspec.costs.calibrated import CalibratedCostModel
from simspec.costs.roofline import RooflineCostModel
from simspec.params import RooflineParams
from simspec.profile import profile_from_dict

H100 = catalog.get_gpu("h100-sxm")
QWEN = catalog.get_model("qwen3-30b-a3b")
DRAFTER = catalog.get_drafter("eagle3-qwen3-30b-a3b")
ENGINE = RooflineParams(verify_overhead_s=2e-3, draft_extend_passes=1.0)


def _models():
    profile = profile_from_dict(analytic_profile(H100, model=QWEN), "synthetic.json")
    return {
        "roofline": RooflineCostModel(target=QWEN, drafter=DRAFTER, gpu=H100),
        "roofline tp4 + engine": RooflineCostModel(
            target=QWEN, drafter=DRAFTER, gpu=H100, params=ENGINE, num_gpus=4
        ),
        "dense draft model": RooflineCostModel(
            target=QWEN,
            drafter=catalog.get_drafter("qwen3-0.6b-draft"),
            gpu=H100,
            draft_model=catalog.get_model("qwen3-0.6b"),
        ),
        "calibrated": CalibratedCostModel(
            target=QWEN, drafter=DRAFTER, gpu=H100, profile=profile, params=ENGINE
        ),
    }


@pytest.mark.parametrize("name", list(_models()))
@pytest.mark.parametrize("batch", [1, 5])
def test_steps_priced_together_cost_what_each_costs_alone(name: str, batch: int) -> None:
    model = _models()[name]
    rng = np.random.default_rng(batch)
    n = 40
    ks = rng.integers(0, 6, size=(n, batch))
    ks[0] = 0  # a step where nobody drafts
    ctx = rng.integers(10, 5000, size=(n, batch))
    committed = rng.integers(1, 7, size=(n, batch))
    layers = QWEN.shape.num_moe_layers
    unique = rng.uniform(8, QWEN.shape.num_experts, size=(n, layers))
    costs = step_costs(model, ks + 1, ctx, unique, ks, committed)
    for p in range(n):
        assert costs.draft_s[p] == draft_phase_s(model, ctx[p], ks[p])
        assert costs.verify(p) == model.verify_pass(ks[p] + 1, ctx[p], unique[p])
        extra = model.speculation_overhead_s(committed[p], ctx[p])
        assert costs.speculation_overhead_s[p] == extra
        assert costs.verify_s[p] == costs.verify(p).total_s
    assert costs.draft_s[0] == 0.0
    assert (costs.draft_s[ks.max(axis=1) > 0] > 0).all()
