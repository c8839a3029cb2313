"""The rules that call a published row inconsistent look at measurements only."""

from __future__ import annotations

import dataclasses
import types

from simspec.validation import consistency
from simspec.validation.cases import Case

BASE = Case(
    id="tp1", category="decode", model="gpt-oss-120b", gpu="a100-sxm-80gb", num_gpus=1, tp=1,
    ep=1, engine="vLLM", precision="bf16", quantity="tokens_per_s_per_user", unit="tok/s",
    value=90.0, source="s", reporter="s", batch=1, prompt_tokens=128, output_tokens=512,
)  # fmt: skip


def _tp(tp: int, value: float, source: str = "s", **kw) -> Case:
    return dataclasses.replace(
        BASE, id=f"tp{tp}-{source}", tp=tp, num_gpus=tp, value=value, source=source,
        reporter=source, **kw,
    )  # fmt: skip


def test_more_tensor_parallelism_slower_per_step_beyond_the_tolerance_is_labelled():
    tol = consistency.SCALING_TOLERANCE
    slow = 90.0 / (1 + 2 * tol)  # per-user rate: its step is 1 + 2·tol times TP1's
    near = 90.0 / (1 + 0.5 * tol)
    labels = consistency.inconsistent([BASE, _tp(2, slow), _tp(4, near)])
    assert set(labels) == {"tp2-s"}
    assert "rule 1" in labels["tp2-s"] and "`tp1`" in labels["tp2-s"]


def test_a_folds_labels_come_from_its_own_rows():
    """Without the TP1 row nothing calls the TP2 row slower: held out, the label goes too."""
    assert consistency.inconsistent([_tp(2, 60.0)]) == {}


def test_two_reporters_far_apart_on_one_configuration_are_both_labelled():
    tol = consistency.AGREEMENT_TOLERANCE
    a, b = _tp(2, 100.0, "a"), _tp(2, 100.0 * (1 + 2 * tol), "b")
    assert set(consistency.inconsistent([a, b])) == {a.id, b.id}
    close = _tp(2, 100.0 * (1 + tol / 2), "b")
    assert consistency.inconsistent([a, close]) == {}
    # One reporter's two sources are one group: rule 2 compares reporters, not files.
    assert consistency.inconsistent([a, dataclasses.replace(b, reporter="a")]) == {}
    assert consistency.fold_key(types.SimpleNamespace(reporter="", source="x")) == "x"  # type: ignore[arg-type]
    # A test row neither gets nor gives a label: it never enters a fit.
    assert consistency.inconsistent([a, dataclasses.replace(b, role="test")]) == {}


def test_a_speedup_over_a_labelled_baseline_is_labelled():
    slow = _tp(2, 60.0)
    spec = dataclasses.replace(
        slow, id="spec", category="speculative", steps=3, acceptance_length=2.0,
        draft_tokens=4, baseline_value=60.0, value=80.0,
    )  # fmt: skip
    labels = consistency.inconsistent([BASE, slow, spec])
    assert "rule 3" in labels["spec"]
    other = dataclasses.replace(spec, baseline_value=75.0)  # not that baseline
    assert "spec" not in consistency.inconsistent([BASE, slow, other])


def test_a_row_the_source_attributes_to_an_unmodelled_effect_is_labelled():
    key = next(iter(consistency.SOURCE_STATED))
    row = dataclasses.replace(BASE, id=key)
    assert "rule 4" in consistency.inconsistent([row])[key]
