"""Fitting cost parameters to serving measurements: recovery of known parameters, diagnostics.

The measurements here are synthetic: every row is simulated with KNOWN cost parameters that
differ from the defaults, and the fit, started from the defaults, must find them again.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from simspec.config.load import load_scenario
from simspec.errors import InputError
from simspec.fit.measurements import MeasurementRow
from simspec.fit.serving import (
    ALPHA_MAX,
    FitSettings,
    alpha_for_acceptance_length,
    default_fit_params,
    fit_measurements,
    fittable_params,
    row_overrides,
    row_scenario,
    simulate_row,
)
from simspec.params import RooflineParams
from tests.helpers import tiny

#: Known parameters of the default (launch) MoE kernel form, away from the defaults.
TRUTH = {
    "pass_overhead_s": 1.7e-3,
    "moe_bandwidth_efficiency": 0.55,
    "draft_step_overhead_s": 2.5e-4,
}
FAST = FitSettings(min_requests=2)


def _row(batch, k=0, al=None, quantity="tpot_ms", prompt=64, output=12, n=1):
    return MeasurementRow(
        batch=batch,
        quantity=quantity,
        value=1.0,
        prompt_tokens=prompt,
        output_tokens=output,
        draft_tokens=k,
        acceptance_length=al,
        where=f"row {n}",
    )


def synthetic(scenario, specs, truth, settings, noise=None):
    """Rows whose values are the simulator's own predictions with ``truth`` (times 1 + noise)."""
    rows = []
    for n, spec in enumerate(specs):
        row = dataclasses.replace(spec, where=f"row {n + 1}")
        value = simulate_row(row_scenario(scenario, row, "-", settings), row, truth).predicted
        factor = 1.0 + (noise[n] if noise is not None else 0.0)
        rows.append(dataclasses.replace(row, value=value * factor))
    return rows


# -- pieces -----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.62, 0.9])
def test_alpha_inverts_the_expected_tokens_per_verify(alpha, k):
    expected_tokens = sum(alpha**j for j in range(k + 1))  # (1 - a^(k+1)) / (1 - a)
    assert alpha_for_acceptance_length(expected_tokens, k) == pytest.approx(alpha, abs=1e-9)


def test_alpha_rejects_an_acceptance_length_outside_one_to_k_plus_one():
    with pytest.raises(ValueError):
        alpha_for_acceptance_length(4.5, 3)
    with pytest.raises(ValueError):
        alpha_for_acceptance_length(0.9, 3)
    assert alpha_for_acceptance_length(4.0, 3) == pytest.approx(1.0, abs=1e-9)


def test_fittable_params_are_the_float_cost_parameters_with_their_bounds():
    found = fittable_params()
    fields = {f.name: f for f in dataclasses.fields(RooflineParams)}
    assert {"pass_overhead_s", "draft_step_overhead_s", "moe_efficiency_max"} <= set(found)
    assert "moe_kernel" not in found  # a choice of form, not a number to fit
    assert found["moe_efficiency_max"] == (0.002, 1.0)
    low, high = found["pass_overhead_s"]
    assert low == 0.0 and 0.99 < high < 1.0  # lt = 1: strictly inside
    for name, (low, high) in found.items():
        default = fields[name].default
        assert isinstance(default, float) and low <= default <= high, name


def test_default_params_follow_the_model_and_the_rows():
    moe = tiny()  # the default MoE kernel form, launch: its bandwidth efficiency
    assert default_fit_params(moe, [_row(1)]) == ("pass_overhead_s", "moe_bandwidth_efficiency")
    saturation = tiny("costs.moe_kernel=saturation")  # the occupancy curve's plateau
    assert default_fit_params(saturation, [_row(1)]) == ("pass_overhead_s", "moe_efficiency_max")
    assert default_fit_params(moe, [_row(1), _row(4, 3, 2.5)])[-1] == "draft_step_overhead_s"
    dense = load_scenario("scenarios/dense-sanity-qwen3-8b.toml")
    assert default_fit_params(dense, [_row(1)]) == ("pass_overhead_s", "weight_efficiency")


def test_per_token_rows_are_shortened_around_the_same_mean_context():
    settings = FitSettings(output_cap_tokens=256)
    tpot = row_overrides(_row(8, prompt=1000, output=1256), settings)
    assert tpot["workload.output_tokens"] == 256
    assert tpot["workload.prompt_tokens"] == 1000 + 500  # mean context 1000 + 1256/2 is kept
    assert tpot["workload.num_requests"] == 8 and tpot["workload.concurrency"] == 8
    throughput = row_overrides(_row(8, quantity="tokens_per_s", output=1256), settings)
    assert throughput["workload.output_tokens"] == 1256  # whole-run quantities are not cut
    spec = row_overrides(_row(1, 3, 4.0), settings)
    assert spec["acceptance"] == {"process": "iid", "alpha": ALPHA_MAX}
    assert spec["policies"] == [{"name": "fixed", "draft_tokens": 3}]
    assert row_overrides(_row(1), settings)["workload.num_requests"] == settings.min_requests


def test_one_more_ms_of_pass_overhead_is_one_more_ms_of_batch_one_tpot():
    # Plain decoding at batch 1: every output token after the first is one pass.
    scenario, row = tiny(), _row(1)
    prepared = row_scenario(scenario, row, "-", FAST)
    base = simulate_row(prepared, row, {"pass_overhead_s": 1e-3}).predicted
    more = simulate_row(prepared, row, {"pass_overhead_s": 2e-3}).predicted
    assert more - base == pytest.approx(1.0, rel=1e-9)


