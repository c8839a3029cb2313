"""bench/presets.py: which rows fit which preset, the probe runs, the affine interpolation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from simspec.fit import presets
from simspec.validation import cases as cases_mod
from simspec.validation import predictions as predict

CASES = Path(__file__).resolve().parents[2] / "validation" / "cases.toml"


ROW = cases_mod.Case(
    id="r", category="decode", model="qwen3-30b-a3b", gpu="h100-sxm", num_gpus=2, tp=2, ep=1,
    engine="SGLang bench", precision="bf16", quantity="tpot_ms", unit="ms", value=5.0, source="s",
    reporter="r", batch=1, prompt_tokens=128, output_tokens=64,
)  # fmt: skip


@pytest.mark.parametrize(
    ("engine", "category", "preset"),
    [
        ("SGLang + FlashInfer, MT-Bench", "decode", "sglang"),
        ("vLLM (SemiAnalysis InferenceX)", "decode", "vllm"),
        ("TensorRT-LLM trtllm-serve", "decode", "trtllm"),
        ("not stated (TRT-LLM, SGLang and vLLM were all run)", "decode", "ideal"),
        ("vLLM benchmark_moe.py (fused_moe)", "kernel", "ideal"),
    ],
)
def test_rows_map_to_their_engine_preset(engine, category, preset):
    row = dataclasses.replace(ROW, engine=engine, category=category)
    assert cases_mod.engine_preset(row) == preset


SGLANG_DECODE = tuple(k for k in presets.DECODE_KEYS if k in presets.FITTED["sglang"])


def test_decode_rows_probe_only_the_overheads_that_can_touch_them():
    labels = [label for label, _ in presets.probe_runs(ROW)]
    assert labels == ["base", *SGLANG_DECODE]
    spec = dataclasses.replace(ROW, category="speculative", steps=3, acceptance_length=2.0)
    runs = dict(presets.probe_runs(spec))
    assert set(runs) == {"base", *presets.priced_keys("sglang")}
    assert all(v == 0.0 for k, v in runs["base"].items() if k != "draft_extend_passes")
    assert runs["base"]["draft_extend_passes"] == 1.0
    unit = presets.BOUNDS["verify_overhead_s"][0]
    assert runs["verify_overhead_s"]["verify_overhead_s"] == unit


def test_affine_row_reproduces_its_probes_and_interpolates_between():
    keys = presets.priced_keys("sglang")
    base = {"tpot_ms": 5.0, "baseline_tpot_ms": 5.0, "ttft_ms": 20.0, "s_per_token": 0.005}
    base |= {"baseline_s_per_token": 0.005, "tpot_p50_ms": 5.0, "baseline_tpot_p50_ms": 5.0}
    base["ttft_p50_ms"] = 20.0
    runs = {"base": base}
    for key in SGLANG_DECODE:  # one unit of each adds 1 ms / 0.5 ms to the TPOT
        step = 1.0 if key == "pass_overhead_s" else 0.5
        runs[key] = base | {"tpot_ms": 5.0 + step}
    row = presets.AffineRow(ROW, runs)
    units = np.array([presets.BOUNDS[k][0] for k in keys])
    theta = np.where(np.array(keys) == "pass_overhead_s", units, 0.0)
    assert row.predict(np.zeros(len(keys))) == pytest.approx(5.0)
    assert row.predict(theta) == pytest.approx(6.0)
    slopes = 1.0 + 0.5 * (len(SGLANG_DECODE) - 1)
    assert row.predict(2.5 * units * np.isin(keys, SGLANG_DECODE)) == pytest.approx(
        5.0 + 2.5 * slopes
    )
    assert row.log_error(np.zeros(len(keys))) == pytest.approx(0.0)  # measured 5 ms


def test_rounding_keeps_three_digits_and_drops_numerical_dust():
    keys = ("pass_overhead_s", "comm_s_per_layer")
    out = presets.round_values(np.array([0.0027137, 4.9e-17]), keys)
    assert out.tolist() == [0.00271, 0.0]


def test_single_gpu_rows_do_not_probe_the_collectives_software():
    # One GPU runs no collective: a probe of their per-layer software would equal the base run.
    spec = dataclasses.replace(
        ROW, category="speculative", num_gpus=1, tp=1, ep=1, steps=3, acceptance_length=2.0
    )
    labels = {label for label, _ in presets.probe_runs(spec)}
    assert labels == {"base", *presets.priced_keys("sglang")} - {"comm_s_per_layer"}
    row = presets.AffineRow(spec, {"base": dict.fromkeys(predict.TIMES, 1.0)})
    assert not row.slopes.any()


@pytest.mark.parametrize(("precision", "expert_precision", "probed"), [
    ("fp8", "", True), ("bf16", "", False), ("nvfp4", "", False), ("bf16", "fp8", True),
    ("fp8", "nvfp4", False),
])  # fmt: skip
def test_only_rows_with_fp8_experts_probe_the_fp8_moe_term(precision, expert_precision, probed):
    row = dataclasses.replace(
        ROW, engine="TensorRT-LLM trtllm-serve", precision=precision,
        expert_precision=expert_precision,
    )  # fmt: skip
    labels = {label for label, _ in presets.probe_runs(row)}
    assert ("fp8_moe_s_per_layer" in labels) is probed
    assert "pass_overhead_s" in labels


@pytest.mark.parametrize("side", [-1.0, 1.0])
@pytest.mark.parametrize("fraction", [0.0, 0.5, 0.999, 1.001, 2.0, 10.0])
def test_the_sign_is_checked_exactly_outside_the_noise_band(side, fraction):
    """Within SIGN_NOISE of 1 no sign is checked; outside, sign(predicted − 1) is compared."""
    measured = 1.0 + side * fraction * predict.SIGN_NOISE
    for predicted in (0.5, 0.999, 1.001, 1.5):
        got = predict.speedup_sign_right("speculative", predicted, measured)
        if fraction <= 1.0:
            assert got is None
        else:
            assert got is ((predicted > 1.0) == (measured > 1.0))
        assert predict.speedup_sign_right("decode", predicted, measured) is None
    assert predict.speedup_sign_right("speculative", None, measured) is None


def test_the_summary_checks_the_sign_of_every_speculative_row_outside_the_band():
    """summary.json's signs_checked counts the shipped rows measured outside the band."""
    import json

    rows = [c for c in cases_mod.load_cases(CASES).cases if c.category == "speculative"]
    outside = sum(1 for c in rows if abs(c.measured_speedup - 1.0) > predict.SIGN_NOISE)
    summary = json.loads((CASES.parent / "summary.json").read_text(encoding="utf-8"))
    assert summary["speculative"]["signs_checked"] == outside
    folds = json.loads((CASES.parent / "folds.json").read_text(encoding="utf-8"))
    held = [r for r in folds["rows"] if r["category"] == "speculative" and r["predicted"]]
    held_outside = sum(1 for r in held if abs(r["measured"] - 1.0) > predict.SIGN_NOISE)
    assert summary["out_of_sample"]["speculative"]["signs_checked"] == held_outside


