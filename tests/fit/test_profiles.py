"""The profile a fit writes: it loads through the profile parser and reproduces the measurements."""

from __future__ import annotations

import pytest

from simspec import catalog
from simspec.calibrate import analytic_profile
from simspec.config.load import with_overrides
from simspec.fit import (
    MeasurementRow,
    Measurements,
    fit_measurements,
    fitted_profile,
)
from simspec.fit.serving import FitSettings, row_scenario, simulate_row
from simspec.params import RooflineParams
from simspec.profile import load_profile, profile_json
from tests.helpers import tiny

SETTINGS = FitSettings(min_requests=2)
TRUTH = {"pass_overhead_s": 1.3e-3, "moe_efficiency_max": 0.6}
POINTS = ((1, 0, None), (8, 0, None), (4, 2, 2.2))


def _measure(scenario):
    rows = []
    for n, (batch, k, al) in enumerate(POINTS, 1):
        row = MeasurementRow(batch, "tpot_ms", 1.0, 64, 12, k, al, where=f"row {n}")
        value = simulate_row(row_scenario(scenario, row, "-", SETTINGS), row, TRUTH).predicted
        rows.append(MeasurementRow(batch, "tpot_ms", value, 64, 12, k, al, where=f"row {n}"))
    return Measurements(tuple(rows), "bench.csv", "ab" * 32)


@pytest.fixture(scope="module")
def fitted():
    scenario = tiny()
    measurements = _measure(scenario)
    result = fit_measurements(
        scenario, measurements.rows, list(TRUTH), source="bench.csv", settings=SETTINGS
    )
    data = fitted_profile(scenario, measurements, result, date="2026-12-01", command="test")
    return scenario, measurements, result, data


def test_the_profile_records_the_fit(fitted):
    scenario, _, _, data = fitted
    meta = data["metadata"]
    assert meta["kind"] == "fitted" and meta["gpu"] == scenario.hardware.gpu
    assert meta["measurements"] == {"file": "bench.csv", "sha256": "ab" * 32, "rows": 3}
    assert meta["scenario"]["digest"] == scenario.digest()
    assert data["fitted"]["pass_overhead_s"] == pytest.approx(TRUTH["pass_overhead_s"], rel=1e-4)
    assert data["fitted"]["kv_efficiency"] == RooflineParams().kv_efficiency
    assert data["provenance"]["pass_overhead_s"].startswith("fitted to 3 serving measurements")
    assert data["provenance"]["kv_efficiency"].startswith("assumed: ")
    details = data["fit_details"]
    assert list(details["params"]) == list(TRUTH)
    assert details["params"]["moe_efficiency_max"]["lower"] == 0.002
    assert [r["row"] for r in details["rows"]] == ["row 1", "row 2", "row 3"]
    assert all(abs(r["log_residual"]) < 1e-5 for r in details["rows"])


def test_a_scenario_naming_the_profile_reproduces_the_measurements(fitted, tmp_path):
    scenario, measurements, _, data = fitted
    path = tmp_path / "fitted.json"
    path.write_text(profile_json(data), encoding="utf-8")
    profile = load_profile(path)
    assert profile.kind == "fitted"
    calibrated = with_overrides(scenario, {"costs.profile": str(path)})
    assert calibrated.roofline.pass_overhead_s == data["fitted"]["pass_overhead_s"]
    for row in measurements.rows:
        again = simulate_row(row_scenario(calibrated, row, "-", SETTINGS), row, {}).predicted
        assert again == pytest.approx(row.value, rel=1e-5), row.where


def test_a_base_profile_and_explicit_costs_keep_their_provenance(fitted, tmp_path):
    scenario, measurements, result, _ = fitted
    base = analytic_profile(catalog.get_gpu(scenario.hardware.gpu))
    path = tmp_path / "base.json"
    path.write_text(profile_json(base), encoding="utf-8")
    based = with_overrides(scenario, {"costs.profile": str(path), "costs.kv_efficiency": 0.4})
    data = fitted_profile(based, measurements, result)
    assert data["peak"] == base["peak"]
    assert data["metadata"]["scenario"]["profile"] == str(path)
    assert data["provenance"]["compute_efficiency"].startswith(f"from {path}: assumed")
    assert data["provenance"]["kv_efficiency"].startswith("set in the scenario's [costs]")


# -- fit -> profile -> run under an engine preset -----------------------------------------------

PRESET_TRUTH = {"pass_overhead_s": 0.9e-3, "draft_step_overhead_s": 2.0e-4}


