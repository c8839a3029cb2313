"""The `simspec` command: output, results JSON, determinism and exit codes."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import subprocess
import sys

import pytest

import simspec
from simspec.cli import COMMANDS, main

# equal lengths (no jitter): the token counts below are exact
SMALL = ["--set", "workload.num_requests=4", "--set", "workload.output_tokens=16"]
SMALL += ["--set", "workload.length_jitter=0"]
LABELS = [f"fixed-{k}" for k in range(9)]  # the default scenario: k = 0..8
ROW_FIELDS = {
    "name",
    "params",
    "tokens_per_s",
    "tpot_ms",
    "ttft_ms",
    "acceptance_length",
    "acceptance_rate",
    "mean_k",
    "verify_over_decode",
    "unique_experts_per_layer",
    "speedup_vs_no_spec",
    "gpu_time_s",
    "requests",
    "tokens",
}
GPU_TIME_FIELDS = {
    "draft",
    "verify_overhead",
    "verify_moe",
    "verify_attention",
    "verify_other",
    "speculation_overhead",
    "prefill",
}

GOOD = """\
name = "tiny"
seed = 3

[workload]
concurrency = 2
num_requests = 2
output_tokens = 8

[[policies]]
name = "fixed"
draft_tokens = 0

[[policies]]
name = "fixed"
draft_tokens = 2
"""


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    """main(argv) in-process: (exit code, stdout, stderr); --help's SystemExit counts as a code."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = 0 if exit_.code is None else exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def not_warnings(err: str) -> list[str]:
    """The lines of ``err`` that are not guardrail warnings (simspec.analysis.guardrails)."""
    return [line for line in err.splitlines() if not line.startswith("simspec: warning: ")]


def assert_input_error(code: int, out: str, err: str, *fragments: str) -> None:
    """Exit 2, one paragraph on stderr naming what went wrong, no traceback."""
    assert code == 2
    assert "Traceback" not in err
    assert err.startswith("simspec: error: ")
    assert err.count("\n") == 1 and err.endswith("\n")
    for fragment in fragments:
        assert fragment in err
    assert "internal error" not in err


def table_rows(out: str) -> dict[str, list[str]]:
    """The policy rows of `simspec run`'s table, by label."""
    return {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("fixed-")}


# -- run ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """`simspec run --json OUT` on the (shrunk) default scenario, once for the module."""
    out_path = tmp_path_factory.mktemp("run") / "out.json"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["run", *SMALL, "--json", str(out_path)])
    return code, stdout.getvalue(), stderr.getvalue(), out_path


def test_run_prints_one_row_per_policy(default_run):
    code, out, err, out_path = default_run
    assert code == 0
    assert (
        not_warnings(err) == []
    )  # at most the guardrails' warnings (tests/commands/test_warnings.py)
    lines = out.splitlines()
    assert lines[0].startswith("scenario default (")
    assert "seed 0: qwen3-30b-a3b + eagle3-qwen3-30b-a3b on 1x h100-sxm, closed loop" in lines[0]
    assert lines[1].split()[0] == "policy"
    rows = table_rows(out)
    assert list(rows) == LABELS
    assert all(len(r) == 9 for r in rows.values())
    # fixed-0 is the baseline: no drafts, speedup 1, verify = decode.
    assert rows["fixed-0"][4:7] == ["1.000", "0.00", "1.000"]
    assert rows["fixed-0"][8] == "1.000"
    assert [rows[label][5] for label in LABELS] == [f"{k}.00" for k in range(9)]
    assert lines[-1] == f"wrote {out_path}"


def test_run_json_has_the_design_fields(default_run):
    code, out, _, out_path = default_run
    assert code == 0
    results = json.loads(out_path.read_text(encoding="utf-8"))
    assert set(results) >= {"scenario", "simspec_version", "seed", "policies"}
    assert results["simspec_version"] == simspec.__version__
    assert results["seed"] == 0
    assert results["scenario"]["name"] == "default"
    assert results["scenario"]["workload"]["num_requests"] == 4
    assert results["scenario"]["workload"]["output_tokens"] == 16
    rows = results["policies"]
    assert [r["label"] for r in rows] == LABELS
    printed = table_rows(out)
    for k, row in enumerate(rows):
        assert set(row) >= ROW_FIELDS, ROW_FIELDS - set(row)
        assert set(row["gpu_time_s"]) >= GPU_TIME_FIELDS
        # (fixed-0's draft time is written as the integer 0: accept any JSON number.)
        assert all(
            isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
            for v in row["gpu_time_s"].values()
        )
        assert row["name"] == "fixed"
        assert row["params"] == {"draft_tokens": k}
        assert row["requests"] == 4
        assert row["tokens"] == 4 * 16
        assert row["mean_k"] == pytest.approx(k)
        assert row["tokens_per_s"] > 0 and row["tpot_ms"] > 0 and row["ttft_ms"] > 0
        assert 0.0 <= row["acceptance_rate"] <= 1.0
        assert 1.0 <= row["acceptance_length"] <= k + 1
        assert row["verify_over_decode"] >= 1.0 - 1e-12
        assert 0 < row["unique_experts_per_layer"] <= 128
        # The table shows the JSON's numbers.
        assert printed[row["label"]][1] == f"{row['tokens_per_s']:.1f}"
        assert printed[row["label"]][8] == f"{row['speedup_vs_no_spec']:.3f}"
    base = rows[0]
    assert base["speedup_vs_no_spec"] == pytest.approx(1.0)
    assert base["acceptance_length"] == pytest.approx(1.0)
    assert base["acceptance_rate"] == 0.0
    assert base["gpu_time_s"]["draft"] == 0.0
    assert rows[4]["gpu_time_s"]["draft"] > rows[1]["gpu_time_s"]["draft"] > 0
    assert rows[2]["acceptance_length"] > 1.0