def test_every_preset_fits_at_most_three_engine_terms_each_explained():
    for engine, keys in presets.FITTED.items():
        assert 1 <= len(keys) <= 3, engine
        assert all(
            k in presets.MEANING and k in presets.BOUNDS and k in presets.PLAUSIBLE for k in keys
        )


def test_a_fitted_value_outside_its_plausible_range_is_flagged_in_the_notes():
    ok = {"values": {"pass_overhead_s": 5e-4}, "rows": [], "fitted_rows": 0, "fitted_range": []}
    ok["median_abs_relative_error"] = 0.1
    assert "OUTSIDE" not in presets.preset_toml("vllm", ok)
    bad = {**ok, "values": {"pass_overhead_s": 2e-3}}
    assert presets.implausible(bad["values"]) == ["pass_overhead_s"]
    assert "pass_overhead_s = 0.002 s is OUTSIDE" in presets.preset_toml("vllm", bad)
    # No host time per pass is implausible for an engine that exposes its scheduler (vLLM,
    # SGLang without their overlap) and plausible for one that overlaps it (TensorRT-LLM).
    none = {**ok, "values": {"pass_overhead_s": 0.0}}
    assert presets.implausible(none["values"], "vllm") == ["pass_overhead_s"]
    assert presets.implausible(none["values"], "trtllm") == []
    assert presets.DESIGN["trtllm"]["overlap_scheduling"]
    assert not presets.DESIGN["vllm"]["overlap_scheduling"]
    assert "OUTSIDE" not in presets.preset_toml("trtllm", none)


