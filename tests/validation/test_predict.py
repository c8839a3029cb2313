"""Benchmark rows (num_requests, length_jitter): the finite request set a benchmark ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from simspec.errors import InputError
from simspec.validation import _sections as sections
from simspec.validation import cases as cases_mod
from simspec.validation import predictions as predict

CASES = Path(__file__).resolve().parents[2] / "validation" / "cases.toml"


ROW = """
[sources.s]
url = "https://example.org"
[[cases]]
id = "x"
category = "decode"
model = "qwen3-30b-a3b"
gpu = "h100-sxm"
num_gpus = 2
tp = 2
ep = 1
engine = "SGLang bench"
precision = "bf16"
batch = [1, 8, 32]
prompt_tokens = 100
output_tokens = 2180
num_requests = 20
length_jitter = 0.8
quantity = "tokens_per_s"
unit = "tok/s"
value = [200.0, 700.0, 1000.0]
source = "s"
reporter = "r"
"""


def _rows(tmp_path, text=ROW):
    path = tmp_path / "cases.toml"
    path.write_text(text, encoding="utf-8")
    return cases_mod.load_cases(path).cases


def test_benchmark_rows_run_the_finite_request_set_with_scaled_lengths(tmp_path):
    one, eight, many = _rows(tmp_path)
    w = predict.scenario_data(eight)["workload"]
    assert (w["num_requests"], w["concurrency"], w["length_jitter"]) == (20, 8, 0.8)
    # Lengths scale to the cap; the prompt moves up by half the rest: the mean context is kept.
    cap = predict.BENCH_OUTPUT_CAP
    assert w["output_tokens"] == cap
    assert w["prompt_tokens"] + w["output_tokens"] / 2 == pytest.approx(100 + 2180 / 2, abs=1)
    # More concurrency than requests: the closed loop runs the 20 requests at once.
    assert predict.scenario_data(many)["workload"]["num_requests"] == 20
    # Batch 1 runs one request at a time: its throughput is one request's.
    w1 = predict.scenario_data(one)["workload"]
    assert (w1["num_requests"], w1["length_jitter"]) == (predict.MIN_REQUESTS, 0.0)


def test_rows_without_a_request_count_keep_the_steady_closed_loop(tmp_path):
    text = ROW.replace("num_requests = 20\nlength_jitter = 0.8\n", "")
    row = _rows(tmp_path, text)[1]
    w = predict.scenario_data(row)["workload"]
    assert (w["num_requests"], w["output_tokens"], w["length_jitter"]) == (8, 2180, 0.0)


def test_a_published_concurrency_above_the_default_cap_is_the_decoded_batch(tmp_path):
    from simspec.config.load import scenario_from_dict

    text = ROW.replace("batch = [1, 8, 32]", "batch = [1, 8, 512]").replace(
        "num_requests = 20\n", ""
    )
    row = _rows(tmp_path, text)[2]
    w = scenario_from_dict(predict.scenario_data(row), "x").workload
    # A closed loop decodes min(concurrency, max_batch_size) requests: all 512 published.
    assert w.concurrency == 512 and min(w.concurrency, w.max_batch_size) == 512


@pytest.mark.parametrize("bad", ["1.0", "-0.1", '"a"'])
def test_a_jitter_outside_zero_one_names_the_key(tmp_path, bad):
    with pytest.raises(InputError, match=r"cases\[0\]\.length_jitter"):
        _rows(tmp_path, ROW.replace("length_jitter = 0.8", f"length_jitter = {bad}"))


def test_throughput_speedups_are_makespan_ratios_and_tpot_speedups_tpot_ratios():
    times = {"tpot_ms": 5.0, "baseline_tpot_ms": 6.0, "ttft_ms": 1.0}
    times |= {"s_per_token": 0.002, "baseline_s_per_token": 0.003}
    by_id = {c.id: c for c in cases_mod.load_cases(CASES).cases}
    rate = by_id["qwen3-30b-2xh100-tp2-eagle3-bs4[0]"]
    tpot = by_id["glm-4.7-flash-1xh100-eagle3-bs1"]
    assert predict.quantity(rate, times) == pytest.approx(1.5)
    assert predict.quantity(tpot, times) == pytest.approx(1.2)


def test_implied_step_time_of_each_quantity(tmp_path):
    _one, eight, many = _rows(tmp_path)
    assert sections.step_ms(eight, 800.0) == pytest.approx(10.0)  # 8 requests / 800 tok/s
    # 32 slots but only 20 requests in the benchmark: 20 run at once.
    assert sections.step_ms(many, 1000.0) == pytest.approx(20.0)
    tpot = _rows(tmp_path, ROW.replace('"tokens_per_s"', '"tpot_ms"').replace("tok/s", "ms"))[0]
    assert sections.step_ms(tpot, 7.5) == 7.5
    assert sections._growth([4.0, 10.0, 20.0], [1, 8, 20]) == "857 / 833"


def test_the_summary_counts_errors_and_signs_per_category():
    from simspec.validation.predictions import Outcome
    from simspec.validation.report import summarize

    by_id = {c.id: c for c in cases_mod.load_cases(CASES).cases}
    kernel = by_id["qwen3-30b-a100-pcie-bf16[0]"]
    spec = by_id["glm-4.7-flash-1xh100-eagle3-bs1"]  # measured speedup 1.39x
    outcomes = [
        Outcome(kernel, 100.0, 110.0, ideal=110.0),  # +10 %
        Outcome(kernel, 100.0, 70.0, ideal=70.0),  # -30 %
        Outcome(kernel, 100.0, None, "no scenario"),  # not predicted
        Outcome(spec, 1.39, 0.9, ideal=1.2),  # wrong sign with the preset, right without
        Outcome(spec, 1.39, 1.39 * 1.05, ideal=1.39),
    ]
    summary = summarize(outcomes)
    k = summary["kernel"]
    assert (k["rows"], k["predicted_rows"]) == (3, 2)
    assert k["median_abs_relative_error"] == pytest.approx(0.2)
    assert k["max_abs_relative_error"] == pytest.approx(0.3)
    s = summary["speculative"]
    assert (s["signs_checked"], s["wrong_signs"], s["ideal_wrong_signs"]) == (2, 1, 0)
    assert s["ideal_median_abs_relative_error"] == pytest.approx((1 - 1.2 / 1.39) / 2, abs=1e-4)
    assert summary["decode"]["predicted_rows"] == 0
    assert summary["decode"]["median_abs_relative_error"] is None


def test_a_row_that_ran_an_overlap_scheduler_hides_the_speculative_host_time():
    """A row whose source ran SGLang's overlap scheduler for speculation (SpecV2) is predicted
    with it: the sglang preset's per-iteration host time is hidden, so the predicted speedup
    is higher than the same row's under the engine's default (no overlap)."""
    import dataclasses

    from simspec import catalog
    from simspec.config.load import scenario_from_dict

    spec = next(c for c in cases_mod.load_cases(CASES).cases if c.category == "speculative")
    spec = dataclasses.replace(spec, engine="SGLang EAGLE3", batch=1, overlap_scheduling="")
    on = dataclasses.replace(spec, overlap_scheduling="on")
    assert "overlap_scheduling" not in predict.scenario_data(spec, "sglang")["engine"]
    assert predict.scenario_data(on, "sglang")["engine"]["overlap_scheduling"] is True
    data = predict.scenario_data(spec, "sglang")
    assert not scenario_from_dict(data, "x").roofline.overlap_scheduling
    assert scenario_from_dict(predict.scenario_data(on, "sglang"), "x").roofline.overlap_scheduling
    assert catalog.get_engine("sglang").overrides()["verify_overhead_s"] > 0
    assert predict.predict_run(on) > 1.02 * predict.predict_run(spec)


def test_speculative_rows_are_summarised_by_draft_shape_in_and_out_of_sample():
    import dataclasses

    from simspec.validation.predictions import Outcome
    from simspec.validation.report import shape_summary

    by_id = {c.id: c for c in cases_mod.load_cases(CASES).cases}
    tree = by_id["glm-4.7-flash-1xh100-eagle3-bs1"]  # (3, 4, 6): topk 4
    chain = dataclasses.replace(tree, id="chain", topk=1, draft_tokens=4)
    outcomes = [
        Outcome(tree, 1.4, 1.4 * 1.1),  # +10 %, right sign
        Outcome(tree, 1.4, 0.7),  # -50 %, wrong sign
        Outcome(chain, 0.8, 0.8 * 1.2),  # +20 %, right sign (0.96 < 1)
    ]
    held = {tree.id: 1.4 * 0.9, chain.id: 1.2}  # out of sample: -10 % / wrong sign
    shapes = shape_summary(outcomes, held)
    assert shapes["tree"]["rows"] == 2 and shapes["chain"]["rows"] == 1
    assert shapes["tree"]["median_abs_relative_error"] == pytest.approx(0.3)
    assert (shapes["tree"]["wrong_signs"], shapes["tree"]["signs_checked"]) == (1, 2)
    assert shapes["chain"]["median_abs_relative_error"] == pytest.approx(0.2)
    out = shapes["chain"]["out_of_sample"]
    assert out["median_abs_relative_error"] == pytest.approx(0.5)
    assert (out["wrong_signs"], out["signs_checked"]) == (1, 1)
    assert "out_of_sample" not in shape_summary(outcomes)["tree"]


def test_the_shipped_numbers_were_fitted_on_the_rows_their_fits_name_and_no_other():
    """:func:`fitted_on` (the report's held-out-by-construction split): a row the shipped
    preset's fit used (validation/preset_fit.json), a kernel row of a fit series at decode
    sizes; not a test row, not a fit series' row beyond the fitted sizes, not a renamed copy."""
    import dataclasses
    import json

    from simspec.fit.kernels import FIT_SERIES, M_MAX
    from simspec.params import MOE_KERNEL_FIT_MAX_TOKENS, MOE_KERNEL_FIT_SERIES
    from simspec.validation.fitted import fitted_on

    assert tuple(FIT_SERIES) == MOE_KERNEL_FIT_SERIES and M_MAX == MOE_KERNEL_FIT_MAX_TOKENS
    fit = json.loads((CASES.parent / "preset_fit.json").read_text(encoding="utf-8"))
    used = {r["id"] for engine in fit.values() for r in engine["rows"] if r["fitted"]}
    unused = {r["id"] for engine in fit.values() for r in engine["rows"] if not r["fitted"]}
    cases = cases_mod.load_cases(CASES).cases
    by_id = {c.id: c for c in cases}
    assert used and unused
    assert all(fitted_on(by_id[i]) for i in used)
    assert not any(fitted_on(by_id[i]) for i in unused)
    assert not any(fitted_on(c) for c in cases if c.role == "test")
    copy = dataclasses.replace(by_id[sorted(used)[0]], id="my-own-row")
    assert not fitted_on(copy)
    kernel = [c for c in cases if c.category == "kernel" and c.id.split("[")[0] in FIT_SERIES]
    assert any(fitted_on(c) for c in kernel if c.tokens <= M_MAX)
    assert not any(fitted_on(c) for c in kernel if c.tokens > M_MAX)


SERVING = (
    ROW.replace("length_jitter = 0.8\n", "range_ratio = 0.8\n")
    .replace("num_requests = 20", "num_requests = [10, 80, 320]")
    .replace('"tokens_per_s"', '"tpot_ms"')
    .replace('"tok/s"', '"ms"')
    .replace("value = [200.0, 700.0, 1000.0]", "value = [5.0, 7.0, 9.0]")
)


def test_serving_benchmark_rows_run_whole_over_their_length_distribution(tmp_path):
    """bench_serving's random dataset draws each length uniformly in [r·L, L]: the run's
    lengths are uniform in mean·(1 ± j) with mean (1 + r)/2·L and j = (1 − r)/(1 + r), over
    the benchmark's own requests, with no length capped (batch 1 included)."""
    one, eight, _ = _rows(tmp_path, SERVING)
    assert predict.serving_benchmark(eight)
    w = predict.scenario_data(eight)["workload"]
    assert w["num_requests"] == 80 and w["concurrency"] == 8
    j = w["length_jitter"]
    for length, stated in ((w["prompt_tokens"], 100), (w["output_tokens"], 2180)):
        assert length * (1 - j) == pytest.approx(0.8 * stated, abs=1)
        assert length * (1 + j) == pytest.approx(stated, abs=1)
    w1 = predict.scenario_data(one)["workload"]
    assert (w1["num_requests"], w1["output_tokens"], w1["length_jitter"]) == (10, 1962, j)


def test_a_serving_benchmark_publishes_the_median_tpot_over_its_requests(tmp_path):
    row = _rows(tmp_path, SERVING)[1]
    times = {"tpot_ms": 5.0, "baseline_tpot_ms": 6.0, "ttft_ms": 1.0}
    times |= {"s_per_token": 0.002, "baseline_s_per_token": 0.003}
    times |= {"tpot_p50_ms": 5.5, "baseline_tpot_p50_ms": 6.5}
    assert predict.quantity(row, times) == 5.5
    steady = _rows(tmp_path, SERVING.replace("range_ratio = 0.8\n", ""))[1]
    assert predict.quantity(steady, times) == 5.0


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("num_requests = [10, 80, 320]\n", "", "range_ratio"),
        ('"tpot_ms"', '"e2e_latency_s"', "range_ratio"),
        ("range_ratio = 0.8\n", "range_ratio = 0.8\nlength_jitter = 0.1\n", "length_jitter"),
        ("range_ratio = 0.8\n", "range_ratio = 1.0\n", "range_ratio"),
    ],
)
def test_a_serving_benchmark_row_needs_its_requests_and_a_tpot(tmp_path, old, new, key):
    text = SERVING.replace(old, new)
    if "e2e_latency_s" in new:
        text = text.replace('unit = "ms"', 'unit = "s"')
    with pytest.raises(InputError, match=rf"cases\[0\]\.{key}"):
        _rows(tmp_path, text)


