"""Bad measurements files and flags of `simspec fit`: exit 2, one paragraph, nothing written.

Every case runs ``simspec fit`` with a profile path that already exists, so "nothing written"
also checks that a rejected fit leaves an existing ``--out`` file as it was.
"""

from __future__ import annotations

import pytest

from .rejects import assert_rejected, scenario, write_scenario

HEADER = "batch,quantity,value,prompt_tokens,output_tokens,draft_tokens,acceptance_length"
GOOD = "1,tpot_ms,5.0,64,8,,"

#: id -> (CSV text, extra flags, fragments of the message besides the file name)
BAD = {
    "value not a number": (
        f"{HEADER}\n{GOOD}\n4,tpot_ms,fast,64,8,,\n",
        [],
        ["row 2 (line 3), column value", "a number", "'fast'"],
    ),
    "unknown column": (
        "batch,quantity,value,prompt_tokens,output_tokens,ttft\n1,tpot_ms,5,64,8,3\n",
        [],
        ["header (line 1)", "'ttft'"],
    ),
    "speculative row without acceptance length": (
        f"# vllm bench, EAGLE-3\n{HEADER}\n1,tpot_ms,5.0,64,8,3,\n",
        [],
        ["row 1 (line 3), column acceptance_length", "an empty cell"],
    ),
    "a TPOT no GPU can reach (1e-9 ms)": (
        f"{HEADER}\n{GOOD}\n4,tpot_ms,1e-9,64,8,,\n",
        [],
        ["row 2 (line 3), column value", "a tpot_ms in [0.01, 100000]", "1e-09"],
    ),
    "a TPOT of 1e308 ms": (
        f"{HEADER}\n{GOOD}\n4,tpot_ms,1e308,64,8,,\n",
        [],
        ["row 2 (line 3), column value", "a physically possible value", "1e+308"],
    ),
    "a throughput of 1e12 tokens/s": (
        f"{HEADER}\n{GOOD}\n4,tokens_per_s,1e12,64,8,,\n",
        [],
        ["row 2 (line 3), column value", "a tokens_per_s in"],
    ),
    "unknown quantity": (
        f"{HEADER}\n1,ttft_ms,5.0,64,8,,\n",
        [],
        ["row 1 (line 2), column quantity", "'ttft_ms'"],
    ),
    "more drafts than the drafter allows": (
        f"{HEADER}\n{GOOD}\n1,tpot_ms,4.0,64,8,12,3.0\n",
        [],
        ["row 2 (line 3), draft_tokens", "max_draft_tokens", "12"],
    ),
    "unknown parameter": (
        f"{HEADER}\n{GOOD}\n",
        ["--params", "pass_overhead_s,warp_speed"],
        ["--params", "one of pass_overhead_s", "'warp_speed'"],
    ),
    "repeated parameter": (
        f"{HEADER}\n{GOOD}\n",
        ["--params", "pass_overhead_s,pass_overhead_s"],
        ["--params", "distinct parameter names"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD), ids=sorted(BAD))
def test_bad_measurements_are_rejected_naming_row_and_column(tmp_path, capsys, case):
    text, flags, fragments = BAD[case]
    measurements = tmp_path / "bench.csv"
    measurements.write_text(text, encoding="utf-8")
    path = write_scenario(tmp_path, scenario())
    out = tmp_path / "profile.json"
    out.write_text("{}\n", encoding="utf-8")
    argv = ["fit", str(measurements), "--scenario", str(path), "--out", str(out), *flags]
    file_fragment = [] if flags else [str(measurements)]
    assert_rejected(capsys, argv, tmp_path, [*file_fragment, *fragments])


def test_a_missing_file_or_a_folder_is_rejected(tmp_path, capsys):
    out = str(tmp_path / "profile.json")
    missing = str(tmp_path / "nope.csv")
    assert_rejected(capsys, ["fit", missing, "--out", out], tmp_path, [missing, "no such file"])
    assert_rejected(capsys, ["fit", str(tmp_path), "--out", out], tmp_path, ["a folder"])


def test_an_unwritable_out_is_rejected_before_fitting(tmp_path, capsys):
    measurements = tmp_path / "bench.csv"
    measurements.write_text(f"{HEADER}\n{GOOD}\n", encoding="utf-8")
    argv = ["fit", str(measurements), "--out"]
    assert_rejected(capsys, [*argv, str(tmp_path)], tmp_path, ["--out", "an existing folder"])
    assert_rejected(capsys, [*argv, "-"], tmp_path, ["--out", "standard output is not allowed"])
