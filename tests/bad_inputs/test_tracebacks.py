"""Inputs that used to end in a traceback or a hang (issue 13, 6, 7 and 10): now exit 2 at once.

Special files as inputs (a FIFO blocks a reader forever, `/proc/self/mem` fails on read, a
symlink loop), data nested thousands deep (RecursionError), a trace declaring 2**40 experts
(MemoryError), a bad seed or scheduler address, a scenario whose simulation would take hours
without `--allow-large`, and Ctrl-C during a dask sweep.
"""

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
from simspec.commands import MAX_WORK_TOKENS

from .rejects import assert_rejected, scenario, write_scenario


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write_scenario(tmp_path, scenario(), "small.toml")


def _simulated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import simspec.analysis.experiment as experiment

    calls: list[str] = []
    monkeypatch.setattr(experiment, "run_experiment", lambda *a, **k: calls.append("run"))
    return calls


@pytest.mark.parametrize("command", ["validate", "run"])
def test_fifo_scenario_is_refused_without_blocking(tmp_path, capsys, command):
    fifo = tmp_path / "scenario.toml"
    os.mkfifo(fifo)  # nobody writes: opening it for reading would block forever
    assert_rejected(capsys, [command, str(fifo)], tmp_path, [str(fifo), "regular file", "FIFO"])


def test_symlink_loop_scenario(tmp_path, capsys):
    (tmp_path / "a.toml").symlink_to(tmp_path / "b.toml")
    (tmp_path / "b.toml").symlink_to(tmp_path / "a.toml")
    argv = ["validate", str(tmp_path / "a.toml")]
    assert_rejected(capsys, argv, tmp_path, ["a.toml", "readable", "symbolic links"])


def test_proc_self_mem_scenario(tmp_path, capsys):
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("no /proc")
    assert_rejected(capsys, ["validate", "/proc/self/mem"], tmp_path, ["/proc/self/mem", "read"])


def test_dev_zero_scenario_is_not_read_forever(tmp_path, capsys):
    assert_rejected(capsys, ["validate", "/dev/zero"], tmp_path, ["/dev/zero", "special file"])


def test_toml_nested_5000_deep(tmp_path, capsys):
    path = tmp_path / "deep.toml"
    path.write_text("name = " + "[" * 5000 + "]" * 5000 + "\n")
    assert_rejected(capsys, ["validate", str(path)], tmp_path, [str(path), "nested at most"])


def test_toml_table_nested_deep_but_parseable(tmp_path, capsys):
    path = tmp_path / "deep.toml"
    path.write_text("x = " + "{a = " * 100 + "1" + "}" * 100 + "\n")
    assert_rejected(capsys, ["validate", str(path)], tmp_path, [str(path), "nested at most"])


def test_set_value_nested_5000_deep(tmp_path, small, capsys):
    argv = ["validate", str(small), "--set", "routing.overlap=" + "[" * 5000 + "]" * 5000]
    assert_rejected(capsys, argv, tmp_path, ["--set", "nested at most"])


def test_profile_nested_100000_deep(tmp_path, capsys):
    profile = tmp_path / "deep.json"
    profile.write_text("[" * 100_000 + "]" * 100_000)
    path = write_scenario(tmp_path, scenario({"costs.profile": str(profile)}))
    assert_rejected(capsys, ["validate", str(path)], tmp_path, [str(profile), "nested at most"])


def test_profile_fifo_is_refused(tmp_path, capsys):
    fifo = tmp_path / "profile.json"
    os.mkfifo(fifo)
    path = write_scenario(tmp_path, scenario({"costs.profile": str(fifo)}))
    assert_rejected(capsys, ["validate", str(path)], tmp_path, ["costs.profile", "profile"])


def _trace(path: Path, num_experts: int) -> None:
    ids = np.array([[[0, 1]], [[1, 2]], [[2, 3]]], dtype=np.int64)
    np.savez(path, expert_ids=ids, num_experts=np.array(num_experts, dtype=np.int64))


def test_trace_with_2_to_the_40_experts_is_bounded(tmp_path, capsys):
    path = tmp_path / "huge.npz"
    _trace(path, 2**40)
    argv = ["routing", "stats", str(path), "--lags", "1", "--max-tokens", "2"]
    assert_rejected(capsys, argv, tmp_path, [str(path), "num_experts", "65536", "1099511627776"])


def test_trace_fifo_is_refused(tmp_path, capsys):
    fifo = tmp_path / "trace.npz"
    os.mkfifo(fifo)
    argv = ["routing", "stats", str(fifo)]
    assert_rejected(capsys, argv, tmp_path, [str(fifo), "regular file", "FIFO"])


def test_routing_predict_negative_seed(tmp_path, capsys):
    argv = ["routing", "predict", "--model", "qwen3-30b-a3b", "--popularity", "dirichlet"]
    argv += ["--seed", "-1"]
    assert_rejected(capsys, argv, tmp_path, ["--seed", "[0, ", "-1"])