def test_a_serving_benchmarks_tpot_carries_the_prefills_of_the_replacements(tmp_path):
    """In a closed loop each finished request's replacement is prefilled while the others
    wait (a prefill pass between decode steps), so over a request's O steps the batch of C
    sees about C prefills of P seconds each: TPOT ≈ step + C·P/O. Here (7k-token prompts on
    Qwen3-30B-A3B, 16 requests of ~230 tokens) that stall is about a third of the step."""
    import dataclasses

    import numpy as np

    import simspec
    from simspec.config.load import scenario_from_dict
    from simspec.sim.setup import build_setup

    text = SERVING.replace("prompt_tokens = 100", "prompt_tokens = 8192").replace(
        "output_tokens = 2180", "output_tokens = 256"
    )
    row = dataclasses.replace(_rows(tmp_path, text)[2], batch=16, num_requests=160)
    data = predict.scenario_data(row, "ideal")
    scenario = scenario_from_dict(data, "x")
    measured = simspec.run(scenario).policies[0].tpot_p50_ms / 1e3
    w = data["workload"]
    prefill = build_setup(scenario).cost_model.prefill(np.array([w["prompt_tokens"]])).total_s
    steady = dataclasses.replace(row, range_ratio=0.0, num_requests=0, length_jitter=0.0)
    steady = dataclasses.replace(steady, prompt_tokens=w["prompt_tokens"])
    steady = dataclasses.replace(steady, output_tokens=w["output_tokens"])
    step = predict.run_times(steady, "ideal")["tpot_ms"] / 1e3
    expected = step + row.batch * prefill / w["output_tokens"]
    stall = row.batch * prefill / w["output_tokens"]
    assert stall > 0.25 * step  # the stall is no rounding error here
    assert measured == pytest.approx(expected, rel=0.05)


