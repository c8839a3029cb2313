"""`simspec recommend`: the answer per batch size, its files, and bad input."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from simspec.cli import main

SMALL = [
    "--set",
    "workload.num_requests=4",
    "--set",
    "workload.output_tokens=16",
    "--set",
    "workload.prompt_tokens=64",
    "--set",
    'routing.mode="analytic"',
    "--max-k",
    "2",
    "--replications",
    "2",
    "--policies",
    "threshold",
    "--engine-flags",
    "k",
]


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_recommend_prints_writes_and_agrees_with_its_json(tmp_path):
    code, out, _ = run_cli(
        "recommend",
        "--batch",
        "1,2",
        *SMALL,
        "--json",
        str(tmp_path / "rec.json"),
        "--markdown",
        str(tmp_path / "rec.md"),
        "--plot",
        str(tmp_path / "fig"),
    )
    assert code == 0
    data = json.loads((tmp_path / "rec.json").read_text())
    assert [b["batch"] for b in data["batches"]] == [1, 2]
    for batch in data["batches"]:
        speedups = [row["speedup_vs_no_spec"] for row in batch["fixed"]]
        assert [row["draft_tokens"] for row in batch["fixed"]] == [0, 1, 2]
        assert batch["best_k"] == int(np.argmax(speedups))
        assert batch["expected_speedup"] == pytest.approx(max(speedups))
        assert batch["fixed"][0]["speedup_vs_no_spec"] == 1.0
        assert batch["oracle_speedup"] >= max(speedups) - batch["oracle_speedup_ci95"]
        assert [row["policy"] for row in batch["online"]] == ["threshold"]
        assert f"batch {batch['batch']}: run k = {batch['best_k']} " in out
    table = (tmp_path / "rec.md").read_text()
    assert len(table.splitlines()) == 2 + 2
    assert (tmp_path / "fig" / "speedup-vs-k-b1.png").stat().st_size > 0
    assert (tmp_path / "fig" / "speedup-vs-k-b2.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["--batch", "1,x"], "--batch"),
        (["--batch", "0"], "--batch"),
        (["--batch", "2,2"], "--batch"),
        (["--replications", "1"], "--replications"),
        (["--max-k", "99"], "--max-k"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(args, key):
    code, _, err = run_cli("recommend", *SMALL, *args)
    assert code == 2
    assert key in err and "Traceback" not in err


def test_format_csv_rows_agree_with_the_json(tmp_path):
    """--format csv writes one row per batch whose numbers are the JSON's (full precision)."""
    import csv

    out_json = tmp_path / "rec.json"
    code, out, err = run_cli(
        "recommend", "--batch", "1,2", "--format", "csv", "--json", str(out_json), *SMALL
    )
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    data = json.loads(out_json.read_text())
    assert [int(r["batch"]) for r in rows] == [1, 2]
    for row, rec in zip(rows, data["batches"], strict=True):
        assert int(row["best_k"]) == rec["best_k"]
        assert float(row["expected_speedup"]) == rec["expected_speedup"]
        assert row["best_online"] == rec["best_online"]
        low, high = float(row["expected_speedup_ci_low"]), float(row["expected_speedup_ci_high"])
        assert low <= float(row["expected_speedup"]) <= high
    assert "scenario" in err  # the headline goes to stderr when stdout carries data


def test_format_table_is_plain_and_md_is_markdown_with_the_same_columns():
    code, table, _ = run_cli("recommend", "--batch", "1", *SMALL)
    assert code == 0
    code, md, _ = run_cli("recommend", "--batch", "1", *SMALL, "--format", "md")
    assert code == 0
    table_lines = table.splitlines()
    header = table_lines[1]
    assert "|" not in header and header.split()[:2] == ["batch", "best"]
    assert set(table_lines[2].replace(" ", "")) == {"-"}  # an aligned text table's rule
    md_header = next(line for line in md.splitlines() if line.startswith("|"))
    columns = [c.strip() for c in md_header.strip("|").split("|")]
    plain = header
    for column in columns:  # every Markdown column heads the text table too, in order
        assert column in plain, column
        plain = plain[plain.index(column) + len(column) :]


