"""validation/cases.toml parses, names only catalog entries, and bad files are rejected."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import simspec
from simspec import catalog
from simspec.config.load import scenario_from_dict
from simspec.errors import InputError
from simspec.fit import alpha_for_acceptance_length
from simspec.physics.experts import independent_union
from simspec.validation import cases as cases_mod
from simspec.validation import predictions as predict

CASES = Path(__file__).resolve().parents[2] / "validation" / "cases.toml"
#: Sources transcribed from measurements.md before rows were added by searching (issue 27).
ORIGINAL_SOURCES = {
    "tt-340", "specforge-339", "angelslim-163", "specforge-bench", "inferencex-828",
    "lmsys-gpt-oss", "trtllm-11559", "tt-356", "sglang-10404", "lambda-qwen3-coder-next",
    "vllm-3240", "specforge-164", "vllm-22331", "dogacel-specdrift", "eagle-330", "vllm-24700",
    "vllm-19049", "sglang-11730", "vllm-31448", "vllm-39902", "vllm-44830",
}  # fmt: skip


def test_every_case_parses_and_names_catalog_entries():
    cases = cases_mod.load_cases(CASES)
    by_category = {c: [x for x in cases.cases if x.category == c] for c in cases_mod.CATEGORIES}
    assert all(by_category.values())
    assert cases.unexpressed
    for case in cases.cases:
        assert case.model in catalog.model_names()
        assert case.gpu in catalog.gpu_names()
        assert case.source in cases.sources
        assert case.tp <= case.num_gpus and case.ep <= case.num_gpus
    # A series expands one row per element: the Mixtral kernel table has 14 points.
    mixtral = [c for c in cases.cases if c.id.startswith("mixtral-8x7b-h100-tp2-bf16-tuned[")]
    assert [c.tokens for c in mixtral][-1] == 1024 and len(mixtral) == 14


def test_every_decode_and_speculative_case_builds_a_valid_scenario():
    for case in cases_mod.load_cases(CASES).cases:
        if case.category != "kernel":
            scenario = scenario_from_dict(predict.scenario_data(case), case.id)
            assert scenario.workload.concurrency == case.batch
            assert scenario.hardware.num_gpus == case.num_gpus


def test_a_rows_kv_cache_format_reaches_its_scenario():
    """A row whose launch config stores the KV cache in fp8 is simulated with one byte per KV
    value; a row that states nothing keeps the engine's default (the model's bf16 bytes)."""
    rows = {c.id: c for c in cases_mod.load_cases(CASES).cases}
    fp8 = rows["glm-4.7-8xh100-tp8ep8-trtllm-1k1k[0]"]
    auto = rows["qwen3-30b-2xh100-tp2-sglang[0]"]
    assert (fp8.kv_cache_dtype, auto.kv_cache_dtype) == ("fp8", "auto")
    glm = scenario_from_dict(predict.scenario_data(fp8), fp8.id).target
    qwen = scenario_from_dict(predict.scenario_data(auto), auto.id).target
    assert glm.shape.kv_bytes_per_token * 2 == catalog.get_model("glm-4.7").shape.kv_bytes_per_token
    assert (
        qwen.shape.kv_bytes_per_token == catalog.get_model("qwen3-30b-a3b").shape.kv_bytes_per_token
    )


def test_a_rows_own_draft_head_reaches_its_scenario():
    """AngelSlim's vLLM rows ran AngelSlim's head (MLP 6144), not the catalog's default
    SpecForge head (MLP 12288): the scenario drafts with the lighter head, and a draft step
    reads fewer weight bytes."""
    rows = {c.id: c for c in cases_mod.load_cases(CASES).cases}
    own = rows["qwen3-30b-a3b-1xh20-vllm-eagle3-angelslim[0]"]
    default = rows["qwen3-30b-a3b-1xh200-sglang-eagle3-specbundle-gsm8k[0]"]
    assert own.drafter == "eagle3-qwen3-30b-a3b-angelslim" and default.drafter == ""
    head = scenario_from_dict(predict.scenario_data(own), own.id).drafter
    spec = scenario_from_dict(predict.scenario_data(default), default.id).drafter
    assert (head.name, head.intermediate_size) == ("eagle3-qwen3-30b-a3b-angelslim", 6144)
    assert spec.intermediate_size == 12288
    # One layer of MLP 3 x 2048 x 6144 fewer parameters, in bf16.
    assert spec.head_weight_bytes() - head.head_weight_bytes() == 3 * 2048 * 6144 * 2


def test_a_speculative_rows_drafter_matches_its_method(tmp_path):
    """An EAGLE-3 row may not name an MTP module, nor an MTP row an EAGLE-3 head: exit-2 errors
    naming the key; the row's own head of its method is accepted."""
    rows = CASES.read_text(encoding="utf-8")
    start = rows.index('id = "qwen3-30b-a3b-1xh20-vllm-eagle3-angelslim"')
    table = "[[cases]]\n" + rows[start : rows.index("\n[[", start)] + "\n"
    sources = rows[: rows.index("\n[[cases]]") + 1]
    for drafter, method, ok in (
        ("eagle3-qwen3-30b-a3b-angelslim", "eagle3", True),
        ("ngram", "eagle3", False),
        ("ngram", "ngram", True),
        ("eagle3-qwen3-30b-a3b", "ngram", False),
    ):
        body = table.replace('method = "eagle3"', f'method = "{method}"').replace(
            'drafter = "eagle3-qwen3-30b-a3b-angelslim"', f'drafter = "{drafter}"'
        )
        path = tmp_path / "cases.toml"
        path.write_text(sources + body, encoding="utf-8")
        if ok:
            assert cases_mod.load_cases(path).cases[0].drafter == drafter
        else:
            with pytest.raises(InputError) as err:
                cases_mod.load_cases(path)
            assert err.value.key_path == "cases[0].drafter"