#: InferenceX's DeepSeek-R1 FP8 runs on 8x MI300X (SGLang, 2025-12-15; the InferenceX app's
#: fixture, source inferencex-dsr1-amd-sglang): median TPOT over median inter-token latency
#: at 8k/1k by concurrency. The engine streams every token there, so the inter-token latency
#: is the decode step and the ratio is the prefill stall TPOT carries.
MI300X_STALL = {4: 23.15 / 21.66, 16: 34.49 / 27.21, 64: 76.22 / 45.45}


def test_the_prefill_stall_grows_with_concurrency_as_measured_and_stays_below_it():
    """A serving-benchmark row's TPOT over the steady decode step of the same lengths: above 1,
    growing with concurrency as the measured ratio does, and between 40 % and 100 % of the
    measured excess (the roofline prices a prefill below what these runs spent on it)."""
    import dataclasses

    rows = {
        c.batch: c
        for c in cases_mod.load_cases(CASES).cases
        if c.id.startswith("deepseek-r1-8xmi300x-sglang-inferencex") and c.prompt_tokens == 8192
    }
    ratios = {}
    for batch, row in sorted(rows.items()):
        whole = predict.run_times(row, "ideal")["tpot_p50_ms"]
        steady = dataclasses.replace(
            row,
            range_ratio=0.0,
            num_requests=0,
            prompt_tokens=round(0.9 * row.prompt_tokens),
            output_tokens=round(0.9 * row.output_tokens),
        )
        ratios[batch] = whole / predict.run_times(steady, "ideal")["tpot_ms"]
    assert sorted(ratios) == sorted(MI300X_STALL)
    assert ratios[4] < ratios[16] < ratios[64]
    for batch, measured in MI300X_STALL.items():
        assert 0.4 * (measured - 1) < ratios[batch] - 1 < measured - 1
    readme = " ".join((CASES.parents[1] / "README.md").read_text(encoding="utf-8").split())

    def quoted(values: dict[int, float]) -> str:
        return " / ".join(f"{values[b]:.2f}" for b in sorted(values))

    assert f"{quoted(MI300X_STALL)} at concurrency 4 / 16 / 64, against " in readme
    assert f"against {quoted(ratios)} simulated" in readme