def test_every_reporter_weighs_the_same_in_the_fit():
    base = {"base": dict.fromkeys(predict.TIMES, 1.0)}
    rows = [
        presets.AffineRow(dataclasses.replace(ROW, id=f"r{i}", source=source), base)
        for i, source in enumerate(["a", "a", "a", "b", "c", "c"])
    ]
    w = presets.reporter_weights(rows)
    by_source = {s: sum(w[i] for i, r in enumerate(rows) if r.case.source == s) for s in "abc"}
    assert by_source == pytest.approx({"a": 1.0, "b": 1.0, "c": 1.0})
    # Sources a and b measured by one person: together they weigh what c weighs.
    w = presets.reporter_weights(rows, {"a": "x", "b": "x"})
    assert sum(w[:4]) == pytest.approx(1.0) == sum(w[4:])


def test_the_weighted_loss_is_soft_l1_of_each_rows_own_error():
    """Σ residual² = s² Σ w ρ((r/s)²), ρ(z) = 2(sqrt(1+z) − 1): closed form at three errors."""
    r = np.array([0.01, -0.1, 0.5])
    w = np.array([1.0, 0.5, 0.25])
    s = presets.LOSS_SCALE
    rho = 2 * (np.sqrt(1 + (r / s) ** 2) - 1)
    g = presets.weighted_soft_l1(r, w)
    assert np.sum(g**2) == pytest.approx(s**2 * np.sum(w * rho))
    assert np.all(np.sign(g) == np.sign(r))
    # small errors: least squares (g ≈ sqrt(w) r); large: linear in |r|
    assert g[0] == pytest.approx(np.sqrt(w[0]) * r[0], rel=2e-3)


ONLY_PASS = ("verify_overhead_s", "comm_s_per_layer")


def _disagreeing_rows(n_a: int, n_b: int, a_ms: float = 1.2, b_ms: float = 1.8):
    """Rows of two reporters whose TPOT is 1 ms + the overhead: reporter a measures 1.2 ms on
    every row, b 1.8 ms (they disagree by 1.5x, far beyond the loss scale)."""
    rows = []
    for i, (source, value) in enumerate([("a", a_ms)] * n_a + [("b", b_ms)] * n_b):
        case = dataclasses.replace(ROW, id=f"{source}{i}", source=source, value=value)
        base = dict.fromkeys(predict.TIMES, 1.0) | {"tpot_ms": 1.0}
        probes = {
            label: base | {"tpot_ms": 1.0 + (0.0 if label == "base" else 1.0)}
            for label, _ in presets.probe_runs(case, ONLY_PASS)
        }
        rows.append(presets.AffineRow(case, probes, ONLY_PASS))
    return rows


