"""Output paths (issue 13, 1 and 6): special files survive, `-` is stdout, bad paths exit 2 early.

The atomic writer renames a temporary file over its target; done to a FIFO, a device or a symlink
to one, that would replace it with a regular file. These tests write through the CLI and check
that the special file is still what it was (and that a FIFO's reader received the JSON), and
that an output path that cannot be written is refused before any simulation.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import numpy as np
import pytest

from simspec.cli import main
from simspec.io.atomic import write_atomic

from .rejects import assert_rejected, experiments_run, scenario, write_scenario


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write_scenario(tmp_path, scenario(), "small.toml")


def test_json_into_a_fifo_reaches_its_reader_and_the_fifo_stays(tmp_path, small, capsys):
    fifo = tmp_path / "results.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main(["run", str(small), "--json", str(fifo)]) == 0
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    data = json.loads(got[0])
    assert [p["name"] for p in data["policies"]][-2:] == ["fixed", "fixed"]
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_json_into_a_symlink_to_dev_null_keeps_the_link(tmp_path, small, capsys):
    link = tmp_path / "null.json"
    link.symlink_to("/dev/null")
    assert main(["run", str(small), "--json", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == "/dev/null"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null.json", "small.toml"]


def test_json_dash_is_stdout_alone(tmp_path, small, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(small), "--json", "-"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)  # stdout holds the JSON and nothing else
    assert data["seed"] == 7 and len(data["policies"]) >= 2
    assert "fixed-2" in err  # the table moved to stderr
    assert not (tmp_path / "-").exists()


def test_write_atomic_follows_a_symlink_to_a_regular_file(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_write_atomic_callback_into_a_fifo(tmp_path):
    fifo = tmp_path / "arrays.npz"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_atomic(fifo, lambda tmp: np.savez(tmp, x=np.arange(3)))
    reader.join(timeout=10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got[0][:2] == b"PK"  # a zip archive went through the FIFO


@pytest.mark.parametrize(
    ("flag", "path", "found"),
    [
        ("--json", "/proc/x/results.json", "/proc"),
        ("--json", "/sys/kernel/x", "/sys/kernel"),
        ("--json", "{tmp}/small.toml/x.json", "a file"),
        ("--json", "{tmp}", "an existing folder"),
    ],
)
def test_run_refuses_unwritable_json_before_simulating(
    tmp_path, small, capsys, monkeypatch, flag, path, found
):
    calls = experiments_run(monkeypatch)
    target = path.format(tmp=tmp_path)
    assert_rejected(capsys, ["run", str(small), flag, target], tmp_path, [flag, target, found])
    assert calls == []


def test_compare_plot_onto_a_file_is_refused_before_comparing(tmp_path, small, capsys, monkeypatch):
    calls = experiments_run(monkeypatch)
    existing = tmp_path / "figs"
    existing.write_text("not a folder")
    argv = ["compare", str(small), "--plot", str(existing)]
    assert_rejected(capsys, argv, tmp_path, ["--plot", str(existing), "a folder", "existing file"])
    assert calls == []


def test_sweep_out_under_proc_is_refused(tmp_path, small, capsys):
    argv = ["sweep", str(small), "--out", "/proc/sweep-here", "--grid", "seed=1,2"]
    assert_rejected(capsys, argv, tmp_path, ["--out", "/proc/sweep-here", "writable"])


def test_plot_out_under_proc_is_refused(tmp_path, capsys):
    argv = ["plot", str(tmp_path), "--out", "/proc/figs"]
    assert_rejected(capsys, argv, tmp_path, ["--out", "/proc/figs", "/proc"])


def test_routing_predict_plot_under_proc_is_refused(tmp_path, capsys):
    argv = ["routing", "predict", "--model", "qwen3-30b-a3b", "--plot", "/proc/u.png"]
    assert_rejected(capsys, argv, tmp_path, ["--plot", "/proc/u.png", "writable folder"])


def test_json_to_dev_full_is_exit_2_not_a_renamed_device(tmp_path, small, capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    code = main(["run", str(small), "--json", "/dev/full"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "--json" in err and "/dev/full" in err
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_compare_plot_that_fails_midway_leaves_no_folder(tmp_path, small, capsys, monkeypatch):
    """A full disk while the second figure is written: the folder compare made is gone."""
    import errno

    from simspec.plots import policies

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(policies, "delta_space", full_disk)
    figs = tmp_path / "figs"
    code = main(["compare", str(small), "--plot", str(figs)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "No space left" in err or "space" in err
    assert not figs.exists()