def test_a_published_ttft_needs_a_serving_benchmark_decode_row(tmp_path):
    with_ttft = SERVING.replace("range_ratio = 0.8\n", "range_ratio = 0.8\nttft_ms = 100.0\n")
    assert all(c.ttft_ms == 100.0 for c in _rows(tmp_path, with_ttft))
    with pytest.raises(InputError, match=r"cases\[0\]\.ttft_ms"):
        _rows(tmp_path, ROW.replace("num_requests = 20\n", "num_requests = 20\nttft_ms = 1.0\n"))


def test_ttft_errors_and_their_summary_count_only_rows_that_publish_one(tmp_path):
    import dataclasses

    from simspec.validation._sections import ttft_lines, ttft_summary
    from simspec.validation.predictions import Outcome

    row = _rows(tmp_path, SERVING)[1]
    published = dataclasses.replace(row, ttft_ms=100.0)
    outcomes = [
        Outcome(published, 7.0, 7.0, ideal=7.0, ttft=50.0, ideal_ttft=40.0),  # -50 % / -60 %
        Outcome(published, 7.0, 7.0, ideal=7.0, ttft=130.0, ideal_ttft=120.0),  # +30 % / +20 %
        Outcome(published, 7.0, None, "no scenario"),  # not predicted
        Outcome(row, 7.0, 7.0, ideal=7.0, ttft=1.0, ideal_ttft=1.0),  # none published
    ]
    assert outcomes[0].ttft_errors == pytest.approx((-0.5, -0.6))
    assert outcomes[3].ttft_errors == (None, None)
    summary = ttft_summary(outcomes)
    assert (summary["rows"], summary["predicted_rows"], summary["predicted_below_measured"]) == (
        3,
        2,
        1,
    )
    assert summary["median_abs_relative_error"] == pytest.approx(0.4)
    assert summary["ideal_median_abs_relative_error"] == pytest.approx(0.4)
    text = "\n".join(ttft_lines(outcomes, summary))
    assert text.count(f"| {published.id} |") == 3 and "| 50.0 | -50% | 40.0 | -60% |" in text