def test_every_row_names_its_reporter_and_role():
    cases = cases_mod.load_cases(CASES).cases
    assert all(c.reporter and c.role in cases_mod.ROLES for c in cases)
    by_id = {c.id: c for c in cases}
    # SpecForge #339 and AngelSlim #163 are one person: one reporter.
    assert (
        by_id["qwen3-30b-2xh100-tp2-eagle3-bs4[0]"].reporter
        == by_id["qwen3-30b-4xh100-tp4-eagle3[0]"].reporter
    )
    # A row found by searching is a test row unless its notes name a second reporter.
    for case in cases:
        if case.role == "fit" and case.source not in ORIGINAL_SOURCES:
            assert "agrees" in case.notes, case.id


#: TensorRT-LLM issue #5929's own "Speed-up" rows: ITL p50 of DeepSeek-R1 FP8 on 8xH200 over
#: FP4 on 8xB200 at batch 1, by prompt length, for EP None / 4 / 8.
ISSUE_5929_SPEEDUP = {1600: (2.03332, 1.63469, 1.61488), 8192: (2.0356, 1.66225, 1.64388)}


def test_the_h200_and_b200_rows_of_one_issue_reproduce_its_published_speedups():
    """Both tables of TensorRT-LLM #5929 are transcribed: their ratios are the issue's own."""
    cases = {c.id: c for c in cases_mod.load_cases(CASES).cases}
    for index, (prompt, speedups) in enumerate(ISSUE_5929_SPEEDUP.items()):
        for ep, published in zip((1, 4, 8), speedups, strict=True):
            h200 = cases[f"deepseek-r1-8xh200-trtllm-ep{ep}[{index}]"]
            b200 = cases[f"deepseek-r1-fp4-8xb200-trtllm-ep{ep}[{index}]"]
            assert h200.prompt_tokens == b200.prompt_tokens == prompt
            assert (h200.batch, b200.batch, h200.ep, b200.ep) == (1, 1, ep, ep)
            # The issue prints ITL to five decimals in seconds: the ratio keeps 0.3 %.
            assert h200.value / b200.value == pytest.approx(published, rel=3e-3)


