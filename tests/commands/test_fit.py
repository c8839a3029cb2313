"""`simspec fit` end to end: measurements in, table out, profile written atomically."""

from __future__ import annotations

import json

import pytest

from simspec.cli import COMMANDS, main
from simspec.config.load import load_scenario
from simspec.fit import MeasurementRow
from simspec.fit.serving import FitSettings, row_scenario, simulate_row
from simspec.profile import load_profile

SCENARIO = """
name = "fit-cli"
seed = 3

[model]
target = "qwen3-30b-a3b"

[hardware]
gpu = "h100-sxm"

[acceptance]
process = "iid"
alpha = 0.7

[workload]
concurrency = 2
num_requests = 4
prompt_tokens = 64
output_tokens = 12
"""
TRUTH = {"pass_overhead_s": 1.4e-3, "moe_bandwidth_efficiency": 0.6}  # launch MoE form
HEADER = "batch,quantity,value,prompt_tokens,output_tokens,draft_tokens,acceptance_length"


@pytest.fixture
def inputs(tmp_path):
    """A scenario file and a CSV simulated from it with TRUTH (what `simspec fit` must find)."""
    scenario_path = tmp_path / "scenario.toml"
    scenario_path.write_text(SCENARIO, encoding="utf-8")
    scenario = load_scenario(scenario_path)
    lines = [HEADER]
    for batch, k, al in ((1, 0, None), (8, 0, None), (4, 2, 2.2)):
        row = MeasurementRow(batch, "tpot_ms", 1.0, 64, 12, k, al)
        value = simulate_row(row_scenario(scenario, row, "-", FitSettings()), row, TRUTH)
        lines.append(f"{batch},tpot_ms,{value.predicted!r},64,12,{k or ''},{al or ''}")
    csv_path = tmp_path / "bench.csv"
    csv_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path, scenario_path, csv_path


def test_fit_is_a_command():
    assert "fit" in COMMANDS


def test_fit_prints_the_table_and_writes_a_profile_that_loads(inputs, capsys):
    folder, scenario_path, csv_path = inputs
    out = folder / "profile.json"
    argv = ["fit", str(csv_path), "--scenario", str(scenario_path), "--out", str(out)]
    code = main([*argv, "--params", "pass_overhead_s,moe_bandwidth_efficiency"])
    printed, errors = capsys.readouterr()
    assert code == 0, errors
    assert "fitted 2 parameters to 3 rows" in printed
    assert "pass_overhead_s" in printed and "+- 1 sigma" in printed
    assert printed.count("tpot_ms") == 3 and f"wrote {out}" in printed
    profile = load_profile(out)
    assert profile.kind == "fitted"
    for name, truth in TRUTH.items():
        assert getattr(profile.fitted, name) == pytest.approx(truth, rel=1e-4)
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["metadata"]["command"].startswith("simspec fit ")
    assert data["metadata"]["measurements"]["rows"] == 3
    # atomic: the profile and the inputs, no temporary file left behind
    assert sorted(p.name for p in folder.iterdir()) == [
        "bench.csv",
        "profile.json",
        "scenario.toml",
    ]


def test_fit_warns_about_parameters_the_rows_cannot_identify(inputs, capsys):
    folder, scenario_path, csv_path = inputs
    out = folder / "profile.json"
    argv = ["fit", str(csv_path), "--scenario", str(scenario_path), "--out", str(out)]
    code = main([*argv, "--params", "pass_overhead_s,comm_s_per_layer"])  # one GPU: no collective
    _, errors = capsys.readouterr()
    assert code == 0
    assert "warning: comm_s_per_layer is not identifiable: no row depends on it" in errors


def test_fit_under_a_preset_says_its_values_outrank_the_preset(inputs, capsys):
    from simspec import catalog

    folder, scenario_path, csv_path = inputs
    out = folder / "profile.json"
    argv = ["fit", str(csv_path), "--scenario", str(scenario_path), "--out", str(out)]
    code = main([*argv, "--params", "pass_overhead_s", "--set", 'engine.preset="sglang"'])
    _, errors = capsys.readouterr()
    assert code == 0, errors
    preset = catalog.get_engine("sglang").overrides()["pass_overhead_s"]
    fitted = load_profile(out).fitted.pass_overhead_s
    (note,) = [line for line in errors.splitlines() if line.startswith("note:")]
    assert "outrank the engine preset" in note
    assert f"pass_overhead_s {preset:.4g} -> {fitted:.4g}" in note


def test_running_a_profile_under_another_preset_says_so(inputs, capsys):
    folder, scenario_path, csv_path = inputs
    out = folder / "profile.json"
    argv = ["fit", str(csv_path), "--scenario", str(scenario_path), "--out", str(out)]
    assert main([*argv, "--params", "pass_overhead_s", "--set", 'engine.preset="sglang"']) == 0
    capsys.readouterr()
    run = ["run", str(scenario_path), "--set", f'costs.profile="{out}"']
    assert main([*run, "--set", 'engine.preset="vllm"']) == 0
    assert "was fitted under engine preset 'sglang'" in capsys.readouterr().err
    assert main([*run, "--set", 'engine.preset="sglang"']) == 0
    assert "fitted under" not in capsys.readouterr().err