def test_same_seed_gives_identical_bytes_and_another_seed_does_not(tmp_path, capsys):
    paths = {name: tmp_path / f"{name}.json" for name in ("a", "b", "seed1")}
    assert run_main(capsys, "run", *SMALL, "--json", str(paths["a"]))[0] == 0
    assert run_main(capsys, "run", *SMALL, "--json", str(paths["b"]))[0] == 0
    assert run_main(capsys, "run", *SMALL, "--set", "seed=1", "--json", str(paths["seed1"]))[0] == 0
    a, b, c = (paths[n].read_bytes() for n in ("a", "b", "seed1"))
    assert a == b
    assert a != c
    ra, rc = json.loads(a), json.loads(c)
    assert rc["seed"] == 1
    # Not only the recorded seed differs: the draws do.
    assert [r["acceptance_length"] for r in ra["policies"]] != [
        r["acceptance_length"] for r in rc["policies"]
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "seed1.json"]


def test_failing_run_leaves_existing_output_untouched(tmp_path, capsys):
    out_path = tmp_path / "out.json"
    out_path.write_text("previous results\n", encoding="utf-8")
    code, out, err = run_main(
        capsys, "run", *SMALL, "--set", "routing.overlap=2", "--json", str(out_path)
    )
    assert_input_error(code, out, err, "routing.overlap", "<= 1", "found 2 (integer)")
    assert out_path.read_text(encoding="utf-8") == "previous results\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left
    assert "wrote" not in out