def test_a_scheduler_that_polls_every_30_steps_makes_ttft_grow_with_concurrency_as_measured():
    """InferenceX's 8x B200 SGLang recipe polls for new requests every 10 decode steps below
    concurrency 16 and every 30 from it (--scheduler-recv-interval); its published median TTFT
    at 1k/1k grows from 157.6 ms (concurrency 4) to 489.4 ms (64). A request waits half an
    interval of decode steps on average before its prefill: the simulated growth is within
    30 % of the measured one with the rows' intervals, and under a tenth of it without."""
    import dataclasses

    rows = {
        c.batch: c
        for c in cases_mod.load_cases(CASES).cases
        if c.id.startswith("deepseek-r1-8xb200-sglang-inferencex")
        and (c.prompt_tokens, c.output_tokens) == (1024, 1024)
        and c.batch in (4, 64)
    }
    assert {b: r.scheduler_recv_interval for b, r in rows.items()} == {4: 10, 64: 30}
    measured = rows[64].ttft_ms - rows[4].ttft_ms
    polled = {b: predict.run_times(r, "ideal")["ttft_p50_ms"] for b, r in rows.items()}
    every_step = {
        b: predict.run_times(dataclasses.replace(r, scheduler_recv_interval=1), "ideal")[
            "ttft_p50_ms"
        ]
        for b, r in rows.items()
    }
    assert polled[64] - polled[4] == pytest.approx(measured, rel=0.3)
    assert abs(every_step[64] - every_step[4]) < 0.1 * measured
    assert polled[4] > every_step[4] and polled[64] > every_step[64]
    readme = " ".join((CASES.parents[1] / "README.md").read_text(encoding="utf-8").split())
    assert f"(physics only) grows from {polled[4]:.0f} to {polled[64]:.0f} ms" in readme
    assert (
        f"published TTFT grows from {rows[4].ttft_ms:.0f} ms at concurrency 4 to "
        f"{rows[64].ttft_ms:.0f} ms at 64"
    ) in readme


