"""SIGTERM and SIGHUP stop simspec like Ctrl-C (issue 31, 10 and 11): one line, exit 128 + the
signal, no temporary file left; and a sweep's pool workers never outlive their parent.

Each test runs ``python -m simspec`` in a session of its own and signals that process alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .rejects import scenario, write_scenario

ROOT = Path(__file__).resolve().parents[2]
#: A run long enough (tens of seconds) to be signalled while it simulates.
SLOW = [
    "--set",
    "workload.num_requests=500",
    "--set",
    "workload.output_tokens=1000",
    "--set",
    "workload.concurrency=16",
    "--allow-large",
]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux signals")


def _start(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "simspec", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # as from a terminal: under nohup SIGHUP is ignored, and simspec keeps that choice
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )


def _wait_for(condition, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user and system) the process ``pid`` and its live children have used so
    far: a run may simulate in pool workers while its own process waits."""
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()
    except OSError:  # a child that ended between the listing and the read
        return 0.0
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(_cpu_s(child) for child in _children(pid))


#: CPU seconds after which a run is simulating: more than a whole small run takes (imports,
#: scenario, simulation and output: about 0.9 s), far less than the SLOW run.
SIMULATING_CPU_S = 1.5


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _reap(pids: list[int]) -> None:
    """Kill what a failed test left running (a worker that outlived its parent)."""
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize(("name", "code"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_run_stops_on_a_signal_with_one_line(tmp_path, name, code):
    path = write_scenario(tmp_path, scenario(), "s.toml")
    process = _start(["run", str(path), "--json", "out.json", *SLOW], tmp_path)
    _wait_for(lambda: _cpu_s(process.pid) >= SIMULATING_CPU_S)  # imported and simulating
    assert process.poll() is None, "the run ended before it was signalled"
    process.send_signal(getattr(signal, name))
    _, err = process.communicate(timeout=60)
    assert process.returncode == code, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"simspec: terminated by {name}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_sweep_stops_on_sigterm_and_keeps_its_points(tmp_path):
    path = write_scenario(tmp_path, scenario(), "s.toml")
    out = tmp_path / "o"
    argv = ["sweep", str(path), "--out", str(out), "--workers", "2"]
    argv += [
        "--grid",
        "seed=" + ",".join(map(str, range(1, 41))),
        "--set",
        "workload.num_requests=40",
    ]
    process = _start(argv, tmp_path)
    _wait_for(lambda: (out / "points").is_dir() and any((out / "points").glob("*.json")))
    workers = _children(process.pid)
    try:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 143, err
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1] == "simspec: terminated by SIGTERM"
        assert not [p for p in out.rglob(".*") if ".tmp" in p.name]
        assert not (out / "results.csv").exists()
        _wait_for(lambda: not any(_alive(w) for w in workers), timeout=10)
    finally:
        _reap(workers)


def test_sweep_workers_die_with_a_killed_parent(tmp_path):
    path = write_scenario(tmp_path, scenario(), "s.toml")
    out = tmp_path / "o"
    argv = ["sweep", str(path), "--out", str(out), "--workers", "2"]
    argv += [
        "--grid",
        "seed=" + ",".join(map(str, range(1, 41))),
        "--set",
        "workload.num_requests=40",
    ]
    process = _start(argv, tmp_path)
    _wait_for(lambda: (out / "points").is_dir() and any((out / "points").glob("*.json")))
    workers = _children(process.pid)
    assert workers
    try:
        process.kill()
        process.communicate(timeout=60)
        _wait_for(lambda: not any(_alive(w) for w in workers), timeout=10)
    finally:
        _reap(workers)
