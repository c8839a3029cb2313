"""Sweeps: grids, replications, paired confidence intervals, executors, crash safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from simspec.cli import main
from simspec.errors import InputError, ScenarioError
from simspec.sweep.run import (
    expand,
    paired_ci,
    read_spec,
    replication_seed,
    run_sweep,
    t_quantile_975,
)

BASE = """
name = "sw"
seed = 4
[routing]
overlap = 0.3
[acceptance]
alpha = 0.7
[workload]
concurrency = 1
num_requests = 2
prompt_tokens = 64
output_tokens = 30
[[policies]]
name = "fixed"
draft_tokens = 2
[[policies]]
name = "threshold"
tau = 0.5
"""


def _data(extra: str = "") -> dict:
    import tomllib

    return tomllib.loads(BASE + extra)


def test_grid_cases_and_replications_expand_in_order():
    extra = """
[sweep]
replications = 2
grid = { "workload.concurrency" = [1, 2], "acceptance.alpha" = [0.5, 0.8] }
cases = [{ label = "a", "routing.overlap" = 0.1 }, { label = "b", "routing.overlap" = 0.6 }]
"""
    data = _data(extra)
    spec = read_spec(data, "sw.toml")
    points = expand(data, "sw.toml", spec)
    assert len(points) == 2 * 2 * 2 * 2
    first = points[0]
    assert (first.case, first.values, first.replication) == (
        "a",
        {"workload.concurrency": 1, "acceptance.alpha": 0.5},
        0,
    )
    assert first.scenario.seed == 4 and points[1].scenario.seed == replication_seed(4, 1) != 4
    assert points[1].scenario.routing.overlap == 0.1
    assert points[-1].scenario.routing.overlap == 0.6
    assert points[-1].scenario.workload.concurrency == 2
    assert points[0].scenario.policies[0].label == "no-spec"  # the baseline is always there
    assert len({p.digest for p in points}) == len(points)


def test_bad_grid_values_are_input_errors_before_running():
    data = _data('[sweep]\ngrid = { "routing.overlap" = [0.2, 1.7] }\n')
    with pytest.raises(ScenarioError) as info:
        expand(data, "sw.toml", read_spec(data, "sw.toml"))
    assert info.value.key_path == "routing.overlap"
    with pytest.raises(ScenarioError) as info:
        read_spec(_data("[sweep]\nreplicas = 2\n"), "sw.toml")
    assert info.value.key_path == "sweep.replicas"
    with pytest.raises(InputError):
        read_spec(_data(), "sw.toml", ["workload.concurrency"])


def test_t_quantiles_and_paired_ci():
    assert t_quantile_975(1) == pytest.approx(12.706)
    assert t_quantile_975(1000) == pytest.approx(1.96)
    mean, half = paired_ci([1.0, 2.0, 3.0])
    assert mean == pytest.approx(2.0)
    assert half == pytest.approx(4.303 * 1.0 / np.sqrt(3))
    assert np.isnan(paired_ci([1.0])[1])


def _run(tmp_path: Path, extra: str, name: str, **kw) -> Path:
    data = _data(extra)
    spec = read_spec(data, "sw.toml")
    points = expand(data, "sw.toml", spec)
    out = tmp_path / name
    run_sweep(points, out, oracle=spec.oracle, workers=kw.pop("workers", 1), **kw)
    return out


def _summary(out: Path) -> list[dict]:
    import csv

    with (out / "summary.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_identical_policies_have_exactly_zero_paired_difference(tmp_path):
    extra = "[sweep]\nreplications = 3\n"
    data = BASE.replace(
        'name = "threshold"\ntau = 0.5', 'name = "fixed"\ndraft_tokens = 0\nlabel = "zero"'
    )
    import tomllib

    d = tomllib.loads(data + extra)
    spec = read_spec(d, "sw.toml")
    out = tmp_path / "same"
    run_sweep(expand(d, "sw.toml", spec), out, oracle=False, workers=1)
    rows = {r["policy"]: r for r in _summary(out)}
    assert float(rows["zero"]["tpot_diff_vs_no_spec_ms"]) == 0.0
    assert float(rows["zero"]["tpot_diff_vs_no_spec_ci95_ms"]) == 0.0


def test_confidence_intervals_shrink_with_replications(tmp_path):
    base = "[workload]\n"  # placeholder to keep BASE intact
    del base
    widths = []
    for reps in (3, 12):
        out = _run(tmp_path, f"[sweep]\nreplications = {reps}\n", f"r{reps}")
        row = next(r for r in _summary(out) if r["policy"] == "threshold")
        widths.append(float(row["tpot_diff_vs_no_spec_ci95_ms"]))
    assert widths[1] < widths[0]


def test_oracle_columns_and_delta_points(tmp_path):
    out = _run(tmp_path, "[sweep]\noracle = true\n", "orc")
    rows = {r["policy"]: r for r in _summary(out)}
    assert float(rows["oracle"]["tpot_diff_vs_oracle_ms"]) == 0.0
    assert float(rows["threshold"]["tpot_diff_vs_oracle_ms"]) >= 0.0
    assert len(list((out / "delta").glob("*.npz"))) == 1


def test_process_and_dask_executors_give_identical_csvs(tmp_path):
    pytest.importorskip("distributed")
    extra = '[sweep]\ngrid = { "workload.concurrency" = [1, 2], "acceptance.alpha" = [0.5, 0.8] }\n'
    a = _run(tmp_path, extra, "proc", workers=2)
    b = _run(tmp_path, extra, "dask", workers=2, executor="dask")
    for name in ("results.csv", "summary.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert len((a / "results.csv").read_text().splitlines()) == 1 + 4 * 3


def test_existing_output_needs_resume(tmp_path):
    out = _run(tmp_path, "", "once")
    with pytest.raises(InputError):
        _run(tmp_path, "", "once")
    before = (out / "results.csv").read_bytes()
    _run(tmp_path, "", "once", resume=True)
    assert (out / "results.csv").read_bytes() == before


def test_sigkill_midway_then_resume_matches_an_uninterrupted_sweep(tmp_path):
    scenario = tmp_path / "sw.toml"
    grid = '[sweep]\ngrid = { "acceptance.alpha" = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95] }\n'
    scenario.write_text(BASE.replace("output_tokens = 30", "output_tokens = 300") + grid)
    full = tmp_path / "full"
    assert main(["sweep", str(scenario), "--out", str(full), "--workers", "1"]) == 0
    killed = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-m",
        "simspec",
        "sweep",
        str(scenario),
        "--out",
        str(killed),
        "--workers",
        "1",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = list((killed / "points").glob("*.json")) if (killed / "points").exists() else []
        if len(done) >= 2:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = len(list((killed / "points").glob("*.json")))
    assert 2 <= finished < 8, finished
    assert not (killed / "results.csv").exists()
    assert main(["sweep", str(scenario), "--out", str(killed), "--workers", "1", "--resume"]) == 0
    for name in ("results.csv", "summary.csv"):
        assert (killed / name).read_bytes() == (full / name).read_bytes()


def test_sweep_and_plot_cli(tmp_path, capsys):
    scenario = tmp_path / "sw.toml"
    scenario.write_text(BASE)
    out = tmp_path / "o"
    code = main(
        [
            "sweep",
            str(scenario),
            "--out",
            str(out),
            "--grid",
            "workload.concurrency=1,2",
            "--replications",
            "2",
            "--workers",
            "1",
        ]
    )
    assert code == 0
    assert main(["plot", str(out)]) == 0
    for name in ("speedup-vs-batch", "policies"):
        assert (out / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
        assert (out / "figures" / f"{name}.svg").read_text().lstrip().startswith("<?xml")
    capsys.readouterr()
    assert main(["plot", str(tmp_path)]) == 2


def test_table_valued_axis_sets_keys_together():
    data = _data(
        '[sweep.grid]\nbatch = [{ "workload.concurrency" = 1, "workload.num_requests" = 1 },'
        ' { "workload.concurrency" = 3, "workload.num_requests" = 3 }]\n'
    )
    points = expand(data, "sw.toml", read_spec(data, "sw.toml"))
    assert [p.values for p in points] == [
        {"workload.concurrency": 1, "workload.num_requests": 1},
        {"workload.concurrency": 3, "workload.num_requests": 3},
    ]
    assert points[1].scenario.workload.num_requests == 3


def test_plot_several_folders_side_by_side(tmp_path, capsys):
    scenario = tmp_path / "sw.toml"
    scenario.write_text(BASE)
    outs = []
    for name, overlap in (("a", "0.0"), ("b", "0.6")):
        out = tmp_path / name
        args = [
            "sweep",
            str(scenario),
            "--out",
            str(out),
            "--grid",
            "workload.concurrency=1,2",
            "--set",
            f"routing.overlap={overlap}",
            "--workers",
            "1",
        ]
        assert main(args) == 0
        outs.append(str(out))
    figs = tmp_path / "figs"
    assert main(["plot", *outs, "--labels", "indep,overlap", "--out", str(figs)]) == 0
    assert (figs / "speedup-vs-batch-by-model.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["plot", *outs, "--labels", "only-one"]) == 2
