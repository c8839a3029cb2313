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


def test_a_speculative_entry_holds_its_batch_one_rows_apart_with_their_lean():
    """The batch-1 rows of a speculative entry are summarised apart (``batch_one``), with the
    signed median beside the absolute one: the rows at batch 1 lean one way, the others not,
    and a run at batch 1 is told by those rows (the within-error guardrail)."""
    import dataclasses

    def spec_outcome(case_id: str, batch: int, reporter: str) -> Outcome:
        case = Case(
            case_id, "speculative", "qwen3-30b-a3b", "h100-sxm", 1, 1, 1, "SGLang", "bf16",
            "tokens_per_s", "tok/s", 1.0, "s", reporter,
        )  # fmt: skip
        return Outcome(dataclasses.replace(case, batch=batch), 1.0, 1.0, ideal=1.0)

    def fold(case_id: str, predicted: float, measured: float, group: str) -> dict:
        return {"id": case_id, "category": "speculative", "engine": "sglang",
                "measured": measured, "predicted": predicted, "group": group}  # fmt: skip

    outcomes = [
        spec_outcome("one-a", 1, "a"),
        spec_outcome("one-b", 1, "b"),
        spec_outcome("one-c", 1, "b"),
        spec_outcome("eight", 8, "c"),
    ]
    rows = [
        fold("one-a", 1.2, 1.0, "a"),  # +20 %
        fold("one-b", 1.1, 1.0, "b"),  # +10 %
        fold("one-c", 0.95, 1.0, "b"),  # -5 %
        fold("eight", 0.5, 1.0, "c"),  # -50 %: not a batch-1 row
    ]
    table = accuracy_table(outcomes, {"rows": rows}, "h")
    for name in ("sglang", POOLED):
        spec = table["engines"][name]["speculative"]
        assert spec["rows"] == 4 and spec["median_relative_error"] == pytest.approx(0.025)
        one = spec["batch_one"]
        assert one["rows"] == 3 and one["reporters"] == 2
        assert one["median_abs_relative_error"] == pytest.approx(0.1)
        assert one["median_relative_error"] == pytest.approx(0.1)
    ideal = table["engines"]["ideal"]["speculative"]  # physics only: every row, and apart
    assert ideal["rows"] == 4 and ideal["batch_one"]["rows"] == 3


def test_the_readme_quotes_the_batch_one_lean_as_the_table_and_folds_have_it():
    """README's sentence on the batch-1 rows: their count, reporters, signed median and wrong
    signs from the shipped table; how many lie above their measurement, at batch 1 and beyond,
    recounted from the fold table and the cases file."""
    import re

    from simspec.validation.cases import load_cases

    readme = re.sub(r"\s+", " ", (ROOT / "README.md").read_text(encoding="utf-8"))
    pooled = catalog.accuracy()["engines"][POOLED]["speculative"]
    one = pooled["batch_one"]
    cases = {c.id: c for c in load_cases(ROOT / "validation" / "cases.toml").cases}
    folds = json.loads((ROOT / "validation" / "folds.json").read_text())
    held = [r for r in folds["rows"] if r["predicted"] is not None and r["engine"] != "ideal"]
    spec = [r for r in held if r["category"] == "speculative"]
    at_one = [r for r in spec if cases[r["id"]].batch == 1]
    beyond = [r for r in spec if cases[r["id"]].batch > 1]
    assert len(at_one) == one["rows"]
    above = sum(r["predicted"] > r["measured"] for r in at_one)
    above_beyond = sum(r["predicted"] > r["measured"] for r in beyond)
    lean = one["median_relative_error"] * 100
    assert (
        f"the {one['rows']} speculative rows measured at batch 1 ({one['reporters']} reporters) "
        f"are predicted a median {lean:.1f} % too fast, {above} of them above their "
        f"measurement, against {above_beyond} of the {len(beyond)} rows at larger batches"
    ) in readme
    assert (
        f"{one['wrong_signs']} of the {pooled['wrong_signs']} wrong signs are among them" in readme
    )
