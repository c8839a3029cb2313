"""Input that was silently dropped or ignored, guards that came too late, environment errors that
escaped as tracebacks (issue 31, 7, 9, 10 and 11): each is now exit 2 with one line naming the
flag or the file, or works.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simspec.cli import main
from simspec.sweep.run import check_scheduler

from .rejects import assert_rejected, experiments_run, scenario, write_scenario

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write_scenario(tmp_path, scenario(), "small.toml")


@pytest.mark.parametrize(
    "setting",
    ["routing.overlap=0.3\nseed=5", 'name="a\nb"', "routing.overlap=0.3\r\nseed=5"],
    ids=["second key on a new line", "line break in a string", "CRLF"],
)
def test_set_with_a_line_break_is_refused(tmp_path, small, capsys, setting):
    argv = ["validate", str(small), "--set", setting]
    assert_rejected(capsys, argv, tmp_path, ["--set", "one value on one line"])


def test_the_same_grid_key_twice_is_refused(tmp_path, small, capsys):
    argv = ["sweep", str(small), "--out", str(tmp_path / "o"), "--grid", "seed=1,2"]
    argv += ["--grid", "seed=3,4"]
    assert_rejected(capsys, argv, tmp_path, ["--grid", "seed", "two --grid"])


def test_the_same_grid_key_twice_in_the_library_is_refused():
    from simspec.errors import InputError
    from simspec.sweep.spec import read_spec

    with pytest.raises(InputError, match="each key once"):
        read_spec({}, "x.toml", ["seed=1,2", "seed=3,4"])


@pytest.mark.parametrize("grid", ["workload.concurrency=", "workload.concurrency= , ", "=1,2"])
def test_an_empty_grid_names_the_flag(tmp_path, small, capsys, grid):
    argv = ["sweep", str(small), "--out", str(tmp_path / "o"), "--grid", grid]
    message = assert_rejected(capsys, argv, tmp_path, ["--grid"])
    assert "sweep.grid" not in message


def test_scheduler_without_dask_is_refused(tmp_path, small, capsys):
    argv = ["sweep", str(small), "--out", str(tmp_path / "o"), "--grid", "seed=1,2"]
    argv += ["--scheduler", "tcp://10.0.0.5:8786"]
    assert_rejected(capsys, argv, tmp_path, ["--scheduler", "--executor dask", "process"])


@pytest.mark.parametrize(
    "address", ["tcp://[::1]:8786", "[fe80::1]:8786", "tls://[2001:db8::5]:8786"]
)
def test_ipv6_scheduler_addresses_are_addresses(address):
    check_scheduler(address)


def test_replications_far_out_of_range_are_refused_at_once(tmp_path, small, capsys):
    started = time.monotonic()
    argv = ["run", str(small), "--replications", "100000000"]
    assert_rejected(capsys, argv, tmp_path, ["--replications", "100000000"])
    assert time.monotonic() - started < 5


def test_work_guard_counts_verified_tree_nodes(tmp_path, capsys, monkeypatch):
    calls = experiments_run(monkeypatch)
    data = scenario(
        {
            "speculation.topk": 64,
            "workload.num_requests": 16,
            "workload.output_tokens": 192,
            "policies": [{"name": "fixed", "draft_tokens": 8}],
        }
    )
    path = write_scenario(tmp_path, data)
    argv = ["run", str(path)]
    assert_rejected(capsys, argv, tmp_path, ["speculation.topk", "tree nodes", "--allow-large"])
    assert calls == []


def _limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _simspec(argv: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kwargs.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "simspec", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        **kwargs,
    )


def test_sweep_beyond_the_file_size_limit_is_one_line(tmp_path, small):
    out = tmp_path / "o"
    argv = ["sweep", str(small), "--out", str(out), "--grid", "seed=1,2", "--workers", "1"]
    done = _simspec(argv, tmp_path, preexec_fn=lambda: _limited(2000))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("simspec: error: ") and "File too large" in last
    assert not [p for p in out.rglob(".*") if ".tmp" in p.name]


def test_run_into_a_full_standard_output_is_one_line(tmp_path, small):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "simspec", "run", str(small)],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert done.stderr.strip() == (
        "simspec: error: standard output: expected room to write, found No space left on device."
    )


def test_non_ascii_name_on_an_ascii_terminal_runs(tmp_path):
    path = write_scenario(tmp_path, scenario({"name": "тест-é"}), "u.toml")
    done = _simspec(["run", str(path)], tmp_path, env={"PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "\\u0442" in done.stdout  # the scenario line escapes what ASCII lacks


FIT_ROWS = (
    "batch,quantity,value,prompt_tokens,output_tokens\n1,tpot_ms,5.0,64,8\n2,tpot_ms,5.5,64,8\n"
)


def test_fit_twice_with_source_date_epoch_writes_the_same_bytes(
    tmp_path, small, capsys, monkeypatch
):
    (tmp_path / "m.csv").write_text(FIT_ROWS)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    written = []
    for name in ("a.json", "b.json"):
        argv = ["fit", str(tmp_path / "m.csv"), "--scenario", str(small), "--out", name]
        monkeypatch.chdir(tmp_path)
        assert main([*argv, "--params", "pass_overhead_s"]) == 0
        written.append((tmp_path / name).read_text())
    a, b = (s.replace("a.json", "X").replace("b.json", "X") for s in written)
    assert a == b and "2023-11-14T22:13:20" in a


def test_fit_with_a_bad_source_date_epoch_is_exit_2(tmp_path, small, capsys, monkeypatch):
    (tmp_path / "m.csv").write_text(FIT_ROWS)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    argv = [
        "fit",
        str(tmp_path / "m.csv"),
        "--scenario",
        str(small),
        "--out",
        str(tmp_path / "p.json"),
    ]
    assert_rejected(capsys, argv, tmp_path, ["SOURCE_DATE_EPOCH", "'yesterday'"])


def _fake_distributed(monkeypatch: pytest.MonkeyPatch, client_error: type | None) -> None:
    """A stand-in for dask.distributed: a client that fails to connect with ``client_error``,
    or one whose results never come because the scheduler went away."""
    import asyncio
    import types

    fake = types.ModuleType("distributed")

    class Client:
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            if client_error is not None:
                raise client_error("no security configuration for this protocol")

        def submit(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return object()

        def close(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return None

    def as_completed(futures):  # type: ignore[no-untyped-def]
        raise asyncio.CancelledError

    fake.Client = Client  # type: ignore[attr-defined]
    fake.LocalCluster = None  # type: ignore[attr-defined]
    fake.as_completed = as_completed  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "distributed", fake)


DASK = ["--grid", "seed=1,2", "--executor", "dask"]


def test_a_scheduler_lost_mid_sweep_is_one_line(tmp_path, small, capsys, monkeypatch):
    _fake_distributed(monkeypatch, None)
    argv = ["sweep", str(small), "--out", str(tmp_path / "o"), *DASK]
    argv += ["--scheduler", "tcp://10.0.0.5:8786"]
    assert_rejected(capsys, argv, tmp_path, ["--scheduler", "lost mid-sweep", "--resume"])


@pytest.mark.parametrize("address", ["tls://10.0.0.5:8786", "ucx://10.0.0.5:8786"])
def test_a_scheduler_protocol_without_its_setup_is_one_line(
    tmp_path, small, capsys, monkeypatch, address
):
    _fake_distributed(monkeypatch, TypeError)
    argv = ["sweep", str(small), "--out", str(tmp_path / "o"), *DASK, "--scheduler", address]
    assert_rejected(capsys, argv, tmp_path, ["--scheduler", address, "no connection"])


def test_a_grid_of_a_billion_points_is_refused_before_building_one(tmp_path, small, capsys):
    started = time.monotonic()
    values = ",".join(str(v) for v in range(1, 1001))
    argv = ["sweep", str(small), "--out", str(tmp_path / "o"), "--grid", f"seed={values}"]
    argv += ["--grid", f"workload.concurrency={values}", "--grid", f"routing.overlap={values}"]
    assert_rejected(capsys, argv, tmp_path, ["sweep.grid", "100,000 points", "1000 (seed)"])
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("command", [["run"], ["compare"], ["recommend", "--batch", "1"]])
def test_a_sweep_table_the_command_ignores_is_named(tmp_path, capsys, command):
    """``run`` of a file with a [sweep] table simulated its base scenario without a word: the
    sweep's points are not run, and the user is told so (the run itself is legitimate)."""
    data = scenario()
    data["sweep"] = {"grid": {"seed": [1, 2]}}
    path = write_scenario(tmp_path, data)
    assert main([command[0], str(path), *command[1:]]) == 0
    err = capsys.readouterr().err
    assert "[sweep] table" in err and f"simspec sweep {path}" in err