def test_derived_quantities_follow_their_definitions():
    scenario = tiny()
    values = {}
    for quantity in ("tpot_ms", "itl_ms", "tokens_per_s_per_user"):
        row = _row(4, 3, 2.5, quantity=quantity)
        fit = simulate_row(row_scenario(scenario, row, "-", FAST), row, {})
        values[quantity] = (fit.predicted, fit.simulated_acceptance_length)
    tpot, acceptance = values["tpot_ms"]
    assert 1 < acceptance < 4
    assert values["itl_ms"][0] == pytest.approx(tpot * acceptance)  # one chunk per iteration
    assert values["tokens_per_s_per_user"][0] == pytest.approx(1000 / tpot)


def test_rows_the_scenario_cannot_simulate_are_named():
    scenario = tiny()
    with pytest.raises(InputError, match=r"m\.csv: row 1, draft_tokens: expected at most"):
        row_scenario(scenario, _row(1, 9, 3.0), "m.csv", FAST)
    with pytest.raises(InputError, match=r"m\.csv: row 1: expected a row the scenario"):
        row_scenario(scenario, _row(4096, prompt=100_000, output=100_000), "m.csv", FAST)
    with pytest.raises(InputError, match="--params"):
        fit_measurements(scenario, [_row(1)], ["pass_overhead_s", "moe_kernel"])


# -- the fit ------------------------------------------------------------------------------------

SPECS = [_row(1), _row(8), _row(1, 3, 2.8), _row(8, 3, 2.4)]


def test_fit_recovers_known_parameters_from_the_defaults():
    scenario = tiny()
    rows = synthetic(scenario, SPECS, TRUTH, FAST)
    result = fit_measurements(scenario, rows, source="synthetic.csv", settings=FAST)
    assert result.names == tuple(TRUTH)
    assert result.start == {
        name: getattr(RooflineParams(), name) for name in TRUTH
    }  # started from the defaults
    for name, truth in TRUTH.items():
        assert result.values[name] == pytest.approx(truth, rel=1e-4), name
        assert getattr(result.params, name) == result.values[name]
    assert result.params.kv_efficiency == RooflineParams().kv_efficiency  # not fitted: kept
    assert max(abs(r.residual) for r in result.rows) < 1e-5
    assert result.warnings == ()
    for name, sigma in result.uncertainty.items():  # zero noise: tiny uncertainty
        assert sigma is not None and sigma < 1e-3 * TRUTH[name], name


def test_pass_overhead_and_weight_efficiency_cannot_be_told_apart_by_decode_rows():
    # Both add the same time to every memory-bound decode pass: J has two parallel columns.
    scenario = tiny()
    rows = synthetic(scenario, [_row(1), _row(4), _row(8)], {"pass_overhead_s": 1.5e-3}, FAST)
    result = fit_measurements(
        scenario, rows, ["pass_overhead_s", "weight_efficiency"], settings=FAST
    )
    (warning,) = [w for w in result.warnings if "cannot tell" in w]
    assert "pass_overhead_s and weight_efficiency" in warning
    assert result.uncertainty == {"pass_overhead_s": None, "weight_efficiency": None}


def test_a_parameter_no_row_depends_on_is_reported():
    scenario = tiny()
    rows = synthetic(scenario, [_row(1), _row(8)], {}, FAST)
    result = fit_measurements(
        scenario, rows, ["pass_overhead_s", "draft_step_overhead_s"], settings=FAST
    )
    assert any("draft_step_overhead_s is not identifiable" in w for w in result.warnings)
    assert any("2 rows for 2 parameters" in w for w in result.warnings)


def test_fit_with_noise_on_the_default_scenario_is_unbiased_within_its_uncertainty():
    scenario = load_scenario()
    settings = FitSettings(output_cap_tokens=64)
    specs = [
        _row(1, prompt=512, output=256),
        _row(8, prompt=512, output=256),
        _row(32, prompt=512, output=256),
        _row(64, quantity="tokens_per_s", prompt=512, output=128),
        _row(1, 3, 2.8, prompt=512, output=256),
        _row(32, 3, 2.5, quantity="itl_ms", prompt=512, output=256),
    ]
    noise = np.array([0.01, -0.01, 0.005, -0.005, 0.008, -0.008])
    rows = synthetic(scenario, specs, TRUTH, settings, noise=noise)
    result = fit_measurements(scenario, rows, settings=settings)
    residuals = np.array([r.residual for r in result.rows])
    assert abs(residuals.mean()) < 0.5 * math.sqrt(np.mean(residuals**2)) + 1e-3
    assert np.sqrt(np.mean(residuals**2)) < 0.01  # no worse than the noise put in
    for name, truth in TRUTH.items():
        sigma = result.uncertainty[name]
        assert sigma is not None
        assert abs(result.values[name] - truth) < 4 * sigma + 0.02 * truth, name


@pytest.mark.parametrize(
    "overrides",
    [(), ('acceptance.process="bursty"', "speculation.topk=2", 'offload.experts="host_pinned"')],
)
def test_a_reused_reference_set_predicts_what_a_fresh_one_does(overrides):
    """The fit draws each row's text once and reuses it in every evaluation: a reference set
    already read by runs at other cost values predicts, to the bit, what a fresh setup does."""
    from simspec.sim.setup import build_setup

    scenario = tiny(*overrides)
    row = _row(2, k=3, al=2.4, output=16)
    prepared = row_scenario(scenario, row, "-", FAST)
    text = build_setup(prepared).references
    for values in ({"pass_overhead_s": 3e-3}, {"draft_step_overhead_s": 1e-3}, TRUTH):
        simulate_row(prepared, row, values, text)
    for values in ({"pass_overhead_s": 1e-4}, TRUTH):
        reused = simulate_row(prepared, row, values, text)
        fresh = simulate_row(prepared, row, values)
        assert reused == fresh
        assert reused.predicted == fresh.predicted  # the same floats, not merely close
