"""The fitted range of each preset term: the rows behind it, grouped, and shipped in the catalog."""

from __future__ import annotations

import dataclasses
import json
import tomllib

import pytest

from simspec import catalog
from simspec.fit import presets
from simspec.fit.ranges import fitted_ranges, range_toml
from simspec.params.ranges import FittedRange
from simspec.schema import build
from simspec.validation.cases import engine_preset, load_cases
from tests.fit.test_presets import CASES, ROW


def _row(id: str, **changes) -> object:
    return dataclasses.replace(ROW, id=id, **changes)


def test_rows_are_grouped_by_the_terms_they_constrain():
    rows = [
        _row("a", tp=1, batch=4),
        _row("b", tp=4, num_gpus=4, gpu="h200", batch=1),
        _row("c", category="speculative", model="gpt-oss-120b", batch=16, ep=2),
    ]
    touches = {"a": ["x", "y"], "b": ["x", "y"], "c": ["x", "z"]}
    entries = fitted_ranges(rows, lambda case: touches[case.id])
    assert [e["terms"] for e in entries] == [["x"], ["y"], ["z"]]
    x, y, z = entries
    assert x["rows"] == 3 and not x["speculative"]
    assert x["gpus"] == ["h100-sxm", "h200"] and x["families"] == ["gpt-oss", "qwen3"]
    assert (x["tp"], x["ep"], x["batch"]) == ([1, 4], [1, 2], [1, 16])
    assert y["rows"] == 2 and y["batch"] == [1, 4] and y["families"] == ["qwen3"]
    assert z["speculative"] and z["tp"] == [2, 2] and z["ep"] == [2, 2]


def test_terms_with_the_same_rows_share_one_entry_that_reads_back():
    rows = [_row("a"), _row("b", batch=8)]
    (entry,) = fitted_ranges(rows, lambda case: ["x", "y"])
    assert entry["terms"] == ["x", "y"]
    text = "\n".join(range_toml([entry]))
    (table,) = tomllib.loads(text)["fitted_range"]
    assert build(FittedRange, table) == FittedRange(
        terms=("x", "y"), rows=2, gpus=("h100-sxm",), families=("qwen3",),
        tp=(2, 2), ep=(1, 1), batch=(1, 8), cases=("a", "b"),
    )  # fmt: skip


@pytest.mark.parametrize("engine", sorted(presets.FITTED))
def test_each_shipped_preset_states_the_rows_its_fitted_terms_rest_on(engine):
    """Every fitted term of the preset is in one range, and the ranges are those of the rows
    the fit used (validation/preset_fit.json's fitted rows of validation/cases.toml)."""
    fit = json.loads((CASES.parent / "preset_fit.json").read_text(encoding="utf-8"))[engine]
    used = {row["id"] for row in fit["rows"] if row["fitted"]}
    cases = [c for c in load_cases(CASES).cases if engine_preset(c) == engine and c.id in used]
    fitted = presets.fitted_keys(engine)
    expected = fitted_ranges(
        cases, lambda c: [k for k, _ in presets.probe_runs(c)[1:] if k in fitted]
    )
    shipped = catalog.get_engine(engine).fitted_range
    fitted_part = tuple(e for e in shipped if not e.measured)
    assert fitted_part == tuple(build(FittedRange, e) for e in expected)
    terms = [t for entry in fitted_part for t in entry.terms]
    assert sorted(terms) == sorted(presets.fitted_keys(engine))
    # A measured term's range is that of the rows that measured it, none of them fitted.
    measured = [e for e in shipped if e.measured]
    rows = presets.measurement_rows(engine, load_cases(CASES).cases)
    assert sorted(t for e in measured for t in e.terms) == sorted(
        presets.MEASURED.get(engine, ()) if rows else ()
    )
    for entry in measured:
        assert entry.speculative and set(entry.cases) == {c.id for c in rows}
        assert not set(entry.cases) & used


def test_a_range_names_as_many_rows_as_it_counts():
    with pytest.raises(ValueError, match="cases"):
        FittedRange(
            terms=("x",), rows=2, gpus=(), families=(), tp=(1, 1), ep=(1, 1), batch=(1, 1),
            cases=("only-one",),
        )  # fmt: skip


def test_a_range_is_low_then_high():
    with pytest.raises(ValueError, match="tp"):
        FittedRange(terms=("x",), rows=1, gpus=(), families=(), tp=(4, 2), ep=(1, 1), batch=(1, 1))
