"""Nothing a user owns is overwritten (issue 31, 1-3 and 8): an output that is an input, two
outputs on one path, an empty path, a symlink loop or a name the system refuses exit 2 before
any work, and every file is left as it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simspec.cli import main
from simspec.io.atomic import write_atomic

from .rejects import assert_rejected, experiments_run, scenario, write_scenario

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "calibration" / "h100-sxm-analytic.json"
MEASUREMENTS = "batch,quantity,value,prompt_tokens,output_tokens\n1,tpot_ms,5.0,64,8\n"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch folder holding s.toml, the working folder of the test."""
    write_scenario(tmp_path, scenario(), "s.toml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- an output that is an input ---------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["run", "s.toml", "--json", "s.toml"],
        ["run", "s.toml", "--format", "csv", "--output", "s.toml"],
        ["run", "s.toml", "--trace-out", "s.toml"],
        ["run", "s.toml", "--requests-csv", "s.toml"],
        ["run", "s.toml", "--json", "./s.toml"],
        ["compare", "s.toml", "--json", "s.toml"],
        ["compare", "s.toml", "--format", "json", "--output", "s.toml"],
        ["recommend", "s.toml", "--batch", "1", "--json", "s.toml"],
        ["recommend", "s.toml", "--batch", "1", "--markdown", "s.toml"],
    ],
    ids=lambda a: " ".join(a[3:]) + f" ({a[0]})",
)
def test_output_onto_the_scenario_is_refused(here, capsys, monkeypatch, argv):
    calls = experiments_run(monkeypatch)
    path = argv[-1]
    assert_rejected(capsys, argv, here, [path, "no input", "scenario"])
    assert calls == []


def test_output_onto_a_hard_link_of_the_scenario_is_refused(here, capsys):
    os.link(here / "s.toml", here / "same.json")
    argv = ["run", "s.toml", "--json", "same.json"]
    assert_rejected(capsys, argv, here, ["--json", "same.json", "scenario s.toml"])


def test_output_onto_a_symlink_to_the_scenario_is_refused(here, capsys):
    (here / "link.json").symlink_to(here / "s.toml")
    argv = ["run", "s.toml", "--json", "link.json"]
    assert_rejected(capsys, argv, here, ["--json", "link.json", "scenario"])


@pytest.mark.parametrize("flag", ["--json", "--trace-out", "--requests-csv"])
def test_output_onto_the_scenarios_profile_is_refused(here, capsys, flag):
    shutil.copy(PROFILE, here / "p.json")
    write_scenario(here, scenario({"costs.profile": "p.json"}), "s.toml")
    argv = ["run", "s.toml", flag, "p.json"]
    assert_rejected(capsys, argv, here, [flag, "p.json", "costs.profile"])


def test_output_onto_a_profile_set_with_set_is_refused(here, capsys):
    shutil.copy(PROFILE, here / "p.json")
    argv = ["run", "s.toml", "--set", "costs.profile='p.json'", "--json", "p.json"]
    assert_rejected(capsys, argv, here, ["--json", "p.json", "costs.profile"])


@pytest.mark.parametrize("out", ["m.csv", "s.toml"])
def test_fit_out_onto_its_inputs_is_refused(here, capsys, out):
    (here / "m.csv").write_text(MEASUREMENTS, encoding="utf-8")
    argv = ["fit", "m.csv", "--scenario", "s.toml", "--out", out]
    assert_rejected(capsys, argv, here, ["--out", out, "no input"])


def test_calibrate_refit_onto_the_profile_it_reads_is_refused(here, capsys):
    shutil.copy(PROFILE, here / "p.json")
    argv = ["calibrate", "--refit", "p.json", "--out", "p.json"]
    assert_rejected(capsys, argv, here, ["--out", "p.json", "no input", "measured profile"])


@pytest.mark.parametrize("out", ["prompts.txt", "model/config.json"])
def test_record_out_onto_its_prompts_or_model_files_is_refused(here, capsys, out):
    (here / "prompts.txt").write_text("Why is the sky blue?\n", encoding="utf-8")
    (here / "model").mkdir()
    (here / "model" / "config.json").write_text("{}", encoding="utf-8")
    argv = ["record", "--model", "model", "--prompts", "prompts.txt", "--out", out]
    assert_rejected(capsys, argv, here, ["--out", out, "no input"])