@pytest.fixture(scope="module")
def under_preset():
    """A fit under the sglang preset of rows made with overheads unlike the preset's."""
    scenario = with_overrides(tiny(), {"engine.preset": "sglang"})
    measurements = _measure_with(scenario, PRESET_TRUTH)
    result = fit_measurements(
        scenario, measurements.rows, list(PRESET_TRUTH), source="bench.csv", settings=SETTINGS
    )
    return scenario, measurements, result, fitted_profile(scenario, measurements, result)


def _measure_with(scenario, truth):
    rows = []
    for n, (batch, k, al) in enumerate(POINTS, 1):
        row = MeasurementRow(batch, "tpot_ms", 1.0, 64, 12, k, al, where=f"row {n}")
        value = simulate_row(row_scenario(scenario, row, "-", SETTINGS), row, truth).predicted
        rows.append(MeasurementRow(batch, "tpot_ms", value, 64, 12, k, al, where=f"row {n}"))
    return Measurements(tuple(rows), "bench.csv", "ab" * 32)


def test_a_fit_under_a_preset_identifies_the_draft_step_overhead(under_preset):
    # the preset's draft_step_overhead_s is 0: the Jacobian's step must not vanish there
    _, _, result, _ = under_preset
    assert catalog.get_engine("sglang").overrides().get("draft_step_overhead_s", 0.0) == 0.0
    assert not any("not identifiable" in w for w in result.warnings), result.warnings
    for name, truth in PRESET_TRUTH.items():
        assert result.values[name] == pytest.approx(truth, rel=1e-3), name


def test_a_profile_fitted_under_a_preset_reproduces_its_predictions_under_it(
    under_preset, tmp_path
):
    scenario, _, result, data = under_preset
    path = tmp_path / "fitted.json"
    path.write_text(profile_json(data), encoding="utf-8")
    assert load_profile(path).serving_fit == tuple(PRESET_TRUTH)
    assert load_profile(path).engine_preset == "sglang"
    run = with_overrides(scenario, {"costs.profile": str(path)})
    preset = catalog.get_engine("sglang").overrides()
    for name in PRESET_TRUTH:  # the fitted value, not the preset's
        assert getattr(run.roofline, name) == result.values[name] != preset.get(name)
    for key, value in preset.items():  # the preset's other keys still apply
        if key not in PRESET_TRUTH:
            assert getattr(run.roofline, key) == value, key
    for fit in result.rows:
        again = simulate_row(row_scenario(run, fit.row, "-", SETTINGS), fit.row, {}).predicted
        assert again == pytest.approx(fit.predicted, rel=1e-9), fit.row.where


def test_scenario_costs_outrank_a_fitted_profile(under_preset, tmp_path):
    scenario, _, _, data = under_preset
    path = tmp_path / "fitted.json"
    path.write_text(profile_json(data), encoding="utf-8")
    run = with_overrides(scenario, {"costs.profile": str(path), "costs.pass_overhead_s": 0.002})
    assert run.roofline.pass_overhead_s == 0.002


def test_a_measured_profile_is_outranked_by_the_preset(tmp_path):
    base = analytic_profile(catalog.get_gpu(tiny().hardware.gpu))
    path = tmp_path / "base.json"
    path.write_text(profile_json(base), encoding="utf-8")
    assert load_profile(path).serving_fit == ()
    run = with_overrides(tiny(), {"costs.profile": str(path), "engine.preset": "sglang"})
    for key, value in catalog.get_engine("sglang").overrides().items():
        assert getattr(run.roofline, key) == value, key


def test_a_draft_step_overhead_fitted_to_zero_is_at_its_bound_not_unidentifiable():
    # rows made with no draft-step overhead: the fit ends on the bound 0, where a step relative
    # to the value itself would vanish and every row would look independent of the parameter
    scenario = with_overrides(tiny(), {"engine.preset": "sglang"})
    truth = {"pass_overhead_s": 0.9e-3, "draft_step_overhead_s": 0.0}
    measurements = _measure_with(scenario, truth)
    result = fit_measurements(
        scenario, measurements.rows, list(truth), source="bench.csv", settings=SETTINGS
    )
    assert not any("not identifiable" in w for w in result.warnings), result.warnings
    assert result.values["draft_step_overhead_s"] < 1e-7
    assert result.values["pass_overhead_s"] == pytest.approx(0.9e-3, rel=1e-3)


def test_the_example_measurements_under_the_sglang_preset_identify_every_parameter():
    from simspec.config.load import load_scenario
    from simspec.fit import read_measurements

    scenario = load_scenario("scenarios/qwen3-30b-h100-batch32.toml", ['engine.preset="sglang"'])
    measurements = read_measurements("calibration/measurements-example.csv")
    result = fit_measurements(scenario, measurements.rows, source="example")
    assert "draft_step_overhead_s" in result.names
    assert not any("not identifiable" in w for w in result.warnings), result.warnings
    assert all(result.uncertainty[name] is not None for name in result.names)
