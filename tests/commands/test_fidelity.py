"""`simspec fidelity`: a small cases file end to end, and bad input (exit 2, no traceback)."""

from __future__ import annotations

import json

import pytest

from simspec.cli import main

CASES = """
[sources.s]
url = "https://example.org"
title = "a test source"

[[cases]]
id = "kern"
category = "kernel"
model = "qwen3-30b-a3b"
gpu = "h100-sxm"
num_gpus = 1
tp = 1
ep = 1
engine = "vLLM benchmark_moe.py"
precision = "bf16"
tokens = [1, 8]
quantity = "moe_layer_us"
unit = "us"
value = [60.0, 150.0]
source = "s"
reporter = "r"

[[cases]]
id = "dec"
category = "decode"
model = "qwen3-30b-a3b"
gpu = "h100-sxm"
num_gpus = 1
tp = 1
ep = 1
engine = "vLLM"
precision = "bf16"
batch = 1
prompt_tokens = 64
output_tokens = 8
quantity = "tpot_ms"
unit = "ms"
value = 5.0
source = "s"
reporter = "r"
"""


@pytest.fixture
def cases(tmp_path):
    path = tmp_path / "cases.toml"
    path.write_text(CASES, encoding="utf-8")
    return path


def test_fidelity_writes_the_report_and_the_summary(cases, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["fidelity", "--cases", str(cases), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "kernel: 2 of 2 rows predicted" in printed
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["kernel"]["predicted_rows"] == 2
    assert summary["decode"]["predicted_rows"] == 1
    assert summary["speculative"]["rows"] == 0
    report = (out / "REPORT.md").read_text(encoding="utf-8")
    assert "| dec | qwen3-30b-a3b |" in report and "| kern[1] |" in report
    assert "No fit yet" in report  # no preset_fit.json in the output folder
    # The median error in the summary is the report's rows' error: recompute one.
    decode_error = summary["decode"]["median_abs_relative_error"]
    assert decode_error is not None and decode_error >= 0


def test_a_cases_file_of_ones_own_is_held_out_from_the_shipped_numbers(cases, tmp_path):
    """Rows the shipped presets and kernel constants never saw are summarised apart, as out of
    sample as they stand; the report names the file it was written from and how to rewrite it."""
    out = tmp_path / "out"
    assert main(["fidelity", "--cases", str(cases), "--out", str(out), "--in-sample-only"]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["cases_file"] == f"{cases.parent.name}/cases.toml"
    for category in ("kernel", "decode"):  # every row is one the shipped numbers never saw
        assert summary["not_fitted"][category] == summary[category]
    report = (out / "REPORT.md").read_text(encoding="utf-8")
    assert f"from `{cases.parent.name}/cases.toml`" in report
    assert f"`simspec fidelity --cases {cases.parent.name}/cases.toml` regenerates" in report
    assert "Held out by construction" in report and "fitted on none of these rows" in report
    nested = tmp_path / "nested"  # with the nested refits, which fit on this file's rows alone
    assert main(["fidelity", "--cases", str(cases), "--out", str(nested)]) == 0
    report = (nested / "REPORT.md").read_text(encoding="utf-8")
    first = report.index("Held out by construction")
    assert first < report.index("Nested leave-one-group-out within this file")


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["--cases", "missing.toml"], "missing.toml"),
        (["--catalog", "x"], "--catalog"),
        (["--without", "pass_overhead_s"], "--without"),
        (["--fit-presets", "--without", "nonsense"], "--without"),
        (["--workers", "0"], "--workers"),
        (["--accuracy", "a.json", "--in-sample-only"], "--accuracy"),
        (["--accuracy", "-"], "--accuracy"),
    ],
)
def test_bad_input_exits_2_naming_the_flag_or_file(args, where, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["fidelity", *args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert where in err and "Traceback" not in err


def test_a_bad_cases_file_names_the_key_path(cases, tmp_path, capsys):
    cases.write_text(CASES.replace('gpu = "h100-sxm"', 'gpu = "h900"', 1), encoding="utf-8")
    assert main(["fidelity", "--cases", str(cases), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "cases[0].gpu" in err and str(cases) in err


def _held_out(source, rows, error):
    values = {"pass_overhead_s": 0.001}
    return {"source": source, "rows": rows, "values": values, "median_abs_relative_error": error}


PRESET_FIT = {
    "vllm": {
        "values": {"pass_overhead_s": 0.002},
        "fitted_rows": 1,
        "median_abs_relative_error": 0.1,
        "rows": [
            {
                "id": "dec",
                "source": "s",
                "category": "decode",
                "measured": 5.0,
                "predicted": 5.5,
                "relative_error": 0.1,
                "fitted": True,
                "inconsistent": "",
            }
        ],
        "leave_one_source_out": [
            {**_held_out("s", 1, 0.3), "max_abs_relative_error": 0.3},
            {**_held_out("t", 2, 0.1), "max_abs_relative_error": 0.2},
            {"source": "u", "rows": 1, "note": "the engine's only source"},
        ],
    }
}


def test_a_presets_fit_in_the_output_folder_adds_its_out_of_sample_errors(cases, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "preset_fit.json").write_text(json.dumps(PRESET_FIT), encoding="utf-8")
    assert main(["fidelity", "--cases", str(cases), "--out", str(out)]) == 0
    held = json.loads((out / "summary.json").read_text(encoding="utf-8"))["presets_out_of_sample"]
    assert held == {
        "vllm": {
            "in_sample_median_abs_relative_error": 0.1,
            "held_out_sources": 2,
            "median_of_source_medians": 0.2,
            "worst_source_median": 0.3,
        }
    }
    report = (out / "REPORT.md").read_text(encoding="utf-8")
    assert "| vllm | 10% | 2 | 20% | 30% |" in report
    assert "### vllm" in report and "| dec | 5 | 5.5 | +10% |" in report


def test_a_broken_presets_fit_is_bad_input(cases, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "preset_fit.json").write_text("{not json", encoding="utf-8")
    assert main(["fidelity", "--cases", str(cases), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "preset_fit.json" in err and "Traceback" not in err


def test_a_current_fold_table_is_reused_and_a_changed_input_recomputes_it(cases, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["fidelity", "--cases", str(cases), "--out", str(out)]
    assert main(args) == 0
    first = json.loads((out / "folds.json").read_text(encoding="utf-8"))
    assert "reused" not in capsys.readouterr().out
    assert main(args) == 0
    assert "reused" in capsys.readouterr().out
    cases.write_text(CASES.replace("value = 5.0", "value = 6.0"), encoding="utf-8")
    assert main(args) == 0
    assert "reused" not in capsys.readouterr().out
    again = json.loads((out / "folds.json").read_text(encoding="utf-8"))
    assert again["inputs_hash"] != first["inputs_hash"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["inputs_hash"] == again["inputs_hash"]


def test_the_accuracy_table_is_the_summarys(cases, tmp_path):
    out, table = tmp_path / "out", tmp_path / "accuracy.json"
    args = ["fidelity", "--cases", str(cases), "--out", str(out), "--accuracy", str(table)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    written = json.loads(table.read_text(encoding="utf-8"))
    assert written == summary["accuracy"] and written["inputs_hash"] == summary["inputs_hash"]
    assert "ideal" in written["engines"]


def test_keys_lists_every_key_a_cases_table_takes(capsys):
    """`--keys` documents the format for a file of one's own from what the reader checks: every
    field of Case, the required ones marked, and the choices of a key that has them."""
    import dataclasses

    from simspec.validation.cases import Case

    assert main(["fidelity", "--keys"]) == 0
    out = capsys.readouterr().out
    for f in dataclasses.fields(Case):
        assert f"\n  {f.name} (" in out, f.name
    assert "  value (float, required): the measurement" in out
    assert "  role (str, default 'fit'): " in out and "'test'" in out
    assert out.startswith("[sources.KEY]")


def test_a_serving_benchmark_row_of_ones_own_reports_its_ttft(tmp_path, capsys):
    """A user's own bench_serving run (range_ratio, its request count and median TTFT) is
    predicted whole; its TTFT is reported beside the TPOT, in the summary, report and output."""
    decode = CASES[CASES.index('id = "dec"') :]
    serving = (
        decode.replace("batch = 1\n", "batch = 8\nnum_requests = 40\nrange_ratio = 0.8\n")
        .replace("prompt_tokens = 64", "prompt_tokens = 2048\nttft_ms = 60.0")
        .replace("output_tokens = 8", "output_tokens = 128")
    )
    cases = tmp_path / "mine.toml"
    cases.write_text(CASES[: CASES.index("[[cases]]")] + "[[cases]]\n" + serving, "utf-8")
    out = tmp_path / "out"
    assert main(["fidelity", "--cases", str(cases), "--out", str(out), "--in-sample-only"]) == 0
    assert "ttft: 1 of 1 rows predicted" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["ttft"]["rows"] == summary["ttft"]["predicted_rows"] == 1
    assert summary["ttft"]["median_abs_relative_error"] > 0
    assert "| dec | 1×h100-sxm TP1 | 8 | 2048/128 | 60 |" in (out / "REPORT.md").read_text()
