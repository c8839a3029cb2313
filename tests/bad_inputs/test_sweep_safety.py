"""A sweep folder is the sweep's alone (issue 31, 3-5 and 9): `--out` refuses a folder holding
files no sweep wrote, two sweeps cannot share one folder, and `--resume` re-simulates any point
file whose digest does not match its content and name, so the tables it writes are those of an
uninterrupted sweep.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from simspec.cli import main
from simspec.sweep.lock import MARKER, FolderLock

from .rejects import assert_rejected, points_simulated, scenario, write_scenario

GRID = ["--grid", "seed=1,2,3", "--workers", "1"]


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write_scenario(tmp_path, scenario(), "small.toml")


@pytest.fixture
def done(tmp_path: Path, small: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A finished three-point sweep folder."""
    out = tmp_path / "o"
    assert main(["sweep", str(small), "--out", str(out), *GRID]) == 0
    capsys.readouterr()
    return out


# -- a folder of the user's -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["results.csv", "summary.csv", "notes.txt", "sweep.json"])
def test_out_holding_a_file_of_the_users_is_refused(tmp_path, small, capsys, name):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / name).write_text("my own data\n")
    argv = ["sweep", str(small), "--out", str(mine), *GRID]
    assert_rejected(capsys, argv, tmp_path, ["--out", str(mine), "did not write", name])
    assert sorted(p.name for p in mine.iterdir()) == [name]


def test_out_dot_is_refused(tmp_path, small, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["sweep", "small.toml", "--out", ".", *GRID]
    assert_rejected(capsys, argv, tmp_path, ["--out", "small.toml", MARKER])


def test_out_holding_a_user_folder_is_refused(tmp_path, small, capsys):
    mine = tmp_path / "mine"
    (mine / "data").mkdir(parents=True)
    argv = ["sweep", str(small), "--out", str(mine), *GRID]
    assert_rejected(capsys, argv, tmp_path, ["--out", "data", "did not write"])


def test_an_empty_folder_of_the_users_is_fine(tmp_path, small, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["sweep", str(small), "--out", str(empty), *GRID]) == 0
    assert (empty / MARKER).is_file() and (empty / "results.csv").is_file()


def test_a_failed_sweep_leaves_an_empty_folder_empty(tmp_path, small, capsys, monkeypatch):
    import simspec.sweep.run as run

    def boom(scenario, oracle):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "run_point", boom)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["sweep", str(small), "--out", str(empty), *GRID]) == 130
    assert list(empty.iterdir()) == []


def test_a_sweep_folder_from_before_the_marker_resumes(small, done, capsys, monkeypatch):
    (done / MARKER).unlink()
    calls = points_simulated(monkeypatch)
    argv = ["sweep", str(small), "--out", str(done), "--grid", "seed=1,2,3,4", "--resume"]
    assert main(argv) == 0
    assert calls == [4]


# -- two sweeps, one folder -------------------------------------------------------------------
def test_a_second_sweep_into_a_locked_folder_is_refused(tmp_path, small, capsys):
    out = tmp_path / "o"
    lock = FolderLock.acquire(out)
    try:
        argv = ["sweep", str(small), "--out", str(out), *GRID]
        message = assert_rejected(capsys, argv, tmp_path, ["--out", str(out), "in use"])
        assert "process" in message  # names the sweep that holds it
    finally:
        lock.release(undo=True)
    assert not out.exists()


def test_a_locked_folder_refuses_resume_too(tmp_path, small, done, capsys):
    lock = FolderLock.acquire(done)
    try:
        argv = ["sweep", str(small), "--out", str(done), *GRID, "--resume"]
        assert_rejected(capsys, argv, tmp_path, ["--out", "in use", "another --out"])
    finally:
        lock.release()


def test_the_lock_goes_with_the_sweep(tmp_path, small, done, capsys):
    assert main(["sweep", str(small), "--out", str(done), *GRID, "--resume"]) == 0
    lock = FolderLock.acquire(done)  # free again
    lock.release()


# -- tamper-evident resume --------------------------------------------------------------------
def _policies(record: dict) -> list[dict]:  # type: ignore[type-arg]
    return record["results"]["policies"]


def _edit_tpot(record: dict) -> None:  # type: ignore[type-arg]
    _policies(record)[0]["tpot_ms"] = 999.0


def _negative_rate(record: dict) -> None:  # type: ignore[type-arg]
    _policies(record)[-1]["tokens_per_s"] = -5.0


def _drop_policies(record: dict) -> None:  # type: ignore[type-arg]
    del _policies(record)[1:]


def _nan_value(record: dict) -> None:  # type: ignore[type-arg]
    _policies(record)[0]["tpot_ms"] = math.nan


def _drop_digest(record: dict) -> None:  # type: ignore[type-arg]
    record.pop("digest")


def _reseal_wrong(record: dict) -> None:  # type: ignore[type-arg]
    _policies(record)[0]["ttft_ms"] = 1.0
    record["digest"] = "0" * 64


EDITS = {
    "tpot edited to 999": _edit_tpot,
    "negative tokens per s": _negative_rate,
    "policies emptied": _drop_policies,
    "a NaN": _nan_value,
    "digest removed": _drop_digest,
    "digest forged": _reseal_wrong,
}


@pytest.mark.parametrize("edit", sorted(EDITS), ids=sorted(EDITS))
def test_an_edited_point_is_simulated_again(small, done, capsys, monkeypatch, edit):
    tables = {n: (done / n).read_bytes() for n in ("results.csv", "summary.csv")}
    path = sorted((done / "points").glob("*.json"))[1]
    record = json.loads(path.read_text())
    EDITS[edit](record)
    path.write_text(json.dumps(record, indent=2) + "\n")
    calls = points_simulated(monkeypatch)
    assert main(["sweep", str(small), "--out", str(done), *GRID, "--resume"]) == 0
    assert len(calls) == 1
    assert str(path) in capsys.readouterr().err  # the point file is named
    for name, data in tables.items():
        assert (done / name).read_bytes() == data, name