FLAGS_SMALL = [
    "--set",
    "workload.num_requests=4",
    "--set",
    "workload.output_tokens=32",
    "--set",
    "workload.prompt_tokens=64",
    "--set",
    'routing.mode="analytic"',
    "--max-k",
    "3",
    "--topk",
    "1,2",
    "--num-draft-tokens",
    "3,4,6",
    "--replications",
    "2",
]


def test_sglang_flags_print_and_agree_with_the_json(tmp_path):
    from simspec.analysis.shapes import parse_sglang

    out_json = tmp_path / "rec.json"
    code, out, err = run_cli(
        "recommend", "--batch", "1,2", *FLAGS_SMALL, "--json", str(out_json), "--markdown", "-"
    )
    assert code == 0, err
    data = json.loads(out_json.read_text())
    assert data["engine_flags"] == "sglang"  # the default under the ideal preset
    assert data["grid"]["topk"] == [1, 2] and data["grid"]["steps"] == [1, 2, 3]
    for batch in data["batches"]:
        shape = parse_sglang(batch["flags"])
        assert (shape.steps, shape.topk, shape.num_draft_tokens) == (
            batch["steps"],
            batch["topk"],
            batch["num_draft_tokens"],
        )
        finals = batch["finalists"]
        assert finals[0]["flags"] == batch["flags"]
        assert batch["expected_speedup"] == max(f["speedup_vs_no_spec"] for f in finals)
        assert batch["within_noise"] == [f["flags"] for f in finals[1:] if f["within_noise"]]
        assert f"| {batch['batch']} | `{batch['flags']}` |" in out  # the markdown table
    edge = [w for b in data["batches"] for w in b["warnings"] if w.startswith("k-at-edge")]
    for w in edge:
        assert "k-at-edge: at batch" in err and w.split(": ", 1)[1] in err


def test_vllm_flags_are_a_speculative_config():
    from simspec.analysis.shapes import parse_vllm

    code, out, err = run_cli(
        "recommend", "--batch", "1", *FLAGS_SMALL[:-6], "--engine-flags", "vllm", "--format", "csv"
    )
    assert code == 0, err
    import csv

    (row,) = list(csv.DictReader(io.StringIO(out)))
    assert parse_vllm(row["flags"]) == (int(row["steps"]), None)


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (["--topk", "1,x"], "--topk"),
        (["--num-draft-tokens", "0"], "--num-draft-tokens"),
        (["--plot", "figs"], "--plot"),
        (["--policies", "threshold"], "--policies"),
        (["--max-k", "99"], "--max-k"),
    ],
)
def test_bad_flags_of_the_engine_search_exit_2_naming_the_flag(args, key):
    code, _, err = run_cli("recommend", *FLAGS_SMALL, *args)
    assert code == 2
    assert key in err and "Traceback" not in err


def test_the_vllm_preset_answers_in_vllm_flags_by_default(tmp_path):
    out_json = tmp_path / "rec.json"
    code, _, err = run_cli(
        "recommend",
        "--batch",
        "1",
        *FLAGS_SMALL[:-6],
        "--set",
        'engine.preset="vllm"',
        "--json",
        str(out_json),
    )
    assert code == 0, err
    data = json.loads(out_json.read_text())
    assert data["engine_flags"] == "vllm"
    assert data["batches"][0]["flags"].startswith("--speculative-config ")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_an_ngram_drafter_is_recommended_as_prompt_lookup_chains(engine):
    import csv

    code, out, err = run_cli(
        "recommend",
        "--batch",
        "1",
        *FLAGS_SMALL[:-6],
        "--set",
        'model.drafter="ngram"',
        "--engine-flags",
        engine,
        "--format",
        "csv",
    )
    assert code == 0, err
    (row,) = list(csv.DictReader(io.StringIO(out)))
    assert row["topk"] == "1" and int(row["num_draft_tokens"]) == int(row["steps"]) + 1
    assert ('"method": "ngram"' if engine == "vllm" else "--speculative-algorithm NGRAM") in row[
        "flags"
    ]
