"""Calibrate from serving numbers: measure (here: simulate) a few points, fit, use the profile.

python examples/fit_profile.py

A real user pastes `vllm bench serve` numbers into a CSV (calibration/measurements-example.csv
shows the format). Here the "measurements" are simulated with known cost parameters, so the
fit can be seen to recover them; the profile it writes then drives a scenario.
"""

import tempfile
from pathlib import Path

import simspec
from simspec.fit import (
    FitSettings,
    MeasurementRow,
    fit_measurements,
    fitted_profile,
    read_measurements,
    row_scenario,
    simulate_row,
)
from simspec.profile import profile_json

# Known values: the overheads and the default (launch) MoE kernel's bandwidth efficiency.
TRUTH = {
    "pass_overhead_s": 1.7e-3,
    "moe_bandwidth_efficiency": 0.55,
    "draft_step_overhead_s": 2.5e-4,
}
POINTS = [(1, 0, ""), (16, 0, ""), (1, 3, "2.8"), (16, 3, "2.5")]  # batch, k, AL
scenario = simspec.load_scenario()
settings = FitSettings()

# 1. "Measure": simulate each point with the known parameters, write the CSV a user would.
lines = ["batch,quantity,value,prompt_tokens,output_tokens,draft_tokens,acceptance_length"]
for batch, k, al in POINTS:
    row = MeasurementRow(batch, "tpot_ms", 1.0, 256, 16, k, float(al) if al else None)
    tpot = simulate_row(row_scenario(scenario, row, "-", settings), row, TRUTH).predicted
    lines.append(f"{batch},tpot_ms,{tpot:.6g},256,16,{k or ''},{al}")

with tempfile.TemporaryDirectory() as folder:
    csv_path = Path(folder) / "measurements.csv"
    csv_path.write_text("\n".join(lines) + "\n")
    measurements = read_measurements(csv_path)

    # 2. Fit, starting from the scenario's (default) parameters.
    result = fit_measurements(scenario, measurements.rows, settings=settings)
    print(f"{len(measurements.rows)} rows; parameter: start -> fitted (truth)")
    for name in result.names:
        start, value = result.start[name], result.values[name]
        print(f"  {name:<22} {start:.4g} -> {value:.4g} ({TRUTH[name]:.4g})")
    print(f"largest |log(predicted / measured)|: {max(abs(r.residual) for r in result.rows):.4f}")

    # 3. The profile: a scenario that names it reproduces the measurements.
    profile_path = Path(folder) / "fitted.json"
    profile_path.write_text(profile_json(fitted_profile(scenario, measurements, result)))
    calibrated = simspec.with_overrides(scenario, {"costs.profile": str(profile_path)})
    for row in measurements.rows:
        again = simulate_row(row_scenario(calibrated, row, "-", settings), row, {}).predicted
        print(
            f"  B={row.batch:<2} k={row.draft_tokens}: measured {row.value:.3f} ms, "
            f"with the profile {again:.3f} ms"
        )