def test_run_a_scenario_file(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(GOOD, encoding="utf-8")
    code, out, err = run_main(capsys, "run", str(path))
    assert code == 0
    # The file sets no routing overlap: one note says it routes independently, nothing else.
    notes = not_warnings(err)
    assert len(notes) == 1 and notes[0].startswith("note: routing.overlap is unset")
    assert out.startswith("scenario tiny (")
    assert "seed 3:" in out
    assert list(table_rows(out)) == ["fixed-0", "fixed-2"]


@pytest.mark.parametrize(
    ("setting", "fragments"),
    [
        ("routing.overlapp=0.5", ("<default scenario>", "routing.overlapp", "unknown key")),
        ("policies[1].draft_tokens=-3", ("policies[1].draft_tokens", "found -3 (integer)")),
        ("policies[9].draft_tokens=3", ("--set", "policies[9].draft_tokens", "existing array")),
        ("workload.loop=half-open", ("workload.loop", "'half-open'")),
        ("seed=-1", ("seed", "found -1 (integer)")),
        ("routing.overlap", ("--set", "key=value")),
        ("model.target=gpt-5", ("model.target", "simspec models")),
    ],
)
def test_bad_set_is_exit_2(capsys, setting, fragments):
    assert_input_error(*run_main(capsys, "run", *SMALL, "--set", setting), *fragments)


# -- validate -----------------------------------------------------------------------------------


def test_validate_good_file(tmp_path, capsys):
    path = tmp_path / "good.toml"
    path.write_text(GOOD, encoding="utf-8")
    code, out, err = run_main(capsys, "validate", str(path))
    assert code == 0
    assert err == ""
    assert out.startswith(f"{path}: ok")
    assert "2 policies" in out
    assert "qwen3-30b-a3b + eagle3-qwen3-30b-a3b on 1x h100-sxm" in out
    # It sets no routing overlap: validate says so before any run, as run does.
    assert "note: routing.overlap is unset" in out
    path.write_text(GOOD + "\n[routing]\noverlap = 0.38\n", encoding="utf-8")
    code, out, _ = run_main(capsys, "validate", str(path))
    assert code == 0 and "routing.overlap is unset" not in out


def test_validate_bad_file(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace("draft_tokens = 2", "draft_tokens = true"), encoding="utf-8")
    code, out, err = run_main(capsys, "validate", str(path))
    assert_input_error(
        code,
        out,
        err,
        str(path),
        "policies[1].draft_tokens",
        "expected an integer",
        "found True (boolean)",
    )
    assert out == ""


def test_validate_with_set(tmp_path, capsys):
    path = tmp_path / "good.toml"
    path.write_text(GOOD, encoding="utf-8")
    assert run_main(capsys, "validate", str(path), "--set", "hardware.gpu=h200")[0] == 0
    code, out, err = run_main(capsys, "validate", str(path), "--set", "hardware.gpu=h300")
    assert_input_error(code, out, err, str(path), "hardware.gpu", "found 'h300'")


def test_validate_missing_file(tmp_path, capsys):
    path = tmp_path / "missing.toml"
    assert_input_error(*run_main(capsys, "validate", str(path)), str(path), "no such file")


def test_validate_syntax_error(tmp_path, capsys):
    path = tmp_path / "broken.toml"
    path.write_text("[routing\noverlap = 0.4\n", encoding="utf-8")
    assert_input_error(*run_main(capsys, "validate", str(path)), str(path), "valid TOML")


def test_subprocess_exit_codes(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(GOOD.replace("[workload]", "[workload]\nconcurrency_ = 4"), encoding="utf-8")
    bad = subprocess.run(
        [sys.executable, "-m", "simspec", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
    assert bad.stderr.count("\n") == 1
    assert str(path) in bad.stderr and "workload.concurrency_" in bad.stderr
    assert bad.stdout == ""
    path.write_text(GOOD, encoding="utf-8")
    good = subprocess.run(
        [sys.executable, "-m", "simspec", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert good.returncode == 0
    assert good.stderr == ""
    assert ": ok" in good.stdout


# -- catalogs, help, usage errors ----------------------------------------------------------------


def test_models(capsys):
    code, out, err = run_main(capsys, "models")
    assert code == 0 and err == ""
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    assert "qwen3-30b-a3b" in rows
    assert rows["qwen3-30b-a3b"][1] == "8/128"
    assert "eagle3-qwen3-30b-a3b" in rows
    assert rows["eagle3-qwen3-30b-a3b"][1:4] == ["eagle3", "8", "qwen3-30b-a3b"]


def test_gpus(capsys):
    code, out, err = run_main(capsys, "gpus")
    assert code == 0 and err == ""
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "h100-sxm" in rows and "h200" in rows
    assert "NVIDIA H100 SXM5 80GB" in rows["h100-sxm"]
    # SMs, GPU link (NVLink through the switch), PCIe, 63 GB/s line x 0.8
    assert rows["h100-sxm"].split()[-6:] == ["132", "450", "switch", "5", "x16", "50.4"]
    assert rows["rtx-4090"].split()[-3:] == ["4", "x16", "25.2"]  # 31.5 GB/s line x 0.8
    assert rows["mi300x"].split()[-5:-3] == ["64", "mesh"]  # one Infinity Fabric link per peer


@pytest.mark.parametrize("command", COMMANDS)
def test_subcommand_help_has_an_example(capsys, command):
    code, out, _ = run_main(capsys, command, "--help")
    assert code == 0
    assert "example:" in out
    assert f"example: {importlib.import_module(f'simspec.commands.{command}').EXAMPLE}" in out
    assert out.startswith(f"usage: simspec {command}")


def test_top_level_help(capsys):
    code, out, _ = run_main(capsys, "--help")
    assert code == 0
    for command in ("run", "validate", "models", "gpus"):
        assert command in out


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["run", "--bogus"], ("command line", "--bogus")),
        (["--bogus"], ("command line", "required: command")),
        ([], ("command line", "required")),
        (["simulate"], ("command line", "'simulate'")),
        (["validate"], ("command line", "scenario")),
        (["run", "--set"], ("command line", "--set")),
    ],
)
def test_usage_errors_are_exit_2(capsys, argv, fragments):
    assert_input_error(*run_main(capsys, *argv), *fragments)


def test_json_into_a_folder_is_exit_2(tmp_path, capsys):
    folder = tmp_path / "out"
    folder.mkdir()
    code, out, err = run_main(capsys, "run", *SMALL, "--json", str(folder))
    assert_input_error(code, out, err, str(folder))


def test_internal_error_is_exit_1_with_traceback(capsys, monkeypatch):
    def boom(*_, **__):
        raise RuntimeError("boom")

    monkeypatch.setattr(
        importlib.import_module("simspec.analysis.experiment"), "run_experiment", boom
    )
    code, _, err = run_main(capsys, "run", *SMALL)
    assert code == 1
    assert "Traceback" in err and "RuntimeError: boom" in err
    assert "internal error" in err


def test_the_program_returns_mains_code_and_freezes_the_collector_for_its_exit(monkeypatch, capsys):
    import gc

    from simspec.cli import run_command

    monkeypatch.setattr(sys, "argv", ["simspec", "--version"])
    try:
        assert run_command() == 0
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert simspec.__version__ in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["simspec", "run", "--no-such-flag"])
    try:
        assert run_command() == 2
    finally:
        gc.unfreeze()


def test_python_m_simspec_is_the_program():
    out = subprocess.run(
        [sys.executable, "-m", "simspec", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and simspec.__version__ in out.stdout, out.stderr
