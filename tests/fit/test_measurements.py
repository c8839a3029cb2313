"""The measurements file of `simspec fit`: CSV and TOML rows, strict validation, the digest."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from simspec.errors import InputError
from simspec.fit.measurements import (
    COLUMNS,
    QUANTITIES,
    parse_measurements,
    read_measurements,
)

ROOT = Path(__file__).resolve().parents[2]
HEADER = "batch,quantity,value,prompt_tokens,output_tokens,draft_tokens,acceptance_length"

CSV = f"""# a comment, then a blank line

{HEADER}
1,tpot_ms,4.9,512,256,,
16,tokens_per_s,1500,512,256,0,
16,itl_ms,15.5,512,256,3,2.6
"""

TOML = """
[[measurements]]
batch = 1
quantity = "tpot_ms"
value = 4.9
prompt_tokens = 512
output_tokens = 256

[[measurements]]
batch = 16
quantity = "tokens_per_s"
value = 1500
prompt_tokens = 512
output_tokens = 256
draft_tokens = 0

[[measurements]]
batch = 16
quantity = "itl_ms"
value = 15.5
prompt_tokens = 512
output_tokens = 256
draft_tokens = 3
acceptance_length = 2.6
"""


KEYS = ("batch", "quantity", "value", "prompt_tokens", "output_tokens")
KEYS += ("draft_tokens", "acceptance_length")


def _fields(rows):
    return [tuple(getattr(r, key) for key in KEYS) for r in rows]


def test_csv_rows_are_read_with_comments_blank_lines_and_empty_cells():
    rows = parse_measurements(CSV, "m.csv")
    assert _fields(rows) == [
        (1, "tpot_ms", 4.9, 512, 256, 0, None),
        (16, "tokens_per_s", 1500.0, 512, 256, 0, None),
        (16, "itl_ms", 15.5, 512, 256, 3, 2.6),
    ]
    assert [r.speculative for r in rows] == [False, False, True]
    # rows are named by their number and their line in the file (line 4 is the first row)
    assert [r.where for r in rows] == ["row 1 (line 4)", "row 2 (line 5)", "row 3 (line 6)"]


def test_toml_rows_equal_the_csv_rows():
    assert _fields(parse_measurements(TOML, "m.toml", toml=True)) == _fields(
        parse_measurements(CSV, "m.csv")
    )


def test_column_order_is_free_and_optional_columns_are_kept():
    text = (
        "note,acceptance_length,draft_tokens,topk,num_draft_tokens,value,quantity,batch,"
        "prompt_tokens,output_tokens\n"
        "sglang run 3,3.1,3,4,8,7.5,tpot_ms,8,1024,512\n"
    )
    (row,) = parse_measurements(text, "m.csv")
    assert (row.batch, row.value, row.draft_tokens, row.acceptance_length) == (8, 7.5, 3, 3.1)
    assert (row.topk, row.num_draft_tokens, row.note) == (4, 8, "sglang run 3")


def test_read_measurements_records_the_sha256_of_the_bytes(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(CSV, encoding="utf-8")
    measurements = read_measurements(path)
    assert measurements.sha256 == hashlib.sha256(CSV.encode()).hexdigest()
    assert measurements.source == str(path)
    assert len(measurements.rows) == 3
    toml_path = tmp_path / "m.toml"
    toml_path.write_text(TOML, encoding="utf-8")
    assert len(read_measurements(toml_path).rows) == 3


def test_the_shipped_example_is_valid_and_labelled_synthetic():
    path = ROOT / "calibration" / "measurements-example.csv"
    assert "SYNTHETIC" in path.read_text(encoding="utf-8").splitlines()[0]
    rows = read_measurements(path).rows
    assert {r.quantity for r in rows} <= set(QUANTITIES)
    assert any(r.speculative for r in rows) and any(not r.speculative for r in rows)


#: id -> (CSV text, fragments the message must hold: the row/column and what was found)
BAD_CSV = {
    "unknown column": (
        "batch,quantity,value,prompt_tokens,output_tokens,latency\n1,tpot_ms,5,1,2,3\n",
        ["header (line 1)", "'latency'", "column among"],
    ),
    "missing column": ("batch,quantity,value,prompt_tokens\n1,tpot_ms,5,1\n", ["output_tokens"]),
    "duplicate column": (
        "batch,quantity,value,prompt_tokens,output_tokens,batch\n1,tpot_ms,5,1,2,1\n",
        ["each column once", "'batch' twice"],
    ),
    "bad quantity": (
        f"{HEADER}\n1,tpot,5,512,256,,\n",
        ["row 1 (line 2), column quantity", "one of 'tpot_ms'", "'tpot'"],
    ),
    "value not a number": (
        f"{HEADER}\n1,tpot_ms,fast,512,256,,\n",
        ["row 1 (line 2), column value", "a number", "'fast'"],
    ),
    "value negative": (f"{HEADER}\n1,tpot_ms,-5,512,256,,\n", ["column value", "-5.0"]),
    "value nan": (f"{HEADER}\n1,tpot_ms,nan,512,256,,\n", ["column value", "nan"]),
    "value empty": (f"{HEADER}\n1,tpot_ms,,512,256,,\n", ["column value", "an empty cell"]),
    "batch zero": (f"{HEADER}\n0,tpot_ms,5,512,256,,\n", ["column batch", "<= 65536", "0"]),
    "batch fractional": (f"{HEADER}\n1.5,tpot_ms,5,512,256,,\n", ["column batch", "'1.5'"]),
    "output one token": (f"{HEADER}\n1,tpot_ms,5,512,1,,\n", ["column output_tokens", ">= 2"]),
    "acceptance on plain row": (
        f"{HEADER}\n1,tpot_ms,5,512,256,,2.5\n",
        ["column acceptance_length", "plain-decoding row"],
    ),
    "acceptance missing": (
        f"{HEADER}\n1,tpot_ms,5,512,256,3,\n",
        ["row 1 (line 2), column acceptance_length", "speculative row", "an empty cell"],
    ),
    "acceptance above k+1": (
        f"{HEADER}\n1,tpot_ms,5,512,256,3,4.5\n",
        ["column acceptance_length", "[1, 4]", "4.5"],
    ),
    "too few cells": (f"{HEADER}\n\n# x\n1,tpot_ms,5\n", ["row 1 (line 4)", "7 cells", "3"]),
    "no rows": (f"# only a header\n{HEADER}\n", ["at least one measurement row"]),
    "empty file": ("# nothing\n", ["a CSV header row"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CSV), ids=sorted(BAD_CSV))
def test_bad_rows_are_rejected_naming_the_row_and_column(case):
    text, fragments = BAD_CSV[case]
    with pytest.raises(InputError) as caught:
        parse_measurements(text, "bench.csv")
    message = str(caught.value)
    assert message.startswith("bench.csv: "), message
    assert "expected" in message and "found" in message and "\n" not in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_bad_toml_rows_name_the_table_and_key():
    bad = TOML.replace('quantity = "itl_ms"', 'quantity = "itl"')
    with pytest.raises(InputError, match=r"measurements\[2\]\.quantity: expected one of"):
        parse_measurements(bad, "m.toml", toml=True)
    with pytest.raises(InputError, match="only \\[\\[measurements\\]\\] tables"):
        parse_measurements("rows = 1\n", "m.toml", toml=True)
    with pytest.raises(InputError, match="'latency'"):
        parse_measurements(TOML.replace("value = 4.9", "latency = 4.9"), "m.toml", toml=True)
    with pytest.raises(InputError, match="valid TOML"):
        parse_measurements("[[measurements]\n", "m.toml", toml=True)


def test_every_documented_column_is_accepted():
    assert set(COLUMNS) == {
        "batch",
        "quantity",
        "value",
        "prompt_tokens",
        "output_tokens",
        "draft_tokens",
        "acceptance_length",
        "topk",
        "num_draft_tokens",
        "note",
    }


def test_the_readme_documents_every_column_of_the_fit_input():
    from pathlib import Path

    from simspec.fit.measurements import COLUMNS, QUANTITIES, REQUIRED

    readme = Path(__file__).resolve().parents[2] / "README.md"
    text = readme.read_text(encoding="utf-8")
    rows = {
        line.split("|")[1].strip().strip("`"): line.split("|")[2].strip()
        for line in text.splitlines()
        if line.startswith("| `") and line.split("|")[1].strip().strip("`") in COLUMNS
    }
    assert sorted(rows) == sorted(COLUMNS)
    assert all(rows[c] == "yes" for c in REQUIRED)
    quantity_line = next(line for line in text.splitlines() if line.startswith("| `quantity`"))
    for quantity in QUANTITIES:
        assert f"`{quantity}`" in quantity_line, quantity
