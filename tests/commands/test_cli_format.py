"""`--format`, `--output`, `--trace-out`, `--version`, help defaults and table alignment."""

from __future__ import annotations

import csv
import io
import json

import pytest

import simspec
from simspec.cli import main
from simspec.commands import Column, is_numeric_column, render_rows, table
from tests.commands.test_cli import not_warnings

SMALL = ["--set", "workload.num_requests=4", "--set", "workload.output_tokens=16"]


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = 0 if exit_.code is None else exit_.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """`simspec run` once per format, each written to a file, plus the results JSON."""
    folder = tmp_path_factory.mktemp("formats")
    paths = {}
    for fmt in ("csv", "json", "md", "table"):
        paths[fmt] = folder / f"rows.{fmt}"
        args = ["run", *SMALL, "--format", fmt, "--output", str(paths[fmt])]
        if fmt == "json":
            args += ["--json", str(folder / "results.json")]
        assert main(args) == 0
    paths["results"] = folder / "results.json"
    return paths


def test_csv_parses_back_to_the_json_numbers(outputs):
    records = json.loads(outputs["json"].read_text())
    rows = list(csv.DictReader(io.StringIO(outputs["csv"].read_text())))
    assert [r["policy"] for r in rows] == [r["policy"] for r in records]
    for row, record in zip(rows, records, strict=True):
        assert set(row) == set(record)
        for key, value in record.items():
            assert (row[key] if key == "policy" else float(row[key])) == value


def test_json_rows_are_the_results_json_metrics(outputs):
    results = json.loads(outputs["results"].read_text())["policies"]
    records = json.loads(outputs["json"].read_text())
    for record, full in zip(records, results, strict=True):
        for key, value in record.items():
            if key != "policy":
                assert value == full[key]


def test_md_is_a_pipe_table(outputs):
    lines = outputs["md"].read_text().splitlines()
    cells = [line.strip("|").split("|") for line in lines]
    assert all(line.startswith("| ") and line.endswith(" |") for line in [lines[0], *lines[2:]])
    assert len({len(c) for c in cells}) == 1  # every row has the header's column count
    rule = cells[1]
    assert rule[0] == ":---" and all(c == "---:" for c in rule[1:])  # text left, numbers right
    assert len(lines) == 2 + 9  # header, rule, the default's nine policies (k = 0..8)


def test_dash_writes_the_rows_to_stdout_and_notes_to_stderr(capsys):
    code, out, err = run_main(capsys, "run", *SMALL, "--format", "csv", "--output", "-")
    assert code == 0
    assert out.splitlines()[0].startswith("policy,tokens_per_s,")
    assert len(out.splitlines()) == 1 + 9  # header, k = 0..8
    assert not_warnings(err)[0].startswith("scenario default")


def test_table_to_stdout_keeps_the_text_table(capsys, outputs):
    code, out, _ = run_main(capsys, "run", *SMALL)
    assert code == 0
    table_text = outputs["table"].read_text()
    assert table_text in out and out.startswith("scenario default")
    assert out.endswith(table_text + out.splitlines()[-1] + "\n")  # then the one-line answer
    assert out.splitlines()[-1].startswith("best: ")


def test_two_data_streams_on_stdout_are_refused(capsys):
    code, _, err = run_main(capsys, "run", *SMALL, "--json", "-", "--format", "csv")
    assert code == 2 and "--output" in err and "Traceback" not in err


def test_compare_writes_formats_and_a_trace(capsys, tmp_path):
    trace = tmp_path / "t.json"
    code, out, err = run_main(
        capsys, "compare", *SMALL, "--format", "json", "--trace-out", str(trace)
    )
    assert code == 0
    records = json.loads(out)
    assert records[-1]["policy"] == "oracle" and records[-1]["gap_to_oracle_pct"] == 0.0
    assert "oracle:" in err
    events = json.loads(trace.read_text())["traceEvents"]
    processes = [e["args"]["name"] for e in events if e["name"] == "process_name"]
    assert processes == [r["policy"] for r in records]


def test_version(capsys):
    code, out, _ = run_main(capsys, "--version")
    assert code == 0 and out.strip() == f"simspec {simspec.__version__}"


@pytest.mark.parametrize(
    ("command", "shown"),
    [("run", "(default: table)"), ("compare", "(default: -)"), ("sweep", "(default:")],
)
def test_help_shows_defaults(capsys, command, shown):
    code, out, _ = run_main(capsys, command, "--help")
    assert code == 0 and shown in " ".join(out.split())
    assert "(default: None)" not in out and "(default: False)" not in out


def test_table_aligns_text_left_and_numbers_right():
    text = table(
        ("name", "kind", "k", "speedup"), [("a", "eagle3", 8, "1.25"), ("bbb", "d", 10, "-")]
    )
    assert text.splitlines() == [
        "name  kind     k  speedup",
        "----  ------  --  -------",
        "a     eagle3   8     1.25",
        "bbb   d       10        -",
    ]


@pytest.mark.parametrize(
    ("cells", "numeric"),
    [
        (["1", "2.5", "-3e-4"], True),
        (["1,024", "12.5%", "-"], True),
        (["1.2x", "n/a"], True),
        (["-", "-"], False),
        (["dense", "8/128"], False),
        (["eagle3", "1"], False),
    ],
)
def test_numeric_columns(cells, numeric):
    assert is_numeric_column(cells) is numeric


def test_render_rows_keeps_full_precision_in_csv_and_json():
    columns = (Column("policy", "policy"), Column("x", "x", ".1f"))
    rows = [("p", 1 / 3), ("q", None)]
    assert render_rows(columns, rows, "table").splitlines()[2:] == ["p       0.3", "q         -"]
    assert float(list(csv.reader(io.StringIO(render_rows(columns, rows, "csv"))))[1][1]) == 1 / 3
    assert json.loads(render_rows(columns, rows, "json")) == [
        {"policy": "p", "x": 1 / 3},
        {"policy": "q", "x": None},
    ]