def test_swapped_point_files_are_both_simulated_again(small, done, capsys, monkeypatch):
    tables = (done / "results.csv").read_bytes()
    a, b = sorted((done / "points").glob("*.json"))[:2]
    text_a, text_b = a.read_text(), b.read_text()
    a.write_text(text_b)
    b.write_text(text_a)
    calls = points_simulated(monkeypatch)
    assert main(["sweep", str(small), "--out", str(done), *GRID, "--resume"]) == 0
    assert len(calls) == 2
    assert (done / "results.csv").read_bytes() == tables


def test_intact_points_are_not_simulated_again(small, done, capsys, monkeypatch):
    calls = points_simulated(monkeypatch)
    assert main(["sweep", str(small), "--out", str(done), *GRID, "--resume"]) == 0
    assert calls == []


# -- sweep files replaced by folders ----------------------------------------------------------
@pytest.mark.parametrize("name", ["results.csv", "summary.csv", "sweep.json"])
def test_a_table_replaced_by_a_folder_is_exit_2(tmp_path, small, done, capsys, name):
    (done / name).unlink()
    (done / name).mkdir()
    argv = ["sweep", str(small), "--out", str(done), *GRID, "--resume"]
    assert_rejected(capsys, argv, tmp_path, ["--out", name, "regular file"])


def test_a_point_replaced_by_a_folder_is_exit_2(tmp_path, small, done, capsys):
    path = sorted((done / "points").glob("*.json"))[0]
    path.unlink()
    path.mkdir()
    argv = ["sweep", str(small), "--out", str(done), *GRID, "--resume"]
    assert_rejected(capsys, argv, tmp_path, ["--out", path.name, "regular files"])
    assert path.is_dir()


def test_summary_has_no_nan_cells(done):
    import csv

    text = (done / "summary.csv").read_text()
    assert "nan" not in text.lower()
    rows = list(csv.DictReader(text.splitlines()))
    assert rows and any(v == "" for row in rows for v in row.values())  # a missing statistic
    for row in rows:
        for value in row.values():
            if value and value[0].isdigit():
                assert math.isfinite(float(value))


@pytest.mark.parametrize("edit", ["tpot edited to 999", "a NaN", "digest forged", "digest removed"])
def test_plot_of_an_edited_sweep_is_exit_2(tmp_path, done, capsys, edit):
    path = sorted((done / "points").glob("*.json"))[0]
    record = json.loads(path.read_text())
    EDITS[edit](record)
    path.write_text(json.dumps(record, indent=2) + "\n")
    argv = ["plot", str(done), "--out", str(tmp_path / "figs")]
    assert_rejected(capsys, argv, tmp_path, [str(path)])


def test_a_name_too_long_below_a_new_folder_leaves_nothing(tmp_path, small, capsys):
    out = tmp_path / "new" / ("d" * 300)
    argv = ["sweep", str(small), "--out", str(out), *GRID]
    assert_rejected(capsys, argv, tmp_path, ["--out", "too long"])
    assert not (tmp_path / "new").exists()


def _swap_values(manifest: dict) -> None:  # type: ignore[type-arg]
    first, second = manifest["points"][:2]
    first["values"], second["values"] = second["values"], first["values"]


def _repeat_row(manifest: dict) -> None:  # type: ignore[type-arg]
    manifest["points"].append(manifest["points"][0])


def _drop_row(manifest: dict) -> None:  # type: ignore[type-arg]
    del manifest["points"][1]


def _escape_folder(manifest: dict) -> None:  # type: ignore[type-arg]
    manifest["points"][0]["digest"] = "../../small"


MANIFEST_EDITS = {
    "labels swapped": _swap_values,
    "a row repeated": _repeat_row,
    "a row dropped": _drop_row,
    "a digest leaving the folder": _escape_folder,
}


@pytest.mark.parametrize("edit", sorted(MANIFEST_EDITS), ids=sorted(MANIFEST_EDITS))
@pytest.mark.parametrize("reseal", [False, True], ids=["as edited", "digest recomputed"])
def test_plot_of_an_edited_manifest_is_exit_2(tmp_path, done, capsys, edit, reseal):
    """``sweep.json`` lists the rows a figure draws: a row swapped, repeated, dropped or pointed
    outside the folder would draw a wrong figure. Its seal catches an edit; with the seal
    recomputed, each entry must still agree with the sealed point file it names, and every
    point file of the folder must be listed."""
    from simspec.sweep.points import manifest_digest

    if reseal and edit == "a row repeated":
        pytest.skip("a grid may list a value twice (two identical rows): nothing to tell apart")
    path = done / "sweep.json"
    manifest = json.loads(path.read_text())
    MANIFEST_EDITS[edit](manifest)
    if reseal:
        manifest["digest"] = manifest_digest(manifest["points"])
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    argv = ["plot", str(done), "--out", str(tmp_path / "figs")]
    assert_rejected(capsys, argv, tmp_path, ["sweep.json"])


def test_resume_rewrites_an_edited_manifest(tmp_path, small, done, capsys):
    path = done / "sweep.json"
    good = path.read_bytes()
    manifest = json.loads(good)
    _swap_values(manifest)
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    assert main(["sweep", str(small), "--out", str(done), *GRID, "--resume"]) == 0
    assert path.read_bytes() == good
    assert main(["plot", str(done), "--out", str(tmp_path / "figs")]) == 0