def test_a_reporter_that_publishes_more_rows_does_not_pull_harder():
    """Nine identical rows of one reporter against one row of another give the fit that one
    row each gives: the weight and the robust loss act per reporter, not per row."""
    keys = presets.fitted_keys("sglang", ONLY_PASS)
    one_each = presets.fit(_disagreeing_rows(1, 1), keys)
    nine_to_one = presets.fit(_disagreeing_rows(9, 1), keys)
    assert nine_to_one == pytest.approx(one_each, rel=1e-3)
    # between the two reporters' own values (0.2 ms and 0.8 ms), not at a bound
    assert 0.25e-3 < one_each[0] < 0.75e-3


def test_no_fitted_value_leaves_its_plausible_range_upwards():
    rows = _disagreeing_rows(0, 3, b_ms=3.0)  # all want 2 ms per pass: above 1 ms
    value = presets.fit(rows, presets.fitted_keys("sglang", ONLY_PASS))[0]
    assert value == pytest.approx(presets.PLAUSIBLE["pass_overhead_s"][1])


def test_the_catalog_presets_are_what_the_fit_writes():
    """Each shipped engine preset is :func:`preset_toml` of the shipped fit, byte for byte."""
    import json

    import simspec.catalog

    fit = json.loads((CASES.parent / "preset_fit.json").read_text(encoding="utf-8"))
    folder = Path(simspec.catalog.__file__).parent / "engines"
    assert set(fit) == set(presets.FITTED)
    for engine, result in fit.items():
        text = (folder / f"{engine}.toml").read_text(encoding="utf-8")
        assert text == presets.preset_toml(engine, result)


def _decode_probes(case, tpot_ms, per_unit_ms):
    """Probe times of a decode row whose TPOT grows by ``per_unit_ms`` per unit of each key."""
    base = dict.fromkeys(predict.TIMES, 1.0) | {"tpot_ms": tpot_ms}
    return {
        label: base | {"tpot_ms": tpot_ms + (0.0 if label == "base" else per_unit_ms)}
        for label, _ in presets.probe_runs(case)
    }


def test_a_test_row_never_changes_a_fitted_value():
    """The preset fit skips role = "test" rows: the fitted values are those without the row,
    and the same row as a "fit" row moves them (so this test can fail)."""
    fit_rows = [
        dataclasses.replace(ROW, id=f"f{i}", value=5.0 + i, batch=1 + i) for i in range(3)
    ] + [  # every fitted engine needs a row
        dataclasses.replace(ROW, id=engine, engine=engine, value=6.0, batch=2)
        for engine in ("vLLM", "TensorRT-LLM")
    ]
    # Another batch size: at one fit row's configuration the two reporters would disagree by
    # 8x and both be called inconsistent (simspec.validation.consistency, rule 2).
    outlier = dataclasses.replace(
        ROW, id="t", value=40.0, source="other", reporter="other", batch=5
    )
    probes = {c.id: _decode_probes(c, 4.0 + c.batch, 1.0) for c in [*fit_rows, outlier]}

    def values(rows):
        result = presets.fit_presets(rows, probes={k: dict(v) for k, v in probes.items()})
        return result["sglang"]["values"], result["sglang"]["rows"]

    alone, alone_rows = values(fit_rows)
    with_test, with_test_rows = values([*fit_rows, dataclasses.replace(outlier, role="test")])
    as_fit, _ = values([*fit_rows, outlier])
    assert with_test == alone
    assert [r["id"] for r in with_test_rows] == [r["id"] for r in alone_rows]
    assert as_fit != alone  # a fit row 8x slower than the others pulls the overheads up
    assert as_fit["pass_overhead_s"] > alone["pass_overhead_s"]


def test_kernel_fit_reads_only_fit_rows():
    from simspec.fit.kernels import load_rows

    file = cases_mod.load_cases(CASES)
    kernel = [c for c in file.cases if c.category == "kernel" and c.role == "fit"]
    assert kernel and len(load_rows(file)) == len(kernel)
    marked = dataclasses.replace(file, cases=[dataclasses.replace(kernel[0], role="test")])
    assert load_rows(marked) == []
    assert len(load_rows(dataclasses.replace(file, cases=kernel[:1]))) == 1