def test_measured_speedup_is_the_ratio_of_the_two_numbers():
    cases = {c.id: c for c in cases_mod.load_cases(CASES).cases}
    assert cases["glm-4.7-flash-1xh100-eagle3-bs1"].measured_speedup == pytest.approx(8.18 / 5.89)
    first = cases["qwen3-30b-2xh100-tp2-eagle3-bs1[0]"]
    assert first.measured_speedup == pytest.approx(159.78 / 222.47)  # 0.72x, SpecForge #339


BASE = """
[sources.s]
url = "https://example.org"
[[cases]]
id = "x"
category = "kernel"
model = "qwen3-30b-a3b"
gpu = "h100-sxm"
num_gpus = 1
tp = 1
ep = 1
engine = "e"
precision = "bf16"
tokens = [1, 2]
quantity = "moe_layer_us"
unit = "us"
value = [1.0, 2.0]
source = "s"
reporter = "someone"
"""


@pytest.mark.parametrize(
    ("old", "new", "key_path"),
    [
        ('model = "qwen3-30b-a3b"', 'model = "qwen9"', "cases[0].model"),
        ('gpu = "h100-sxm"', 'gpu = "h900"', "cases[0].gpu"),
        ("value = [1.0, 2.0]", "value = [1.0]", "cases[0]"),
        ("value = [1.0, 2.0]", 'value = [1.0, "a"]', "cases[0].value[1]"),
        ('precision = "bf16"', 'precision = "int8"', "cases[0].precision"),
        ('source = "s"', 'source = "t"', "cases[0].source"),
        ('unit = "us"', 'unit = "ms"', "cases[0].unit"),
        ("tp = 1", "tp = 2", "cases[0].tp"),
        ('category = "kernel"', 'category = "decode"', "cases[0].quantity"),
        ('reporter = "someone"', 'reporter = "Some One"', "cases[0].reporter"),
        ('reporter = "someone"', 'reporter = ""', "cases[0].reporter"),
        ('reporter = "someone"', "", "cases[0].reporter"),
        ('source = "s"', 'source = "s"\nrole = "train"', "cases[0].role"),
        (
            'source = "s"',
            'source = "s"\nassumed = "a"\nassumed_keys = ["tp", "mood"]',
            "cases[0].assumed_keys[1]",
        ),
        ('source = "s"', 'source = "s"\nassumed_keys = ["tp"]', "cases[0].assumed"),
        ('source = "s"', 'source = "s"\ndrafter = "eagle3-qwen3-30b-a3b"', "cases[0].drafter"),
    ],
)
def test_bad_case_files_name_the_key(tmp_path, old, new, key_path):
    path = tmp_path / "cases.toml"
    assert old in BASE
    path.write_text(BASE.replace(old, new), encoding="utf-8")
    with pytest.raises(InputError) as err:
        cases_mod.load_cases(path)
    assert err.value.key_path == key_path
    assert str(path) in str(err.value)


def test_speculative_rows_get_the_alpha_of_their_acceptance_length():
    """A chain's alpha solves Leviathan's E[tokens per verify] = AL; a tree's, its tree's AL."""
    for case in cases_mod.load_cases(CASES).cases:
        if case.category != "speculative":
            continue
        alpha = predict.scenario_data(case)["acceptance"]["alpha"]
        if not predict.is_tree_row(case) and alpha < predict.ALPHA_MAX:
            k = case.steps
            assert sum(alpha**j for j in range(k + 1)) == pytest.approx(case.acceptance_length)
            assert alpha == pytest.approx(alpha_for_acceptance_length(case.acceptance_length, k))


