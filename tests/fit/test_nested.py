"""Nested leave-one-group-out: a held-out row never informs its own prediction."""

from __future__ import annotations

import dataclasses

import pytest

from simspec.fit import nested
from simspec.text.tree import expected_acceptance_length, fit_alpha
from simspec.validation.cases import Case
from simspec.validation.holdout import group_medians, out_of_sample

ROW = Case(
    id="a", category="decode", model="qwen3-30b-a3b", gpu="h100-sxm", num_gpus=1, tp=1, ep=1,
    engine="vLLM", precision="bf16", quantity="tpot_ms", unit="ms", value=5.0, source="a",
    reporter="a",
    batch=1, prompt_tokens=64, output_tokens=8,
)  # fmt: skip
CHAIN = dataclasses.replace(
    ROW, id="chain", category="speculative", engine="SGLang", steps=3, topk=1, draft_tokens=4,
    acceptance_length=2.0, quantity="tokens_per_s", unit="tok/s", value=1.0, baseline_value=1.0,
)  # fmt: skip


def test_the_rank_decay_is_the_one_that_reproduces_a_tree_rows_acceptance_length():
    alpha = fit_alpha(CHAIN.acceptance_length, 3, 1, 4, 0.0)
    al = expected_acceptance_length(alpha, 3, 3, 8, 0.7)
    tree = dataclasses.replace(CHAIN, id="tree", topk=3, draft_tokens=8, acceptance_length=al)
    rho, each = nested.rank_decay([CHAIN, tree])
    assert rho == pytest.approx(0.7, abs=1e-4) and len(each) == 1
    assert nested.rank_decay([tree]) == (None, [])  # no chain: not identified
    other = dataclasses.replace(tree, batch=4)  # a chain of another setting says nothing
    assert nested.rank_decay([CHAIN, other]) == (None, [])


@pytest.fixture(scope="module")
def probes():
    return {}


def _folds(rows, probes):
    return nested.nested_folds(rows, probes=probes)


def _predicted(folds, row_id):
    return next(r for r in folds["rows"] if r["id"] == row_id)


def test_a_held_out_rows_prediction_ignores_its_own_measurement(probes):
    a = ROW
    b = dataclasses.replace(ROW, id="b", source="b", reporter="b", batch=2, value=6.0)
    trt = dataclasses.replace(
        ROW, id="t", source="t", reporter="t", engine="TensorRT-LLM", value=4.0
    )
    first = _folds([a, b, trt], probes)
    moved_a = _folds([dataclasses.replace(a, value=50.0), b, trt], probes)
    moved_b = _folds([a, dataclasses.replace(b, value=50.0), trt], probes)
    pa = _predicted(first, "a")["predicted"]
    assert _predicted(moved_a, "a")["predicted"] == pytest.approx(pa)  # its own value: no effect
    # a training row's value is fitted (up to the plausible top of the per-pass overhead)
    assert _predicted(moved_b, "a")["predicted"] > 1.1 * pa
    # TensorRT-LLM's only group held out: nothing to fit its preset on.
    t = _predicted(first, "t")
    assert t["predicted"] is None and "not identifiable" in t["note"]
    summary = out_of_sample(first)
    assert summary["decode"]["not_identifiable"] == 1
    assert summary["decode"]["predicted_rows"] == 2
    assert "not identifiable" in summary["engines"]["trtllm"]["note"]


def test_a_test_row_is_predicted_when_held_out_and_never_fitted(probes):
    a = ROW
    b = dataclasses.replace(ROW, id="b", source="b", reporter="b", batch=2, value=6.0)
    found = dataclasses.replace(b, id="c", source="c", reporter="c", batch=4, value=50.0)
    without = _folds([a, b], probes)
    tagged = _folds([a, b, dataclasses.replace(found, role="test")], probes)
    fitted = _folds([a, b, found], probes)
    pa = _predicted(without, "a")["predicted"]
    assert _predicted(tagged, "a")["predicted"] == pytest.approx(pa)
    assert _predicted(fitted, "a")["predicted"] > 1.1 * pa  # the same row, fitted on
    assert _predicted(tagged, "c")["predicted"] is not None


def test_a_test_row_is_simulated_only_for_the_fold_that_holds_it_out():
    """A test row informs no fit, so only its own fold predicts it: the folds that train on it
    (here the one without the rank decay's rows, which falls back to the prior) never simulate
    it at their own rank decay."""
    alpha = fit_alpha(CHAIN.acceptance_length, 3, 1, 4, 0.0)
    al = expected_acceptance_length(alpha, 3, 3, 8, 0.7)
    chain = dataclasses.replace(CHAIN, source="x", reporter="x")
    tree = dataclasses.replace(chain, id="tree", topk=3, draft_tokens=8, acceptance_length=al)
    found = dataclasses.replace(
        tree, id="found", source="t", reporter="t", role="test", value=0.9, batch=2
    )
    runs: dict = {}
    folds = nested.nested_folds([chain, tree, found], probes=runs)
    rhos = {f["group"]: f["rank_decay"] for f in folds["folds"]}
    assert rhos["x"] == nested.RANK_DECAY_PRIOR and rhos["t"] == pytest.approx(0.7, abs=1e-4)
    simulated = {key.split("|r")[1] for key in runs if key.startswith("found|")}
    assert simulated == {f"{rhos['t']:g}"}
    assert _predicted(folds, "found")["predicted"] is not None


def test_a_fold_chooses_the_benchmark_spread_its_training_rows_measure():
    from simspec.validation.predictions import quantity, run_times

    bench = dataclasses.replace(
        ROW, id="bench", source="b", reporter="b", engine="not stated", batch=4, num_requests=8,
        output_tokens=64, length_jitter=0.8, quantity="tokens_per_s", unit="tok/s",
    )  # fmt: skip
    spread = nested.JITTER_GRID[1]
    truth = dataclasses.replace(bench, length_jitter=spread)
    measured = quantity(truth, run_times(truth))
    folds = nested.nested_folds([ROW, dataclasses.replace(bench, value=measured)])
    fold = next(f for f in folds["folds"] if f["group"] == "a")
    assert fold["length_jitter"] == spread
    # Held out, the benchmark row is predicted at the spread of the rows left (none: the file's).
    assert _predicted(folds, "bench")["predicted"] == pytest.approx(measured, rel=0.5)


def test_every_reporter_weighs_the_same_in_the_median_of_reporter_medians():
    """Three rows of reporter a (errors 10, 20, 90 %) and one of b (5 %): the row median is
    15 %, the median of the reporters' medians (20 % and 5 %) 12.5 %; an unpredicted row
    counts in neither."""
    rows = [
        {"id": f"r{i}", "category": "decode", "engine": "vllm", "group": g, "measured": 1.0,
         "predicted": None if e is None else 1.0 + e}
        for i, (g, e) in enumerate([("a", 0.1), ("a", 0.2), ("a", -0.9), ("b", 0.05), ("c", None)])
    ]  # fmt: skip
    assert group_medians(rows) == pytest.approx({"a": 0.2, "b": 0.05})
    folds = {"rows": rows, "folds": [], "full": {"rank_decay": 0.5, "length_jitter": None,
             "labels": {}}, "caveats": []}  # fmt: skip
    decode = out_of_sample(folds)["decode"]
    assert decode["median_abs_relative_error"] == pytest.approx(0.15)
    assert decode["median_of_group_medians"] == pytest.approx(0.125)
    assert decode["groups_predicted"] == 2 and decode["not_identifiable"] == 1