# -- two outputs on one path ------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["run", "s.toml", "--json", "x.out", "--format", "csv", "--output", "x.out"],
        ["run", "s.toml", "--json", "x.out", "--requests-csv", "x.out"],
        ["run", "s.toml", "--json", "x.out", "--trace-out", "x.out"],
        ["run", "s.toml", "--trace-out", "x.out", "--requests-csv", "./x.out"],
        ["run", "s.toml", "--json", "-", "--trace-out", "-"],
        ["run", "s.toml", "--json", "-", "--requests-csv", "-"],
        ["run", "s.toml", "--format", "csv", "--trace-out", "-"],
        ["compare", "s.toml", "--json", "figs/policies.png", "--plot", "figs"],
        ["compare", "s.toml", "--trace-out", "figs/delta-space.png", "--plot", "figs"],
        ["recommend", "s.toml", "--batch", "1", "--markdown", "x.out", "--json", "x.out"],
        [
            "recommend",
            "s.toml",
            "--engine-flags",
            "k",
            "--batch",
            "1",
            "--json",
            "f/speedup-vs-k-b1.png",
            "--plot",
            "f",
        ],
    ],
    ids=lambda a: " ".join(a[2:]) + f" ({a[0]})",
)
def test_two_outputs_on_one_path_are_refused(here, capsys, monkeypatch, argv):
    calls = experiments_run(monkeypatch)
    assert_rejected(capsys, argv, here, ["no other output"])
    assert calls == []


def test_two_outputs_through_a_symlink_are_refused(here, capsys):
    (here / "x.out").write_text("mine")
    (here / "y.out").symlink_to(here / "x.out")
    argv = ["run", "s.toml", "--json", "x.out", "--trace-out", "y.out"]
    assert_rejected(capsys, argv, here, ["--trace-out", "y.out", "--json"])


def test_several_outputs_may_share_dev_null(here, capsys):
    argv = ["run", "s.toml", "--json", "/dev/null", "--format", "csv", "--output", "/dev/null"]
    assert main(argv) == 0


# -- empty names, symlink loops, names too long -----------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["run", "s.toml", "--json", ""],
        ["run", "s.toml", "--format", "csv", "--output", ""],
        ["run", "s.toml", "--trace-out", ""],
        ["run", "s.toml", "--requests-csv", ""],
        ["compare", "s.toml", "--plot", ""],
        ["sweep", "s.toml", "--out", "", "--grid", "seed=1,2"],
        ["recommend", "s.toml", "--batch", "1", "--json", ""],
    ],
    ids=lambda a: f"{a[0]} {a[-2] if a[0] != 'sweep' else '--out'}",
)
def test_an_empty_output_path_is_refused(here, capsys, monkeypatch, argv):
    calls = experiments_run(monkeypatch)
    assert_rejected(capsys, argv, here, ["an empty string"])
    assert calls == []


@pytest.mark.parametrize("flag", ["--json", "--trace-out", "--requests-csv"])
def test_a_symlink_loop_as_output_is_refused_and_kept(here, capsys, flag):
    (here / "l1").symlink_to("l2")
    (here / "l2").symlink_to("l1")
    assert_rejected(capsys, ["run", "s.toml", flag, "l1"], here, [flag, "l1", "symlink loop"])
    assert (here / "l1").is_symlink() and os.readlink(here / "l1") == "l2"


def test_a_link_to_itself_as_output_is_refused(here, capsys):
    (here / "self").symlink_to("self")
    argv = ["run", "s.toml", "--format", "csv", "--output", "self"]
    assert_rejected(capsys, argv, here, ["--output", "self", "symlink loop"])
    assert os.readlink(here / "self") == "self"


def test_write_atomic_refuses_a_symlink_loop(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OSError):
        write_atomic(tmp_path / "a", "text")
    assert os.readlink(tmp_path / "a") == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


@pytest.mark.parametrize("flag", ["--json", "--trace-out", "--requests-csv"])
def test_a_name_too_long_is_exit_2(here, capsys, flag):
    name = "n" * 300 + ".json"
    assert_rejected(capsys, ["run", "s.toml", flag, name], here, [flag, "too long"])


def test_a_folder_name_too_long_is_exit_2(here, capsys):
    argv = ["compare", "s.toml", "--plot", "d" * 300]
    assert_rejected(capsys, argv, here, ["--plot", "too long"])


