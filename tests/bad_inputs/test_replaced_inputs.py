"""Input silently replaced by later input (issue 31, 7): an option given twice with different
values, a scenario key set twice by ``--set``, or a ``--set`` key that a sweep's grid or cases
set again for every point. argparse and the override layer used to keep the last value and
drop the first without a word; each is now exit 2 naming both, before any work.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simspec.cli import main
from simspec.config.overrides import (
    apply_overrides,
    check_disjoint,
    check_no_replaced_override,
)
from simspec.errors import ScenarioError

from .rejects import assert_rejected, experiments_run, scenario, write_scenario


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write_scenario(tmp_path, scenario(), "small.toml")


# -- an option given twice ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "twice", "flag"),
    [
        ("run", ["--json", "a.json", "--json", "b.json"], "--json"),
        ("run", ["--json", "a.json", "--json=b.json"], "--json"),
        ("run", ["--format", "csv", "--format", "json"], "--format"),
        ("run", ["--trace-out", "a.json", "--trace-out", "b.json"], "--trace-out"),
        ("run", ["--replications", "2", "--replications", "3"], "--replications"),
        ("compare", ["--format", "csv", "--output", "a.csv", "--output", "b.csv"], "--output"),
        ("recommend", ["--batch", "1", "--batch", "4"], "--batch"),
        ("recommend", ["--batch", "1", "--markdown", "a.md", "--markdown", "b.md"], "--markdown"),
        ("sweep", ["--out", "a", "--out", "b", "--grid", "seed=1,2"], "--out"),
        (
            "sweep",
            ["--out", "a", "--grid", "seed=1", "--workers", "1", "--workers", "2"],
            "--workers",
        ),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_a_single_valued_option_given_twice_is_refused(
    tmp_path, small, capsys, monkeypatch, command, twice, flag
):
    monkeypatch.chdir(tmp_path)
    calls = experiments_run(monkeypatch)
    message = assert_rejected(capsys, [command, str(small), *twice], tmp_path, [flag, "once"])
    assert calls == []
    assert message.count(flag) >= 3  # the key path, and each of the two values it was given


def test_an_abbreviated_option_counts_as_the_option(tmp_path, small, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["run", str(small), "--js", "a.json", "--json", "b.json"]
    assert_rejected(capsys, argv, tmp_path, ["--json", "a.json", "b.json"])


def test_the_same_option_with_the_same_value_twice_is_fine(tmp_path, small, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(small), "--json", "a.json", "--json", "a.json"]) == 0
    assert (tmp_path / "a.json").is_file()


def test_subcommand_options_are_guarded_too(tmp_path, capsys):
    argv = ["routing", "predict", "--model", "qwen3-30b-a3b", "--tokens", "2", "--tokens", "3"]
    assert_rejected(capsys, argv, tmp_path, ["--tokens", "once"])


# -- a scenario key set twice ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sets", "key"),
    [
        (["seed=1", "seed=2"], "seed"),
        (["routing.overlap=0.3", "routing.overlap=0.5"], "routing.overlap"),
        (["routing.overlap=0.3", "routing={overlap = 0.5}"], "routing"),
        (["tensor_parallel_size=2", "hardware.num_gpus=4"], "hardware.num_gpus"),
        (["hardware.num_gpus=4", "tensor_parallel_size=2"], "tensor_parallel_size"),
        (["policies[1].draft_tokens=3", "num_speculative_tokens=4"], "num_speculative_tokens"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_a_key_set_twice_is_refused(tmp_path, small, capsys, monkeypatch, sets, key):
    calls = experiments_run(monkeypatch)
    argv = ["run", str(small)]
    for item in sets:
        argv += ["--set", item]
    assert_rejected(capsys, argv, tmp_path, ["--set", key, "set once"])
    assert calls == []


@pytest.mark.parametrize(
    "sets",
    [
        ["seed=3", "seed=3"],
        ["routing={overlap = 0.5}", "routing.popularity='zipf'"],
        ["policies[0].draft_tokens=3", "policies[1].draft_tokens=4"],
    ],
    ids=" ".join,
)
def test_keys_that_do_not_replace_each_other_are_fine(small, sets):
    argv = ["validate", str(small)]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 0


def test_the_check_refuses_a_replaced_override_and_the_library_layers():
    """The command line refuses what a user typed twice; the library keeps the last value, so
    code can put its own overrides under a user's."""
    pairs = ["workload.concurrency=1", "workload.concurrency=4"]
    with pytest.raises(ScenarioError, match="set once"):
        check_no_replaced_override(pairs)
    assert apply_overrides(scenario(), pairs)["workload"]["concurrency"] == 4


# -- a --set key a sweep sets again for every point --------------------------------------------
@pytest.mark.parametrize(
    ("grid", "setting"),
    [
        ("seed=1,2", "seed=3"),
        ("workload.concurrency=1,2", "workload.concurrency=4"),
        ("workload.concurrency=1,2", "workload={concurrency = 4, num_requests = 2}"),
        ("max_num_seqs=1,2", "workload.max_batch_size=8"),
    ],
    ids=lambda v: v,
)
def test_a_set_key_the_grid_replaces_is_refused(tmp_path, small, capsys, grid, setting):
    argv = ["sweep", str(small), "--out", str(tmp_path / "o"), "--grid", grid, "--set", setting]
    assert_rejected(capsys, argv, tmp_path, ["--set", setting.partition("=")[0], "does not vary"])


def test_a_set_key_a_case_replaces_is_refused(tmp_path, capsys):
    data = scenario()
    data["sweep"] = {
        "cases": [
            {"label": "a", "workload": {"concurrency": 1}},
            {"label": "b", "workload": {"concurrency": 2}},
        ]
    }
    path = write_scenario(tmp_path, data)
    argv = ["sweep", str(path), "--out", str(tmp_path / "o"), "--set", "workload.concurrency=4"]
    assert_rejected(capsys, argv, tmp_path, ["--set", "workload.concurrency", "does not vary"])


def test_a_set_key_the_sweep_does_not_vary_is_fine():
    check_disjoint(["workload.concurrency", "routing.overlap"], ["seed", "workload.num_requests"])