def test_scheduler_that_is_no_address(tmp_path, small, capsys):
    argv = ["sweep", str(small), "--out", str(tmp_path / "o"), "--grid", "seed=1,2"]
    argv += ["--executor", "dask", "--scheduler", "not a url"]
    assert_rejected(capsys, argv, tmp_path, ["--scheduler", "not a url", "tcp://"])


def test_unreachable_scheduler_fails_fast(tmp_path, small, capsys, monkeypatch):
    """The connection attempt ends after simspec's timeout, not distributed's 30 s (the shipped
    timeout is a few seconds; a 1-second one keeps the test short)."""
    pytest.importorskip("distributed")
    import simspec.sweep.run as run

    assert run.CONNECT_TIMEOUT_S <= 10
    monkeypatch.setattr(run, "CONNECT_TIMEOUT_S", 1)
    argv = ["sweep", str(small), "--out", str(tmp_path / "o"), "--grid", "seed=1,2"]
    argv += ["--executor", "dask", "--scheduler", "tcp://127.0.0.1:1"]
    start = time.monotonic()
    message = assert_rejected(
        capsys, argv, tmp_path, ["--scheduler", "tcp://127.0.0.1:1", "running dask"]
    )
    assert "within 1 s" in message
    assert time.monotonic() - start < 20  # 1 s connect timeout, not distributed's 30 s


HUGE = ["--set", "workload.num_requests=1000000", "--set", "workload.concurrency=65536"]


@pytest.mark.parametrize("command", ["run", "compare"])
def test_huge_scenario_needs_allow_large(tmp_path, small, capsys, monkeypatch, command):
    calls = _simulated(monkeypatch)
    argv = [command, str(small), *HUGE]
    message = assert_rejected(
        capsys, argv, tmp_path, ["workload.num_requests", "workload.output_tokens", "--allow-large"]
    )
    assert f"{MAX_WORK_TOKENS:,}" in message
    runs = 2 + 1 + (command == "compare")  # policies + baseline (+ oracle)
    assert f"{1_000_000 * 8 * runs:,}" in message  # the estimate is requests x output x runs
    assert calls == []


def test_huge_sweep_needs_allow_large(tmp_path, small, capsys, monkeypatch):
    calls = _simulated(monkeypatch)
    out = tmp_path / "o"
    argv = ["sweep", str(small), "--out", str(out), "--grid", "seed=1,2", *HUGE]
    message = assert_rejected(
        capsys, argv, tmp_path, ["workload.num_requests", "2 points", "--allow-large"]
    )
    # The largest point's factors and their product, then the sum over both points.
    one = 1_000_000 * 8 * 3
    assert f"the largest of 2 points 1000000 x 8 x 3 = about {one:,}" in message
    assert f"all 2 together about {2 * one:,}" in message
    assert calls == []


def test_validate_warns_about_a_huge_scenario(small, capsys):
    assert main(["validate", str(small), *HUGE]) == 0
    out = capsys.readouterr().out
    assert "--allow-large" in out and f"{1_000_000 * 8 * 3:,}" in out


def test_allow_large_lets_it_through(small, capsys, monkeypatch):
    calls: list[str] = []

    def stop(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append("run")
        raise KeyboardInterrupt  # the check passed: do not actually simulate for minutes

    import simspec.analysis.experiment as experiment

    monkeypatch.setattr(experiment, "run_experiment", stop)
    assert main(["run", str(small), *HUGE, "--allow-large"]) == 130
    assert calls == ["run"]


@pytest.mark.parametrize(
    "path",
    [None, *sorted(str(p) for p in (Path(__file__).parents[2] / "scenarios").glob("*.toml"))],
)
def test_shipped_scenarios_are_below_the_work_limit(path):
    from simspec.commands import check_work
    from simspec.config.load import load_scenario

    check_work([load_scenario(path)], oracle=True, allow_large=False)  # raises if above


@pytest.mark.slow
def test_ctrl_c_during_a_dask_sweep_is_one_line(tmp_path, small):
    pytest.importorskip("distributed")
    grid = "seed=" + ",".join(str(i) for i in range(1, 61))
    argv = [sys.executable, "-m", "simspec", "sweep", str(small), "--out", str(tmp_path / "o")]
    argv += ["--executor", "dask", "--workers", "2", "--grid", grid]
    argv += ["--set", "workload.num_requests=400", "--set", "workload.output_tokens=64"]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    points = tmp_path / "o" / "points"
    deadline = time.monotonic() + 120
    while not (points.is_dir() and any(points.glob("*.json"))) and time.monotonic() < deadline:
        time.sleep(0.2)  # until the cluster is up and the first point is saved
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
    _, err = proc.communicate(timeout=120)
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 130
    said = [line for line in lines if not line.startswith(("sweep:", "note:"))]  # progress, hints
    assert said == ["simspec: interrupted"]
