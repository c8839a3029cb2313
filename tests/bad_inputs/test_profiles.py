"""Bad calibration profiles (issue 13, 8): unknown keys, absurd peaks, foreign devices.

A profile is checked as strictly as a scenario: an unknown top-level key, a peak outside a
plausible range, or a profile measured on another device than the scenario's GPU (another
catalog GPU, or a CPU test run) is rejected with exit 2 unless ``costs.allow_foreign_profile``
says it is meant.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simspec.cli import main

from .rejects import assert_rejected, scenario, write_scenario

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "calibration" / "h100-sxm-analytic.json"
H200 = ROOT / "calibration" / "h200-analytic.json"


def _profile(folder: Path, edit, name: str = "profile.json") -> Path:
    data = json.loads(H100.read_text(encoding="utf-8"))
    edit(data)
    path = folder / name
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def _set(path: tuple[str, ...], value):
    def edit(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


#: id -> (edit of the H100 profile, key path in the profile, fragment of "expected ...")
BAD_PROFILES = {
    "unknown top-level key": (_set(("fitted_values",), {}), "fitted_values", "one of the keys"),
    "misspelt top-level key": (_set(("tabels",), {}), "tabels", "one of the keys"),
    "peak bandwidth 1e-300": (
        _set(("peak", "hbm_bytes_per_s"), 1e-300),
        "peak.hbm_bytes_per_s",
        "in [1e+06, 1e+15]",
    ),
    "peak bandwidth 1e300": (
        _set(("peak", "hbm_bytes_per_s"), 1e300),
        "peak.hbm_bytes_per_s",
        "in [1e+06, 1e+15]",
    ),
    "peak flops 1e-300": (
        _set(("peak", "bf16_flops_per_s"), 1e-300),
        "peak.bf16_flops_per_s",
        "in [1e+06, 1e+18]",
    ),
    "fitted efficiency 5e-324": (
        _set(("fitted", "kv_efficiency"), 5e-324),
        "fitted.kv_efficiency",
        ">= 0.002",
    ),
    "fitted overhead 1e308": (
        _set(("fitted", "pass_overhead_s"), 1e308),
        "fitted.pass_overhead_s",
        "< 1",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PROFILES), ids=sorted(BAD_PROFILES))
def test_bad_profile_is_rejected_naming_the_profile_and_key(tmp_path, capsys, case):
    edit, key, expected = BAD_PROFILES[case]
    profile = _profile(tmp_path, edit)
    path = write_scenario(tmp_path, scenario({"costs.profile": profile.name}))
    argv = ["run", str(path), "--json", str(tmp_path / "out.json")]
    assert_rejected(capsys, argv, tmp_path, [str(profile), f"{key}: expected", expected])


def _cpu_profile(data):
    data["metadata"].update(device="cpu", gpu="", shapes="tiny")


FOREIGN = {
    "cpu profile on h100": (_cpu_profile, "'cpu', not a catalog GPU"),
    "h200 profile on h100": (None, "'h200'"),
}


@pytest.mark.parametrize("case", sorted(FOREIGN), ids=sorted(FOREIGN))
@pytest.mark.parametrize("command", ["run", "validate"])
def test_profile_from_another_device_is_refused(tmp_path, capsys, case, command):
    edit, found = FOREIGN[case]
    if edit is None:
        profile = tmp_path / "h200.json"
        profile.write_bytes(H200.read_bytes())
    else:
        profile = _profile(tmp_path, edit, "cpu.json")
    path = write_scenario(tmp_path, scenario({"costs.profile": profile.name}))
    argv = [command, str(path)] + (["--json", str(tmp_path / "o")] if command == "run" else [])
    assert_rejected(
        capsys,
        argv,
        tmp_path,
        [str(path), "costs.profile: expected", "'h100-sxm'", "allow_foreign_profile", found],
    )


def test_a_foreign_profile_is_used_when_allowed(tmp_path, capsys):
    profile = _profile(tmp_path, _cpu_profile, "cpu.json")
    edits = {"costs.profile": profile.name, "costs.allow_foreign_profile": True}
    path = write_scenario(tmp_path, scenario(edits))
    assert main(["validate", str(path)]) == 0
    assert "ok" in capsys.readouterr().out


def test_allow_foreign_profile_must_be_a_boolean(tmp_path, capsys):
    path = write_scenario(tmp_path, scenario({"costs.allow_foreign_profile": "yes"}))
    assert_rejected(
        capsys, ["validate", str(path)], tmp_path, [str(path), "costs.allow_foreign_profile"]
    )


MEASURED = ROOT / "calibration" / "h200-qwen3-30b-a3b.json"


@pytest.mark.parametrize(
    ("table", "index"),
    [("moe", (0, 0)), ("attention", (0, 0, 1))],
    ids=["moe cell", "attention cell"],
)
def test_a_measured_cell_of_1e300_seconds_is_refused(tmp_path, capsys, table, index):
    """A table cell is one kernel's or pass's measured time: 1e300 s ran as a plausible-looking
    calibrated profile (exit 0). The message names the cell."""
    data = json.loads(MEASURED.read_text(encoding="utf-8"))
    node = data["tables"][table]["time_s"]
    for i in index[:-1]:
        node = node[i]
    node[index[-1]] = 1e300
    (tmp_path / "p.json").write_text(json.dumps(data), encoding="utf-8")
    edits = {"hardware.gpu": "h200", "costs.model": "calibrated", "costs.profile": "p.json"}
    path = write_scenario(tmp_path, scenario(edits))
    where = f"tables.{table}.time_s" + "".join(f"[{i}]" for i in index)
    assert_rejected(capsys, ["run", str(path)], tmp_path, ["p.json", where, "at most 10 s"])
