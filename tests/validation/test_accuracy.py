"""The accuracy table (each engine preset's errors on rows it was not fitted on) and the
``within-error`` guardrail that reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simspec import catalog
from simspec.analysis.experiment import run_experiment
from simspec.analysis.guardrails import WITHIN_ERROR, speculative_accuracy, within_error_warning
from simspec.validation.accuracy import POOLED, accuracy_table
from simspec.validation.cases import Case
from simspec.validation.predictions import Outcome
from tests.helpers import tiny

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


# -- the within-error guardrail -------------------------------------------------------------

#: A table whose sglang entry is 30 % (enough rows and reporters), vllm's too thin to stand
#: alone (the pooled 10 % stands for it), and the physics-only preset 50 %.
TABLE = {
    "engines": {
        "sglang": {"speculative": {"rows": 12, "reporters": 3, "median_abs_relative_error": 0.3,
                                   "wrong_signs": 2, "signs_checked": 10}},
        "vllm": {"speculative": {"rows": 2, "reporters": 1, "median_abs_relative_error": 0.9,
                                 "wrong_signs": 0, "signs_checked": 2}},
        "all": {"speculative": {"rows": 20, "reporters": 5, "median_abs_relative_error": 0.1,
                                "wrong_signs": 0, "signs_checked": 0}},
        "ideal": {"speculative": {"rows": 20, "reporters": 5, "median_abs_relative_error": 0.5,
                                  "wrong_signs": 4, "signs_checked": 18}},
    }
}  # fmt: skip


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(catalog, "accuracy", lambda: TABLE)


@pytest.mark.parametrize(
    ("speedup", "warns"),
    [
        (1.25, True),  # 1.25 / 1.3 < 1: a typical overprediction would make it a loss
        (1.31, False),  # 1.31 / 1.3 > 1: a gain even then
        (0.75, True),  # 0.75 / 0.7 > 1: a typical underprediction would make it a gain
        (0.69, False),  # 0.69 / 0.7 < 1: a loss even then
        (1.0, True),
    ],
)
def test_a_speedup_within_the_presets_typical_error_warns(table, speedup, warns):
    warning = within_error_warning(tiny("engine.preset=sglang"), "fixed-3", speedup)
    assert (warning is not None) == warns
    if warning:
        assert warning.startswith(f"{WITHIN_ERROR}: ") and "\n" not in warning
        assert "fixed-3" in warning and "30%" in warning and "12 published rows" in warning
        assert "2 of 10" in warning


def test_a_preset_with_too_few_held_out_rows_falls_back_on_the_pooled_errors(table):
    entry, scope = speculative_accuracy("vllm")
    assert entry["median_abs_relative_error"] == 0.1 and "pooled" in scope
    assert within_error_warning(tiny("engine.preset=vllm"), "fixed-3", 1.15) is None  # > 1.1
    assert within_error_warning(tiny("engine.preset=vllm"), "fixed-3", 1.05) is not None
    entry, scope = speculative_accuracy("ideal")
    assert entry["median_abs_relative_error"] == 0.5 and scope == "physics only"


def test_no_table_no_warning(monkeypatch):
    monkeypatch.setattr(catalog, "accuracy", lambda: {"engines": {}})
    assert within_error_warning(tiny("engine.preset=sglang"), "fixed-3", 1.0) is None


def test_a_run_lists_the_warning_when_its_best_drafting_policy_gains_little(table):
    policies = [{"name": "fixed", "draft_tokens": k} for k in (0, 1, 3)]
    weak = run_experiment(tiny("engine.preset=sglang", "acceptance.alpha=0.3", policies=policies))
    best = max(p.speedup_vs_no_spec for p in weak.policies if p.mean_k > 0)
    assert 0.7 < best < 1.3  # premise: within sglang's 30 %
    assert [w for w in weak.warnings if w.startswith(WITHIN_ERROR)]
    strong = run_experiment(tiny("engine.preset=sglang", "acceptance.alpha=0.9",
                                 "costs.pass_overhead_s=0.02", policies=policies))  # fmt: skip
    best = max(p.speedup_vs_no_spec for p in strong.policies if p.mean_k > 0)
    assert best > 1.3  # premise: high acceptance and a large per-pass cost make drafting pay
    assert not [w for w in strong.warnings if w.startswith(WITHIN_ERROR)]


def test_a_recommendation_names_the_batch_of_its_within_error_warning():
    from simspec.analysis.guardrails import K_AT_EDGE, PRESET_RANGE, at_batch

    assert at_batch(f"{WITHIN_ERROR}: the best", 8) == f"{WITHIN_ERROR}: at batch 8, the best"
    assert at_batch(f"{K_AT_EDGE}: the best", 2) == f"{K_AT_EDGE}: at batch 2, the best"
    assert at_batch(f"{PRESET_RANGE}: the preset", 8) == f"{PRESET_RANGE}: the preset"
