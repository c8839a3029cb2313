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

from simspec.analysis.replications import Interval
from simspec.cli import main
from simspec.errors import InputError, ScenarioError
from simspec.sweep.points import read_sweep
from simspec.sweep.run import run_sweep
from simspec.sweep.spec import expand, load_sweep, read_spec, replication_seed

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
    assert len({p.digest for p in points}) == len(points)


def test_bad_grid_values_are_input_errors_before_running():
    data = _data('[sweep]\ngrid = { "routing.overlap" = [0.2, 1.7] }\n')
    with pytest.raises(ScenarioError) as info:
        expand(data, "sw.toml", read_spec(data, "sw.toml"))
    assert info.value.key_path == "routing.overlap"
    with pytest.raises(ScenarioError) as info:
        read_spec(_data("[sweep]\nreplicas = 2\n"), "sw.toml")
    assert info.value.key_path == "sweep.replicas"
    with pytest.raises(InputError) as info:
        read_spec(_data(), "sw.toml", ["workload.concurrency"])
    assert info.value.key_path == "sweep.grid"
    assert "--" not in str(info.value)
    with pytest.raises(ScenarioError) as info:
        read_spec(_data('[sweep]\ncases = [{ label = "a" }, { label = "a" }]\n'), "sw.toml")
    assert info.value.key_path == "sweep.cases[1].label"


def test_grid_axes_from_a_mapping_or_strings_agree():
    a = read_spec(_data(), "sw.toml", {"workload.concurrency": [1, 2]})
    b = read_spec(_data(), "sw.toml", ["workload.concurrency=1,2"])
    assert a == b and a.grid == {"workload.concurrency": [1, 2]}
    with pytest.raises(InputError) as info:
        read_spec(_data(), "sw.toml", {"workload.concurrency": []})
    assert info.value.key_path == "sweep.grid.workload.concurrency"


def test_student_t_half_widths_and_paired_ci():
    interval = Interval.of([1.0, 2.0, 3.0])
    assert interval.mean == pytest.approx(2.0)
    # 4.30...: t_{0.975, 2}
    assert interval.half_width == pytest.approx(
        4.302652729749464 * 1.0 / np.sqrt(3)
    )  # t_{0.975, 2}
    assert Interval.of([0.0, 1.0]).half_width == pytest.approx(12.706204736174694 * np.sqrt(0.25))
    big = np.tile([0.0, 1.0], 500)  # t_{0.975, 999} is close to the normal quantile
    half = Interval.of(big).half_width
    assert half == pytest.approx(1.96 * big.std(ddof=1) / np.sqrt(1000), rel=2e-3)
    assert np.isnan(Interval.of([1.0]).half_width)
    empty = Interval.of([])
    assert np.isnan(empty.mean) and np.isnan(empty.half_width)


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


