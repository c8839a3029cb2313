"""Ctrl-C in a terminal: SIGINT to the sweep's whole process group (parent and workers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCENARIO = """
name = "sigint"
seed = 1
[model]
target = "qwen3-30b-a3b"
drafter = "eagle3-qwen3-30b-a3b"
[acceptance]
process = "iid"
alpha = 0.7
[workload]
loop = "closed"
concurrency = 4
num_requests = 24
prompt_tokens = 64
output_tokens = 1000
[[policies]]
name = "fixed"
draft_tokens = 3
[sweep]
grid = {{ "acceptance.alpha" = [{}] }}
""".format(", ".join(f"{0.3 + 0.03 * i:.2f}" for i in range(20)))


def _saved(out: Path) -> list[Path]:
    if not (out / "points").is_dir():
        return []
    return sorted(p for p in (out / "points").glob("*.json") if not p.name.startswith("."))


def _sweep(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "simspec", "sweep", str(scenario), "--out", str(out)]
    proc = subprocess.Popen(
        [*cmd, "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        # A shell starts a foreground job with SIGINT at its default, whatever this test
        # process has (a pytest-xdist worker ignores SIGINT, and children inherit that).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return proc, out


def _interrupt(proc: subprocess.Popen[bytes]) -> tuple[float, bytes]:
    start = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, errors = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the sweep did not end within 30 s of a Ctrl-C")
    return time.monotonic() - start, errors


def test_ctrl_c_after_some_points_ends_at_once_and_keeps_them(tmp_path):
    proc, out = _sweep(tmp_path)
    deadline = time.monotonic() + 60
    while not _saved(out) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    kept_before = _saved(out)
    assert kept_before, "no point finished within 60 s"
    elapsed, errors = _interrupt(proc)
    assert proc.returncode == 130, errors
    assert elapsed < 5.0, elapsed
    assert set(kept_before) <= set(_saved(out))  # every finished point kept
    assert len(_saved(out)) < 20 and not (out / "results.csv").exists()
    assert b"Traceback" not in errors, errors.decode()


def _workers_busy(pid: int) -> bool:
    """Whether ``pid`` has two child processes (the workers), each some CPU time into its
    point (the parent's imports and setup are then behind it: it handles Ctrl-C)."""
    busy = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if (
            int(fields[1]) == pid
            and (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") >= 0.2
        ):
            busy += 1
    return busy >= 2


def test_ctrl_c_before_the_first_point_ends_at_once(tmp_path):
    proc, out = _sweep(tmp_path)
    deadline = time.monotonic() + 60
    while not _workers_busy(proc.pid) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert not _saved(out), "a point finished before the Ctrl-C: make the points longer"
    elapsed, errors = _interrupt(proc)
    assert proc.returncode == 130, errors
    assert elapsed < 5.0, elapsed
    assert b"Traceback" not in errors, errors.decode()


def test_a_signal_raised_as_the_lock_closes_leaves_nothing_to_close_twice(tmp_path, monkeypatch):
    """A handler that raises (SIGTERM's, Ctrl-C's) runs when os.close returns: the lock has
    already forgotten its descriptor, so the release in the cleanup that follows is a no-op,
    not a second close (EBADF) that would replace the signal's exception."""
    import simspec.sweep.lock as lock_module

    lock = lock_module.FolderLock.acquire(tmp_path / "out")
    real_close = os.close
    closed: list[int] = []

    def close_then_signal(fd: int) -> None:
        real_close(fd)
        closed.append(fd)
        raise KeyboardInterrupt

    monkeypatch.setattr(lock_module.os, "close", close_then_signal)
    with pytest.raises(KeyboardInterrupt):
        lock.release()
    lock.release()  # the cleanup's second release: nothing left to close
    assert len(closed) == 1
