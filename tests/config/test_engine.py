"""[engine] preset: catalog presets, their precedence, resolved values, digests, engine charges."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simspec import catalog
from simspec.config.load import load_scenario, with_overrides
from simspec.errors import ScenarioError
from simspec.params import RooflineParams
from simspec.params.presets import PRESET_KEYS, EnginePreset
from simspec.physics.launches import VERIFY_KERNELS
from simspec.policies import FixedPolicy
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup

SMALL = {
    "workload.length_jitter": 0.0,  # every request as long as the others: exact bounds
    "workload.num_requests": 4,
    "workload.concurrency": 2,
    "workload.loop": "closed",
    "workload.prompt_tokens": 64,
    "workload.output_tokens": 24,
}


def test_catalog_has_the_four_presets_and_ideal_sets_nothing():
    assert {"ideal", "sglang", "vllm", "trtllm"} <= set(catalog.engine_names())
    assert catalog.get_engine("ideal").overrides() == {}


@pytest.mark.parametrize("name", ["sglang", "vllm", "trtllm"])
def test_fitted_presets_set_only_overheads_within_bounds(name):
    values = catalog.get_engine(name).overrides()
    assert values and set(values) <= set(PRESET_KEYS)
    RooflineParams(**values)  # inside RooflineParams' bounds (it would raise otherwise)
    assert set(PRESET_KEYS) <= {f.name for f in dataclasses.fields(RooflineParams)}


def test_default_scenario_is_ideal_and_keeps_the_built_in_params():
    s = load_scenario()
    assert s.engine.preset == "ideal"
    assert s.roofline == RooflineParams()


def test_preset_values_resolve_and_show_in_to_dict_and_digest():
    ideal = load_scenario()
    sglang = with_overrides(ideal, {"engine.preset": "sglang"})
    preset = catalog.get_engine("sglang").overrides()
    for key, value in preset.items():
        assert getattr(sglang.roofline, key) == value
        assert sglang.to_dict()["costs"][key] == value
    assert sglang.to_dict()["engine"]["preset"] == "sglang"
    assert sglang.digest() != ideal.digest()
    # Keys the preset leaves out keep the built-in default.
    assert sglang.roofline.weight_efficiency == RooflineParams().weight_efficiency


def test_scenario_costs_outrank_the_preset():
    s = load_scenario(overrides={"engine.preset": "sglang", "costs.pass_overhead_s": 1.5e-3})
    assert s.roofline.pass_overhead_s == 1.5e-3
    assert s.to_data()["costs"]["pass_overhead_s"] == 1.5e-3


def test_unknown_preset_names_the_key():
    with pytest.raises(ScenarioError) as err:
        load_scenario(overrides={"engine.preset": "tgi"})
    assert err.value.key_path == "engine.preset"
    assert "sglang" in str(err.value)


def test_preset_catalog_entry_is_checked_like_a_scenario():
    from simspec.schema import build

    with pytest.raises(ScenarioError) as err:
        build(EnginePreset, {"name": "x", "pass_overhead_s": -1.0}, source="x.toml")
    assert err.value.key_path == "pass_overhead_s"


def _log(overrides: dict[str, object], k: int):
    s = load_scenario(overrides={**SMALL, **overrides})
    return run_policy(build_setup(s), FixedPolicy(draft_tokens=k))


def test_engine_charges_verify_bookkeeping_once_per_speculative_step():
    extra = 2e-3
    plain = _log({}, 2)
    charged = _log({"costs.verify_overhead_s": extra}, 2)
    spec_steps = [st for st in charged.steps if st.drafted]
    floors = VERIFY_KERNELS * catalog.get_gpu("h100-sxm").kernel_floor_graph_s
    assert spec_steps and all(
        st.speculation_overhead_s == pytest.approx(extra + floors) for st in spec_steps
    )
    assert all(st.speculation_overhead_s == pytest.approx(floors) for st in plain.steps)
    end = max(r.finish_s for r in charged.requests)
    assert end - max(r.finish_s for r in plain.requests) == pytest.approx(
        extra * len(spec_steps), rel=1e-9
    )


def test_plain_decoding_pays_no_speculation_overhead():
    plain = _log({}, 0)
    charged = _log({"costs.verify_overhead_s": 2e-3, "costs.draft_extend_passes": 1.0}, 0)
    assert [st.verify.total_s for st in plain.steps] == [st.verify.total_s for st in charged.steps]
    assert max(r.finish_s for r in plain.requests) == max(r.finish_s for r in charged.requests)


def test_draft_extend_prices_the_committed_tokens():
    log = _log({"costs.draft_extend_passes": 1.0}, 3)
    s = load_scenario(overrides={**SMALL, "costs.draft_extend_passes": 1.0})
    costs = build_setup(s).cost_model
    first = next(st for st in log.steps if st.drafted)
    # The extend covers between 1 and k + 1 tokens per request: bounded by those two prices.
    ctx = np.full(first.batch_size, 64 + 1)
    low = costs.speculation_overhead_s(np.ones(first.batch_size, dtype=int), ctx)
    high = costs.speculation_overhead_s(np.full(first.batch_size, 4), ctx)
    assert low <= first.speculation_overhead_s <= high