@pytest.mark.slow
def test_process_and_dask_executors_give_identical_csvs(tmp_path):
    """Slow: a dask LocalCluster (a scheduler and two worker processes) takes seconds of real
    time to start and stop, whatever the sweep."""
    pytest.importorskip("distributed")
    extra = '[sweep]\ngrid = { "workload.concurrency" = [1, 2], "acceptance.alpha" = [0.5, 0.8] }\n'
    a = _run(tmp_path, extra, "proc", workers=2)
    b = _run(tmp_path, extra, "dask", workers=2, executor="dask")
    for name in ("results.csv", "summary.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert len((a / "results.csv").read_text().splitlines()) == 1 + 4 * 3


def test_existing_output_needs_resume(tmp_path):
    out = _run(tmp_path, "", "once")
    with pytest.raises(InputError) as info:
        _run(tmp_path, "", "once")
    assert info.value.key_path == "sweep.out" and "--" not in str(info.value)
    before = (out / "results.csv").read_bytes()
    _run(tmp_path, "", "once", resume=True)
    assert (out / "results.csv").read_bytes() == before


@pytest.mark.slow
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


def _csv_rows(path: Path) -> list[dict]:
    import csv

    with path.open() as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize(
    "policies",
    [
        "",  # the sweep adds the k = 0 baseline, labelled "no-spec"
        '[[policies]]\nname = "fixed"\ndraft_tokens = 0\nlabel = "plain"\n',  # declared, last
    ],
)
def test_results_csv_baseline_rows_are_exactly_the_is_baseline_rows(tmp_path, policies):
    extra = policies + '[sweep]\nreplications = 2\ngrid = { "workload.concurrency" = [1, 2] }\n'
    out = _run(tmp_path, extra, "base")
    finished = read_sweep(out)
    baseline = {
        (str(p.values["workload.concurrency"]), str(p.replication), row.label)
        for p in finished
        for row in p.result.policies
        if row.is_baseline
    }
    assert len(baseline) == len(finished) == 4  # one per point
    assert {label for *_, label in baseline} == {"plain" if policies else "no-spec"}
    rows = _csv_rows(out / "results.csv")
    labels = {p.result.baseline.label for p in finished}
    in_csv = {
        (r["workload.concurrency"], r["replication"], r["policy"])
        for r in rows
        if r["policy"] in labels
    }
    assert in_csv == baseline
    assert all(
        float(r["speedup_vs_no_spec"]) == 1.0 and float(r["mean_k"]) == 0.0
        for r in rows
        if r["policy"] in labels
    )
    assert ("no-spec" in {r["policy"] for r in rows}) == (not policies)
    for r in _summary(out):
        is_base = r["policy"] in labels
        assert (float(r["tpot_diff_vs_no_spec_ms"]) == 0.0) == is_base


def test_read_sweep_gives_the_run_results_in_table_order(tmp_path):
    extra = '[sweep]\nreplications = 2\ngrid = { "workload.concurrency" = [2, 1] }\n'
    data = _data(extra)
    points = expand(data, "sw.toml", read_spec(data, "sw.toml"))
    returned = run_sweep(points, tmp_path / "o", workers=1)
    again = read_sweep(tmp_path / "o")
    assert [(p.values, p.replication) for p in again] == [(p.values, p.replication) for p in points]
    assert [p.result for p in again] == [p.result for p in returned]
    assert [p.result.scenario_digest for p in again] == [p.digest for p in points]
    rows = _csv_rows(tmp_path / "o" / "results.csv")
    assert len(rows) == sum(len(p.result.policies) for p in again)
    assert [float(r["tpot_ms"]) for r in rows] == [
        row.tpot_ms for p in again for row in p.result.policies
    ]
    with pytest.raises(InputError) as info:
        read_sweep(tmp_path)
    assert info.value.key_path == "sweep.json"


def test_library_errors_name_sweep_keys_not_flags(tmp_path):
    data = _data()
    points = expand(data, "sw.toml", read_spec(data, "sw.toml"))
    for kw, key in (
        ({"executor": "slurm"}, "sweep.executor"),
        ({"workers": 0}, "sweep.workers"),
    ):
        with pytest.raises(InputError) as info:
            run_sweep(points, tmp_path / "x", **kw)
        assert info.value.key_path == key and "--" not in str(info.value)
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError) as info:
        run_sweep(points, tmp_path / "file")
    assert info.value.key_path == "sweep.out"


def test_load_sweep_reads_a_file_with_axes_and_overrides(tmp_path):
    scenario = tmp_path / "sw.toml"
    scenario.write_text(BASE)
    spec, points = load_sweep(
        scenario,
        grid={"workload.concurrency": [1, 2]},
        overrides={"routing.overlap": 0.5},
        replications=2,
    )
    assert spec.replications == 2 and len(points) == 4
    assert {p.scenario.routing.overlap for p in points} == {0.5}
    assert [p.scenario.workload.concurrency for p in points] == [1, 1, 2, 2]


def test_atomic_writer_text_bytes_and_callback(tmp_path):
    from simspec.io import file_mode
    from simspec.io.atomic import write_atomic

    assert write_atomic(tmp_path / "a" / "t.txt", "é\n").read_text(encoding="utf-8") == "é\n"
    assert write_atomic(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
    arrays = {"x": np.arange(3)}
    path = write_atomic(tmp_path / "c.npz", lambda tmp: np.savez_compressed(tmp, **arrays))
    with np.load(path) as data:
        assert data["x"].tolist() == [0, 1, 2]
    assert path.stat().st_mode & 0o777 == file_mode()

    def broken(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_atomic(tmp_path / "b.bin", broken)
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"  # the old file, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b.bin", "c.npz"]