def test_decode_rows_split_by_gpu_maker_and_engine_with_physics_only_and_its_direction(tmp_path):
    """The breakdown groups decode rows by the first word of the GPU's catalog name and the
    row's engine preset, takes medians of |relative error| per group, and counts physics-only
    predictions faster than the measurement: a shorter time, or a higher rate."""
    import dataclasses

    from simspec.validation._sections import decode_by_engine, decode_engine_lines
    from simspec.validation.predictions import Outcome

    rate = _rows(tmp_path)[0]  # tokens_per_s, SGLang on an H100
    time = dataclasses.replace(rate, id="t[0]", quantity="tpot_ms", unit="ms", gpu="mi300x")
    outcomes = [
        Outcome(rate, 100.0, 110.0, ideal=130.0),  # +10 % / +30 %: faster
        Outcome(rate, 100.0, 80.0, ideal=90.0),  # -20 % / -10 %: slower
        Outcome(rate, 100.0, None, "no scenario", ideal=None),
        Outcome(time, 10.0, 9.0, ideal=6.0),  # -10 % / -40 %: faster
        Outcome(dataclasses.replace(rate, category="speculative"), 1.0, 1.0, ideal=1.0),
    ]
    table = decode_by_engine(outcomes)
    assert list(table) == ["AMD / sglang", "NVIDIA / sglang"]
    nvidia, amd = table["NVIDIA / sglang"], table["AMD / sglang"]
    assert nvidia["rows"] == 3 and amd["rows"] == 1
    assert nvidia["median_abs_relative_error"] == pytest.approx(0.15)
    assert nvidia["ideal_median_abs_relative_error"] == pytest.approx(0.2)
    assert nvidia["ideal_faster_than_measured"] == 1
    assert amd["ideal_median_abs_relative_error"] == pytest.approx(0.4)
    assert amd["ideal_faster_than_measured"] == 1
    text = "\n".join(decode_engine_lines(table))
    assert "| NVIDIA / sglang | 3 | 15% | 20% | 1 of 3 |" in text