def _overlap_row(off_tok_s: float, on_tok_s: float, al: float = 2.0) -> cases_mod.Case:
    """One speculative setting without and with SGLang's overlap scheduler for speculation."""
    return dataclasses.replace(
        ROW, id=f"o{off_tok_s}", category="overlap", quantity="tokens_per_s", unit="tok/s",
        value=on_tok_s, baseline_value=off_tok_s, acceptance_length=al, steps=3, topk=1,
        draft_tokens=4,
    )  # fmt: skip


def test_the_measured_term_is_the_largest_direct_measurement_of_the_hidden_host_time():
    """verify_overhead_s is the largest host time the overlap scheduler was measured to hide:
    an overlap row hides AL·(1/off − 1/on) per iteration at batch 1 (closed form here), the
    cited measurement stands alone without one, and other engines measure nothing."""
    assert "verify_overhead_s" not in presets.FITTED["sglang"]
    assert presets.priced_keys("sglang")[-1] == "verify_overhead_s"
    cited = max(presets.CITED_HIDDEN_HOST_S["sglang"])
    assert presets.measured_values("sglang", [ROW]) == {"verify_overhead_s": cited}
    big = _overlap_row(100.0, 125.0)  # 2 tokens in 20 ms off, 16 ms on: 4 ms hidden
    small = _overlap_row(100.0, 100.5)  # 0.1 ms hidden: below the cited one
    assert presets.measured_values("sglang", [ROW, big, small]) == {
        "verify_overhead_s": pytest.approx(4e-3)
    }
    assert presets.measured_values("sglang", [small]) == {"verify_overhead_s": cited}
    assert presets.measured_values("vllm", [big]) == {}
    # a test row (predicted only) measures nothing the shipped numbers may rest on
    unfit = dataclasses.replace(big, role="test")
    assert presets.measured_values("sglang", [unfit]) == {"verify_overhead_s": cited}
    assert presets.measurement_rows("sglang", [ROW, big, unfit]) == [big]
    shipped = cases_mod.load_cases(CASES).cases
    overlap = [c for c in shipped if c.category == "overlap"]
    assert overlap  # PR #12128's row: 2.296 × (1/140.52 − 1/159.71) s = 1.96 ms
    value = presets.measured_values("sglang", shipped)["verify_overhead_s"]
    assert value == pytest.approx(max(c.exposed_host_ms for c in overlap) * 1e-3, rel=2e-3)
    assert value == pytest.approx(1.96e-3, abs=5e-6)


def test_a_pinned_term_keeps_its_value_and_the_others_fit_around_it():
    """Rows whose TPOT is 1 ms + pass + verify, measured at 2.2 ms: verify pinned at 1 ms
    leaves 0.2 ms per pass to the fit; unpinned, the two terms share the 1.2 ms."""
    keys = ("pass_overhead_s", "verify_overhead_s")
    rows = []
    for i, batch in enumerate((1, 2, 4)):
        case = dataclasses.replace(ROW, id=f"p{i}", batch=batch, value=2.2, source=f"s{i}")
        base = dict.fromkeys(predict.TIMES, 1.0) | {"tpot_ms": 1.0}
        probes = {"base": base} | {k: base | {"tpot_ms": 2.0} for k in keys}
        rows.append(presets.AffineRow(case, probes, ("comm_s_per_layer",)))
    theta = presets.fit(rows, keys, pinned={"verify_overhead_s": 1e-3})
    assert theta[1] == 1e-3
    assert theta[0] == pytest.approx(0.2e-3, rel=1e-3)
    free = presets.fit(rows, keys)
    assert free.sum() == pytest.approx(1.2e-3, rel=1e-3) and free[1] != 1e-3
    assert presets.fit(rows, keys, pinned=dict(zip(keys, (3e-4, 5e-4), strict=True))).tolist() == [
        3e-4,
        5e-4,
    ]
