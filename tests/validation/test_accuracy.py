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