def test_kernel_prediction_at_one_token_is_the_roofline_of_k_experts():
    # M = 1: U = k_e = 8 experts of 3·2048·768 bf16 parameters, memory-bound. The default
    # (launch) form: s·t0 + 8·(s·c_e + B / (eta_bw · 1.555 TB/s)) + theta·(8 rows' FLOPs at 0.6
    # of 312 TFLOP/s) on the A100 PCIe, with the constants fitted in validation/KERNEL_FIT.md
    # (26.9 µs, 0.247 µs, 0.935, 0.468) and its fixed times at the A100's clock,
    # s = 1980 / 1410 MHz.
    case = next(
        c for c in cases_mod.load_cases(CASES).cases if c.id == "qwen3-30b-a100-pcie-bf16[0]"
    )
    assert independent_union(128, 8, 1) == 8
    expert_bytes = 3 * 2048 * 768 * 2.0
    s = 1980 / 1410
    flops_s = 2 * 8 * (expert_bytes / 2) / (0.6 * 312e12)
    memory_s = 8 * (s * 0.247e-6 + expert_bytes / (0.935 * 1.555e12))
    want_us = (s * 26.9e-6 + memory_s + 0.468 * flops_s) * 1e6
    got = predict.predict_kernel_us(case, simspec.load_scenario())
    assert got == pytest.approx(want_us, rel=1e-12)
    # The saturation form: eta = 0.8·(1 − exp(−8·B/94e6)) of the bandwidth.
    eta = 0.8 * (1 - math.exp(-8 * expert_bytes / 94e6))
    want_us = 8 * expert_bytes / (eta * 1.555e12) * 1e6
    saturation = simspec.with_overrides(simspec.load_scenario(), {"costs.moe_kernel": "saturation"})
    assert predict.predict_kernel_us(case, saturation) == pytest.approx(want_us, rel=1e-12)


def test_every_assumption_is_listed_by_key_and_applies_to_every_row_of_its_table():
    """A row that says it assumes something names the assumed keys (the sensitivity report
    varies them); a list of keys is the whole table's, not one element per row."""
    cases = cases_mod.load_cases(CASES).cases
    for case in cases:
        assert bool(case.assumed) == bool(case.assumed_keys), case.id
        assert set(case.assumed_keys) <= set(cases_mod.ASSUMABLE_KEYS)
    rows = [c for c in cases if c.id.startswith("qwen3-30b-4xh100-tp4-eagle3[")]
    assert len(rows) == 8
    assert all(c.assumed_keys == rows[0].assumed_keys for c in rows)
    assert {"num_requests", "length_jitter", "output_tokens"} <= set(rows[0].assumed_keys)


def test_a_routing_override_reaches_the_scenario_and_moves_only_verify_passes():
    """``routing`` keys replace the default scenario's (None removes one: independent
    routing). More lag-1 overlap leaves fewer experts for a verify pass's extra tokens, so a
    batch-1 speculative row's predicted speedup rises with it; a decode row, whose passes hold
    one token per request (requests route independently), does not move."""
    rows = {c.id: c for c in cases_mod.load_cases(CASES).cases}
    spec = rows["qwen3-30b-2xh100-tp2-eagle3-bs1[0]"]
    shipped = predict.scenario_data(spec)["routing"]
    moved = predict.scenario_data(spec, routing={"overlap": 0.6})["routing"]
    independent = predict.scenario_data(spec, routing={"overlap": None})["routing"]
    assert 0.0 < shipped["overlap"] < 0.6 and moved["overlap"] == 0.6
    assert "overlap" not in independent and independent["mode"] == "analytic"
    assert (
        scenario_from_dict(predict.scenario_data(spec, routing={"overlap": None})).routing.overlap
        is None
    )
    low, mid, high = (
        predict.predict_run(spec, routing={"overlap": value}) for value in (None, 0.38, 0.6)
    )
    assert low < mid < high
    decode = rows["qwen3-30b-2xh100-tp2-sglang[0]"]
    assert predict.predict_run(decode, routing={"overlap": None}) == pytest.approx(
        predict.predict_run(decode, routing={"overlap": 0.6}), rel=1e-12
    )