def test_a_speedup_implies_the_decode_steps_one_iteration_costs():
    # speedup = AL · step / iteration: AL 2.5 at 1.25x costs 2 steps, at 0.8x 3.125 steps.
    assert sections.iteration_steps(2.5, 1.25) == pytest.approx(2.0)
    assert sections.iteration_steps(2.5, 0.8) == pytest.approx(3.125)
    # Break-even: an iteration that costs AL steps is no speedup at all.
    assert sections.iteration_steps(1.86, 1.0) == pytest.approx(1.86)


def test_iteration_costs_are_grouped_with_their_median_range_and_wrong_signs():
    from simspec.validation.predictions import Outcome

    by_id = {c.id: c for c in cases_mod.load_cases(CASES).cases}
    spec = by_id["glm-4.7-flash-1xh100-eagle3-bs1"]
    al = spec.acceptance_length
    outcomes = [
        Outcome(spec, 1.39, 0.9, ideal=1.2),  # wrong sign: costs more than AL steps predicted
        Outcome(spec, 1.39, 1.39, ideal=1.39),
        Outcome(spec, 1.39, None, "no scenario"),  # not predicted: left out
    ]
    lines = sections.iteration_lines(outcomes)
    assert lines[1] == "## Implied cost of a speculative iteration"
    rows = [line for line in lines if line.startswith(f"| {spec.model} |")]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[1] == spec.reporter and cells[4] == str(spec.batch) and cells[5] == "2"
    assert cells[7] == f"{al / 1.39:.2f}"  # both rows measured alike: no range
    low, high = al / 1.39, al / 0.9
    assert cells[8] == f"{(low + high) / 2:.2f} [{low:.2f}-{high:.2f}]"
    assert cells[10] == "1"
    assert sections.iteration_lines([Outcome(by_id["qwen3-30b-a100-pcie-bf16[0]"], 1, 1)]) == []


def test_the_reports_iteration_costs_are_al_over_the_measured_speedups_in_the_cases_file():
    import statistics

    report = (CASES.parent / "REPORT.md").read_text(encoding="utf-8").splitlines()
    start = report.index("## Implied cost of a speculative iteration")
    table = []
    for line in report[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("| ") and not line.startswith("| model"):
            table.append([cell.strip() for cell in line.strip("|").split("|")])
    groups: dict[tuple, list[float]] = {}
    for c in cases_mod.load_cases(CASES).cases:
        if c.category == "speculative" and c.acceptance_length:
            # A TPOT pair speeds up as baseline / value, a throughput pair as value / baseline.
            tpot = c.quantity == "tpot_ms"
            speedup = c.baseline_value / c.value if tpot else c.value / c.baseline_value
            key = (c.model, c.reporter, sections.gpus_label(c), c.engine, str(c.batch))
            groups.setdefault(key, []).append(c.acceptance_length / speedup)
    assert len(table) == len(groups)
    for cells in table:
        costs = groups[tuple(cells[:5])]
        assert cells[5] == str(len(costs))
        assert cells[7].split(" ")[0] == f"{statistics.median(costs):.2f}"
        assert (min(costs) < max(costs)) == ("[" in cells[7])
