"""Verify bookkeeping per extra tensor-parallel rank (verify_overhead_per_tp_s) in closed form.

A speculative iteration split over t tensor-parallel ranks pays
verify_overhead_s + verify_overhead_per_tp_s·(t − 1) of bookkeeping on top of its draft extend;
at the default 0 every iteration costs exactly what it did before the key existed.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simspec import catalog
from simspec.calibrate import analytic_profile
from simspec.config.load import load_scenario
from simspec.costs.calibrated import CalibratedCostModel
from simspec.costs.roofline import RooflineCostModel
from simspec.errors import ScenarioError
from simspec.params import PROFILE_OPTIONAL_KEYS, RooflineParams
from simspec.params.presets import PRESET_KEYS, EnginePreset
from simspec.policies import FixedPolicy
from simspec.profile import profile_from_dict
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup

H100 = catalog.get_gpu("h100-sxm")
QWEN = catalog.get_model("qwen3-30b-a3b")
DRAFTER = catalog.get_drafter("eagle3-qwen3-30b-a3b")
CTX = np.array([100, 200, 300])
ACCEPTED = np.array([1, 3, 2])


def _model(gpus: int, **params: float) -> RooflineCostModel:
    p = RooflineParams(verify_overhead_s=2e-3, draft_extend_passes=1.0, **params)
    return RooflineCostModel(target=QWEN, drafter=DRAFTER, gpu=H100, params=p, num_gpus=gpus)


def test_default_is_zero_and_every_iteration_is_bit_identical():
    assert RooflineParams().verify_overhead_per_tp_s == 0.0
    for gpus in (1, 2, 4, 8):
        unset = _model(gpus)
        zero = _model(gpus, verify_overhead_per_tp_s=0.0)
        assert zero.speculation_overhead_s(ACCEPTED, CTX) == unset.speculation_overhead_s(
            ACCEPTED, CTX
        )


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_adds_exactly_x_times_extra_ranks_per_iteration(gpus):
    x = 1.25e-3
    plain = _model(gpus).speculation_overhead_s(ACCEPTED, CTX)
    more = _model(gpus, verify_overhead_per_tp_s=x).speculation_overhead_s(ACCEPTED, CTX)
    assert more - plain == pytest.approx(x * (gpus - 1), rel=1e-12, abs=0.0)
    if gpus == 1:  # one rank: nothing to synchronise, bit-identical
        assert more == plain


def test_counts_tensor_ranks_not_gpus():
    # 4 GPUs with tensor_parallel = 2: the term counts t = 2 tensor ranks, not the 4 GPUs.
    x = 1e-3
    base = _model(4)
    split = dataclasses.replace(base, tensor_parallel=2)
    more = dataclasses.replace(
        split, params=dataclasses.replace(split.params, verify_overhead_per_tp_s=x)
    )
    extra = more.speculation_overhead_s(ACCEPTED, CTX) - split.speculation_overhead_s(ACCEPTED, CTX)
    assert extra == pytest.approx(x, rel=1e-12)


def test_calibrated_model_charges_the_same_term():
    profile = profile_from_dict(analytic_profile(H100, model=QWEN), "synthetic.json")
    x = 7e-4
    for gpus in (1, 4):
        params = dataclasses.replace(_model(gpus).params, verify_overhead_per_tp_s=x)
        cal = CalibratedCostModel(
            target=QWEN, drafter=DRAFTER, gpu=H100, profile=profile, params=params, num_gpus=gpus
        )
        roof = RooflineCostModel(
            target=QWEN, drafter=DRAFTER, gpu=H100, params=params, num_gpus=gpus
        )
        assert cal.speculation_overhead_s(ACCEPTED, CTX) == roof.speculation_overhead_s(
            ACCEPTED, CTX
        )


SMALL = {
    "workload.num_requests": 4,
    "workload.concurrency": 2,
    "workload.loop": "closed",
    "workload.prompt_tokens": 64,
    "workload.output_tokens": 24,
    "hardware.num_gpus": 4,
}


def _log(overrides: dict[str, object], k: int):
    s = load_scenario(overrides={**SMALL, **overrides})
    return run_policy(build_setup(s), FixedPolicy(draft_tokens=k))


def test_engine_charges_it_once_per_speculative_iteration_at_tp4():
    x = 5e-4
    plain = _log({}, 2)
    charged = _log({"costs.verify_overhead_per_tp_s": x}, 2)
    spec = [st for st in charged.steps if st.drafted]
    assert spec and all(st.speculation_overhead_s == pytest.approx(3 * x) for st in spec)
    assert all(st.speculation_overhead_s == 0.0 for st in plain.steps)
    end = max(r.finish_s for r in charged.requests)
    assert end - max(r.finish_s for r in plain.requests) == pytest.approx(
        3 * x * len(spec), rel=1e-9
    )
    # Plain decoding (k = 0) never pays it.
    assert max(r.finish_s for r in _log({}, 0).requests) == max(
        r.finish_s for r in _log({"costs.verify_overhead_per_tp_s": x}, 0).requests
    )


def test_key_is_bounded_optional_in_profiles_and_settable_by_presets():
    assert "verify_overhead_per_tp_s" in PROFILE_OPTIONAL_KEYS
    assert "verify_overhead_per_tp_s" in PRESET_KEYS
    preset = EnginePreset(name="x", verify_overhead_per_tp_s=1e-3)
    assert preset.overrides() == {"verify_overhead_per_tp_s": 1e-3}
    with pytest.raises(ScenarioError) as err:
        load_scenario(overrides={"costs.verify_overhead_per_tp_s": -1e-3})
    assert "verify_overhead_per_tp_s" in err.value.key_path
