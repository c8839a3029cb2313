"""The accuracy table: each engine preset's errors on published rows it was not fitted on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simspec import catalog
from simspec.validation.accuracy import POOLED, accuracy_table
from simspec.validation.cases import Case
from simspec.validation.predictions import Outcome

ROOT = Path(__file__).resolve().parents[2]


def _fold_row(engine: str, category: str, predicted: float | None, measured: float, group: str):
    return {
        "id": f"{group}-{predicted}",
        "category": category,
        "engine": engine,
        "measured": measured,
        "predicted": predicted,
        "group": group,
    }


def _outcome(category: str, ideal: float, measured: float, reporter: str) -> Outcome:
    case = Case(
        "x", category, "qwen3-30b-a3b", "h100-sxm", 1, 1, 1, "SGLang", "bf16", "tpot_ms",
        "ms", measured, "s", reporter,
    )  # fmt: skip
    return Outcome(case, measured, measured, ideal=ideal)


def test_the_table_holds_medians_reporters_and_signs_per_engine_and_pooled():
    rows = [
        _fold_row("sglang", "speculative", 1.2, 1.0, "a"),  # +20 %, sign wrong (1.0 is noise)
        _fold_row("sglang", "speculative", 0.9, 1.2, "a"),  # -25 %, sign wrong
        _fold_row("sglang", "speculative", 1.1, 1.1, "b"),  # 0 %, sign right
        _fold_row("sglang", "decode", None, 5.0, "c"),  # not identifiable: left out
        _fold_row("vllm", "decode", 6.0, 5.0, "d"),  # +20 %
        _fold_row("ideal", "decode", 2.0, 1.0, "e"),  # the physics-only rows are not pooled
    ]
    outcomes = [
        _outcome("decode", 4.0, 5.0, "p"),  # -20 %
        _outcome("decode", 5.5, 5.0, "q"),  # +10 %
        _outcome("speculative", 0.8, 1.25, "p"),  # -36 %, sign wrong
    ]
    table = accuracy_table(outcomes, {"rows": rows}, "h")
    assert table["inputs_hash"] == "h"
    sglang = table["engines"]["sglang"]
    assert set(sglang) == {"speculative"}  # its only decode row is not identifiable
    spec = sglang["speculative"]
    assert spec["rows"] == 3 and spec["reporters"] == 2
    assert spec["median_abs_relative_error"] == pytest.approx(0.2)
    assert (spec["wrong_signs"], spec["signs_checked"]) == (1, 2)  # 1.0 is within the noise
    assert table["engines"]["vllm"]["decode"]["median_abs_relative_error"] == pytest.approx(0.2)
    pooled = table["engines"][POOLED]
    assert pooled["decode"]["rows"] == 1 and pooled["speculative"]["rows"] == 3
    ideal = table["engines"]["ideal"]
    assert ideal["decode"]["median_abs_relative_error"] == pytest.approx(0.15)
    assert ideal["decode"]["reporters"] == 2
    assert (ideal["speculative"]["wrong_signs"], ideal["speculative"]["signs_checked"]) == (1, 1)


def test_the_shipped_table_is_the_current_reports():
    shipped = json.loads((ROOT / "simspec" / "catalog" / "accuracy.json").read_text())
    summary = json.loads((ROOT / "validation" / "summary.json").read_text())
    assert shipped == summary["accuracy"], "regenerate: python bench/fidelity.py"
    assert shipped["inputs_hash"] == summary["inputs_hash"]
    assert catalog.accuracy() == shipped


def _case(case_id: str, quantity: str, measured: float, *, role: str = "fit", tp: int = 1) -> Case:
    import dataclasses

    case = Case(
        case_id, "decode", "qwen3-30b-a3b", "h100-sxm", tp, tp, 1, "SGLang", "bf16", quantity,
        "ms", measured, "s", "r",
    )  # fmt: skip
    return dataclasses.replace(case, role=role)


def test_published_errors_are_out_of_sample_per_model_gpu_degree_and_preset():
    """A row counts with its fold's prediction; a row with none only when the shipped numbers
    were not fitted on it (a test row: its shipped prediction); ``faster`` reads a rate and a
    time each the right way round; ``ideal`` takes every row's physics-only prediction."""
    from simspec.validation.accuracy import published_table

    time_row = _case("t", "tpot_ms", 10.0)  # fold: 8 ms, faster, -20 %
    rate_row = _case("r", "tokens_per_s", 100.0)  # fold: 150 tok/s, faster, +50 %
    test_row = _case("x", "tpot_ms", 10.0, role="test")  # no fold prediction: shipped 12 ms
    # A row the shipped sglang preset was fitted on (its id), with no fold prediction: left out.
    fitted = _case("qwen3-30b-2xh100-tp2-sglang[0]", "tpot_ms", 10.0)
    other = _case("o", "tpot_ms", 10.0, tp=2)  # another degree: another key
    outcomes = [
        Outcome(time_row, 10.0, 9.0, ideal=5.0),
        Outcome(rate_row, 100.0, 140.0, ideal=200.0),
        Outcome(test_row, 10.0, 12.0, ideal=6.0),
        Outcome(fitted, 10.0, 10.0, ideal=5.0),
        Outcome(other, 10.0, 10.0, ideal=5.0),
    ]
    folds = {"rows": [{"id": "t", "predicted": 8.0}, {"id": "r", "predicted": 150.0},
                      {"id": "x", "predicted": None},
                      {"id": "qwen3-30b-2xh100-tp2-sglang[0]", "predicted": None}]}  # fmt: skip
    table = published_table(outcomes, folds)
    sglang = table["qwen3-30b-a3b@h100-sxm/tp1"]["sglang"]["decode"]
    assert sglang["rows"] == 3  # t, r and the test row x
    assert sglang["median_abs_relative_error"] == pytest.approx(0.2)  # of 20, 50 and 20 %
    assert sglang["faster"] == 2  # t (8 < 10 ms) and r (150 > 100 tok/s), not x (12 > 10 ms)
    ideal = table["qwen3-30b-a3b@h100-sxm/tp1"]["ideal"]["decode"]
    assert ideal["rows"] == 4 and ideal["faster"] == 4  # 5, 6 and 5 ms below 10; 200 > 100
    assert table["qwen3-30b-a3b@h100-sxm/tp2"]["sglang"]["decode"]["rows"] == 1  # the TP2 row
