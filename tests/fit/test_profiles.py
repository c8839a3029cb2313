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
