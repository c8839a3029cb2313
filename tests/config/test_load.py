"""The one loader: relative paths, overrides as mappings or strings, resolution without I/O."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

import simspec
from simspec.config.load import load_scenario, scenario_from_dict, with_overrides
from simspec.config.scenario import Scenario
from simspec.errors import ScenarioError

ROOT = Path(__file__).resolve().parents[2]
H100_PROFILE = ROOT / "calibration" / "h100-sxm-analytic.json"


def test_profile_path_in_a_file_is_relative_to_the_file(tmp_path, monkeypatch):
    folder = tmp_path / "study"
    folder.mkdir()
    shutil.copy(H100_PROFILE, folder / "gpu.json")
    (folder / "s.toml").write_text('[costs]\nprofile = "gpu.json"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # not the scenario's folder
    s = load_scenario(folder / "s.toml")
    assert s.profile is not None and s.costs.profile == "gpu.json"
    assert Path(s.profile.source).resolve() == (folder / "gpu.json").resolve()
    # A variant keeps resolving the file's own path against the file's folder ...
    assert with_overrides(s, {"seed": 3}).profile == s.profile
    # ... while an override's path is relative to the working folder.
    with pytest.raises(ScenarioError, match=r"costs\.profile.*working folder"):
        load_scenario(folder / "s.toml", ['costs.profile="gpu.json"'])
    monkeypatch.chdir(folder)
    again = load_scenario(folder / "s.toml", ['costs.profile="gpu.json"'])
    assert again.profile is not None and again.profile.sha256 == s.profile.sha256


def test_overrides_as_mapping_and_as_strings_agree():
    base = load_scenario()
    as_strings = with_overrides(base, ["workload.concurrency=3", 'routing.popularity="zipf"'])
    as_mapping = with_overrides(base, {"workload.concurrency": 3, "routing.popularity": "zipf"})
    assert as_strings == as_mapping and as_strings.digest() == as_mapping.digest()
    assert as_mapping.workload.concurrency == 3
    with pytest.raises(ScenarioError, match=r"workload\.concurrency"):
        with_overrides(base, {"workload.concurrency": 0})


def test_replace_of_a_resolved_name_is_refused():
    s = load_scenario()
    with pytest.raises(ScenarioError, match=r"model\.target"):
        dataclasses.replace(s, model=dataclasses.replace(s.model, target="qwen3-8b"))
    assert with_overrides(
        s, {"model.target": "qwen3-235b-a22b", "hardware.num_gpus": 8}
    ).target.name == ("qwen3-235b-a22b")


def test_an_unresolved_scenario_says_how_to_make_one():
    with pytest.raises(ValueError, match="load_scenario"):
        _ = Scenario().target


def test_every_run_has_exactly_one_baseline_marked_by_the_policy_not_the_label():
    s = scenario_from_dict(
        {
            "workload": {"num_requests": 2, "output_tokens": 16, "concurrency": 2},
            "policies": [
                {"name": "fixed", "draft_tokens": 2, "label": "baseline"},  # a misleading label
                {"name": "fixed", "draft_tokens": 0, "label": "plain"},
            ],
        }
    )
    result = simspec.run(s)
    assert [p.label for p in result.policies] == ["baseline", "plain"]
    assert [p.is_baseline for p in result.policies] == [False, True]
    assert result.baseline.label == "plain" and result.baseline.mean_k == 0.0
    undeclared = simspec.run(
        with_overrides(s, {"policies": [{"name": "fixed", "draft_tokens": 2}]})
    )
    assert [(p.label, p.is_baseline) for p in undeclared.policies] == [
        ("no-spec", True),
        ("fixed-2", False),
    ]
    # The same baseline run either way (same reference sequences): equal TPOT.
    assert undeclared.baseline.tpot_ms == result.baseline.tpot_ms


def test_results_round_trip_through_json():
    s = load_scenario(None, ["workload.num_requests=2", "workload.output_tokens=16"])
    result = simspec.compare(s)
    again = simspec.RunResult.from_dict(__import__("json").loads(result.to_json()))
    assert again == result
    assert again.to_json() == result.to_json()
    assert set(simspec.METRICS) <= set(result.policies[0].to_dict())


def test_the_baseline_label_is_reserved_for_plain_decoding():
    bad = {"policies": [{"name": "fixed", "draft_tokens": 2, "label": "no-spec"}]}
    with pytest.raises(ScenarioError, match=r"policies\[0\]\.label.*no-spec"):
        scenario_from_dict(bad)
    fine = {"policies": [{"name": "fixed", "draft_tokens": 0, "label": "no-spec"}]}
    assert scenario_from_dict(fine).policies[0].label == "no-spec"
