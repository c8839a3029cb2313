"""Sweep folders are inputs too (issue 13, 5 and 6): resume, broken points, leftovers, `plot DIR`.

A resumed folder must hold points of the same sweep (another scenario or `--set` would mix
points: refused, naming the differing key); a truncated or empty point file is simulated again;
a `points` file, an orphan temporary file and a sweep that failed before writing anything are
handled before or without simulating; `plot DIR` on broken files is exit 2 with a message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simspec.cli import main
from simspec.sweep.points import point_path, read_sweep

from .rejects import assert_rejected, points_simulated, scenario, write_scenario

GRID = ["--grid", "seed=1,2", "--workers", "1"]


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write_scenario(tmp_path, scenario(), "small.toml")


@pytest.fixture
def done(tmp_path: Path, small: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A finished two-point sweep folder."""
    out = tmp_path / "o"
    assert main(["sweep", str(small), "--out", str(out), *GRID]) == 0
    capsys.readouterr()
    return out


def test_resume_with_other_set_is_refused_naming_the_key(tmp_path, small, done, capsys):
    argv = ["sweep", str(small), "--out", str(done), *GRID, "--resume"]
    argv += ["--set", "routing.overlap=0.5"]
    message = assert_rejected(capsys, argv, tmp_path, ["--resume", str(done), "routing.overlap"])
    assert "0.38" in message and "0.5" in message


def test_resume_with_another_scenario_is_refused(tmp_path, done, capsys):
    other = write_scenario(tmp_path, scenario({"acceptance.alpha": 0.6}), "other.toml")
    argv = ["sweep", str(other), "--out", str(done), *GRID, "--resume"]
    assert_rejected(capsys, argv, tmp_path, ["--resume", "acceptance.alpha", "expected"])


def test_resume_of_the_same_sweep_with_a_wider_grid_is_fine(small, done, capsys, monkeypatch):
    calls = points_simulated(monkeypatch)
    argv = ["sweep", str(small), "--out", str(done), "--grid", "seed=1,2,3", "--resume"]
    assert main(argv) == 0
    assert calls == [3]  # only the new point ran
    assert len(read_sweep(done)) == 3


@pytest.mark.parametrize("content", ["", '{"case": "", "values": {"seed": 1}, "repl'])
def test_truncated_or_empty_point_is_simulated_again(small, done, capsys, monkeypatch, content):
    before = (done / "results.csv").read_bytes()
    broken = sorted((done / "points").glob("*.json"))[0]
    broken.write_text(content)
    calls = points_simulated(monkeypatch)
    assert main(["sweep", str(small), "--out", str(done), *GRID, "--resume"]) == 0
    assert len(calls) == 1
    json.loads(broken.read_text())  # rewritten whole
    assert (done / "results.csv").read_bytes() == before  # same bytes as the first run


def test_points_being_a_file_is_refused_before_simulating(tmp_path, small, capsys, monkeypatch):
    out = tmp_path / "o"
    out.mkdir()
    (out / "points").write_text("not a folder")
    calls = points_simulated(monkeypatch)
    argv = ["sweep", str(small), "--out", str(out), *GRID]
    assert_rejected(capsys, argv, tmp_path, ["--out", "points", "a file"])
    assert calls == []


def test_out_being_a_file_is_refused(tmp_path, small, capsys, monkeypatch):
    out = tmp_path / "o"
    out.write_text("x")
    calls = points_simulated(monkeypatch)
    assert_rejected(capsys, ["sweep", str(small), "--out", str(out), *GRID], tmp_path, ["--out"])
    assert calls == []


def test_orphan_temporary_files_are_removed_on_resume(small, done, capsys):
    orphans = [
        done / "points" / ".0123456789ab.json.k1l2m3.tmp.json",
        done / ".results.csv.abc123.tmp.csv",
    ]
    (done / "delta").mkdir()
    orphans.append(done / "delta" / ".0123456789ab.npz.x.tmp.npz")
    for orphan in orphans:
        orphan.write_text("half")
    keep = done / "notes.txt"
    keep.write_text("mine")
    assert main(["sweep", str(small), "--out", str(done), *GRID, "--resume"]) == 0
    assert not any(p.exists() for p in orphans)
    assert keep.read_text() == "mine"


def test_failed_dask_sweep_leaves_no_folder(tmp_path, small, capsys, monkeypatch):
    pytest.importorskip("distributed")
    import simspec.sweep.run as run

    monkeypatch.setattr(run, "CONNECT_TIMEOUT_S", 1)
    out = tmp_path / "new" / "o"
    argv = ["sweep", str(small), "--out", str(out), "--grid", "seed=1,2", "--executor", "dask"]
    argv += ["--scheduler", "tcp://127.0.0.1:1"]
    assert_rejected(capsys, argv, tmp_path, ["--scheduler", "tcp://127.0.0.1:1", "within 1 s"])
    assert not (tmp_path / "new").exists()


def test_failed_sweep_removes_the_folder_it_created(tmp_path, small, capsys, monkeypatch):
    import simspec.sweep.run as run

    def boom(scenario, oracle):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "run_point", boom)
    out = tmp_path / "o"
    assert main(["sweep", str(small), "--out", str(out), *GRID]) == 130
    assert not out.exists()


@pytest.mark.parametrize(
    ("target", "content", "found"),
    [
        ("sweep.json", b"\x00\xff\xfe binary \x80", "non-UTF-8"),
        ("sweep.json", b"", "invalid JSON"),
        ("sweep.json", b'{"points": [{"case": ""}]}', "no key"),
        ("sweep.json", b'{"columns": []}', "no key 'points'"),
        ("point", b"\x89PNG\x00\xff", "non-UTF-8"),
        ("point", b"", "invalid JSON"),
        ("point", b'{"results": {"policies": 3}}', "a sweep point file"),
        ("point", b"[" * 100_000 + b"]" * 100_000, "a sweep point file"),
    ],
)
def test_plot_of_a_broken_folder_is_exit_2(tmp_path, done, capsys, target, content, found):
    path = sorted((done / "points").glob("*.json"))[0] if target == "point" else done / target
    path.write_bytes(content)
    argv = ["plot", str(done), "--out", str(tmp_path / "figs")]
    message = assert_rejected(capsys, argv, tmp_path, [str(path), "expected", found])
    assert len(message) < 400  # a paragraph, not a dump of the bytes


def test_point_path_is_the_digest(done):
    names = sorted(p.name for p in (done / "points").glob("*.json"))
    digests = [json.loads((done / "sweep.json").read_text())["points"][i]["digest"] for i in (0, 1)]
    assert names == sorted(point_path(done, d).name for d in digests)