def test_no_sweep_note_without_a_sweep_table(tmp_path, capsys):
    path = write_scenario(tmp_path, scenario())
    assert main(["run", str(path)]) == 0
    assert "[sweep]" not in capsys.readouterr().err


def test_a_sweep_over_the_work_limit_is_refused_before_its_points_are_built(
    tmp_path, capsys, monkeypatch
):
    """100,000 points that each simulate the base scenario's work: the guard multiplies, instead
    of validating every point first (about half a minute) and refusing afterwards."""
    import simspec.sweep.spec as spec

    built: list[int] = []
    monkeypatch.setattr(spec, "expand", lambda *a, **k: built.append(1) or [])
    data = scenario({"workload.num_requests": 1000})
    data["sweep"] = {"grid": {"seed": list(range(100_000))}}
    path = write_scenario(tmp_path, data)
    argv = ["sweep", str(path), "--out", str(tmp_path / "o")]
    assert_rejected(capsys, argv, tmp_path, [str(path), "100000 points", "--allow-large"])
    assert built == []


def test_a_sweep_whose_axes_change_the_work_is_still_checked_per_point(tmp_path, capsys):
    """An axis over the workload changes each point's work: the guard then runs on the built
    points, and still refuses."""
    data = scenario()
    data["sweep"] = {"grid": {"workload.num_requests": [2, 1_000_000]}}
    path = write_scenario(tmp_path, data)
    argv = ["sweep", str(path), "--out", str(tmp_path / "o")]
    assert_rejected(capsys, argv, tmp_path, ["--allow-large"])