@pytest.mark.parametrize("plot", ["trace.npz", "./trace.npz", ""])
def test_routing_stats_plot_onto_its_trace_is_refused(tmp_path, capsys, plot, monkeypatch):
    import numpy as np

    monkeypatch.chdir(tmp_path)
    ids = np.array([[[0, 1]], [[1, 2]], [[2, 3]]], dtype=np.int64)
    np.savez(tmp_path / "trace.npz", expert_ids=ids, num_experts=np.array(8, dtype=np.int64))
    argv = ["routing", "stats", "trace.npz", "--plot", plot]
    assert_rejected(capsys, argv, tmp_path, ["--plot"])


# -- an output that is where standard output or error goes -------------------------------------
def _simspec(args: list[str], cwd: Path, **streams: object) -> subprocess.CompletedProcess[str]:
    """``simspec ARGS`` in a child process (its standard streams are what the test says)."""
    return subprocess.run(
        [sys.executable, "-m", "simspec", *args],
        cwd=cwd,
        text=True,
        timeout=120,
        check=False,
        **streams,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("path", ["out.txt", "/dev/stdout", "/proc/self/fd/1"])
def test_an_output_onto_the_file_stdout_goes_to_is_refused(here, path):
    """Written atomically, the output would replace the file the shell redirected standard
    output to, and everything simspec printed there would be lost."""
    with open(here / "out.txt", "w", encoding="utf-8") as out:
        done = _simspec(["run", "s.toml", "--json", path], here, stdout=out, stderr=subprocess.PIPE)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert path in done.stderr and "standard output" in done.stderr
    assert (here / "out.txt").read_text(encoding="utf-8") == ""
    assert sorted(p.name for p in here.iterdir()) == ["out.txt", "s.toml"]


def test_dev_stdout_into_a_pipe_with_other_data_is_refused(here):
    """``--json /dev/stdout --format csv | ...`` would interleave two outputs in the pipe."""
    argv = ["run", "s.toml", "--json", "/dev/stdout", "--format", "csv"]
    done = _simspec(argv, here, capture_output=True)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and "/dev/stdout" in done.stderr and "'-'" in done.stderr


def test_an_output_onto_the_file_stderr_goes_to_is_refused(here):
    with open(here / "err.txt", "w", encoding="utf-8") as err:
        done = _simspec(
            ["run", "s.toml", "--json", "err.txt"],
            here,
            capture_output=False,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    assert done.returncode == 2
    text = (here / "err.txt").read_text(encoding="utf-8")
    assert "err.txt" in text and "standard error" in text and "Traceback" not in text


def test_outputs_into_dev_null_with_stdout_there_are_fine(here):
    argv = ["run", "s.toml", "--json", "/dev/null", "--format", "csv", "--output", "/dev/null"]
    with open(os.devnull, "w", encoding="utf-8") as null:
        done = _simspec(argv, here, stdout=null, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr


def test_routing_predict_with_an_empty_plot_name_is_refused(here, capsys):
    argv = ["routing", "predict", "--model", "qwen3-30b-a3b", "--plot", ""]
    assert_rejected(capsys, argv, here, ["--plot", "an empty string"])


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "s.toml", "--plot", "figs", "--json", "figs"],
        ["run", "s.toml", "--json", "a", "--trace-out", "a/b.json"],
        ["run", "s.toml", "--json", "a/b.json", "--trace-out", "a"],
        ["run", "s.toml", "--json", "a", "--requests-csv", "./a/../a/r.csv"],
    ],
    ids=lambda a: " ".join(a[2:]),
)
def test_an_output_inside_another_output_file_is_refused(here, capsys, monkeypatch, argv):
    """``--json figs --plot figs`` wrote the JSON, then failed to make the folder: a traceback
    after the whole simulation (exit 1), leaving one of the outputs behind."""
    calls = experiments_run(monkeypatch)
    assert_rejected(capsys, argv, here, ["inside", "another output"])
    assert calls == []


def test_outputs_side_by_side_in_one_folder_are_fine(here):
    argv = ["compare", "s.toml", "--plot", "figs", "--json", "figs/results.json"]
    assert main(argv) == 0
    assert (here / "figs" / "results.json").is_file() and (here / "figs" / "policies.png").is_file()
