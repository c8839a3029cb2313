"""Seeds (issue 13, 3): checked like a scenario's everywhere; a seed axis sets the base seed.

``--grid seed=1,2,3`` runs three base seeds (three point files, three different results, the
CSV's ``seed`` column saying which); a seed that ``run`` rejects (a float, a boolean, a string,
a negative number, 2^63) is rejected by a sweep too, before anything runs.
"""

from __future__ import annotations

import csv

import pytest

from simspec.cli import main
from simspec.sweep.spec import load_sweep, replication_seed

from .rejects import assert_rejected, scenario, write_scenario

BAD_SEEDS = {"1.9": 1.9, "true": True, "abc": "abc", "-1": -1, "2^63": 2**63}


@pytest.mark.parametrize("text", sorted(BAD_SEEDS), ids=sorted(BAD_SEEDS))
def test_bad_seed_in_the_file_is_rejected_by_run(tmp_path, capsys, text):
    path = write_scenario(tmp_path, scenario({"seed": BAD_SEEDS[text]}))
    argv = ["run", str(path), "--json", str(tmp_path / "o.json")]
    assert_rejected(capsys, argv, tmp_path, [str(path), "seed: expected an integer in [0, 2^63)"])


@pytest.mark.parametrize("text", sorted(BAD_SEEDS), ids=sorted(BAD_SEEDS))
def test_bad_seed_in_the_file_is_rejected_by_sweep(tmp_path, capsys, text):
    path = write_scenario(tmp_path, scenario({"seed": BAD_SEEDS[text]}))
    out = tmp_path / "sweep"
    argv = ["sweep", str(path), "--out", str(out), "--grid", "workload.concurrency=1,2"]
    assert_rejected(capsys, argv, tmp_path, [str(path), "seed: expected an integer in [0, 2^63)"])
    assert not out.exists()


GRID_SEEDS = {"1.9": "1.9", "true": "true", "abc": '"abc"', "-1": "-1", "2^63": str(2**63)}


@pytest.mark.parametrize("text", sorted(GRID_SEEDS), ids=sorted(GRID_SEEDS))
def test_bad_seed_on_a_grid_axis_is_rejected_before_running(tmp_path, capsys, text):
    path = write_scenario(tmp_path, scenario())
    out = tmp_path / "sweep"
    argv = ["sweep", str(path), "--out", str(out), "--grid", f"seed=1,{GRID_SEEDS[text]}"]
    assert_rejected(
        capsys, argv, tmp_path, [str(path), "seed: expected an integer in [0, 2^63)", "found"]
    )
    assert not out.exists()


def test_bad_seed_in_a_sweep_case_is_rejected(tmp_path, capsys):
    data = scenario()
    data["sweep"] = {"cases": [{"label": "a", "seed": 3}, {"label": "b", "seed": 1.5}]}
    path = write_scenario(tmp_path, data)
    out = tmp_path / "sweep"
    argv = ["sweep", str(path), "--out", str(out)]
    assert_rejected(capsys, argv, tmp_path, [str(path), "seed: expected", "found 1.5 (float)"])
    assert not out.exists()


def test_a_seed_axis_sets_the_base_seed_of_each_point(tmp_path):
    path = write_scenario(tmp_path, scenario())
    _, points = load_sweep(path, grid=["seed=1,2,3"], replications=2)
    seeds = [(p.values["seed"], p.replication, p.scenario.seed) for p in points]
    assert seeds == [(s, r, replication_seed(s, r)) for s in (1, 2, 3) for r in (0, 1)]
    assert replication_seed(1, 0) == 1  # replication 0 runs the point's own seed
    assert len({p.digest for p in points}) == 6


def test_a_seed_sweep_writes_one_point_per_seed(tmp_path, capsys):
    path = write_scenario(tmp_path, scenario())
    out = tmp_path / "sweep"
    assert main(["sweep", str(path), "--out", str(out), "--grid", "seed=1,2,3"]) == 0
    capsys.readouterr()
    assert len(list((out / "points").glob("*.json"))) == 3
    with open(out / "results.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["policy"] == "fixed-2"]
    assert [r["seed"] for r in rows] == ["1", "2", "3"]
    assert len({r["tpot_ms"] for r in rows}) == 3  # different seeds, different texts
