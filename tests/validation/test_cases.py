"""validation/cases.toml parses, names only catalog entries, and bad files are rejected."""

from __future__ import annotations

import math

import pytest

from simspec import catalog
from simspec.config.load import scenario_from_dict
from simspec.errors import InputError
from simspec.physics.experts import independent_union
from tests.validation.bench_scripts import bench_module

cases_mod = bench_module("fidelity_cases")
fidelity = bench_module("fidelity")


def test_every_case_parses_and_names_catalog_entries():
    cases = cases_mod.load_cases()
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
    for case in cases_mod.load_cases().cases:
        if case.category != "kernel":
            scenario = scenario_from_dict(fidelity.scenario_data(case), case.id)
            assert scenario.workload.concurrency == case.batch
            assert scenario.hardware.num_gpus == case.num_gpus


def test_measured_speedup_is_the_ratio_of_the_two_numbers():
    cases = {c.id: c for c in cases_mod.load_cases().cases}
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
"""


@pytest.mark.parametrize(
    ("old", "new", "key_path"),
    [
        ('model = "qwen3-30b-a3b"', 'model = "qwen9"', "cases[0].model"),
        ('gpu = "h100-sxm"', 'gpu = "h900"', "cases[0].gpu"),
        ("value = [1.0, 2.0]", "value = [1.0]", "cases[0]"),
        ("value = [1.0, 2.0]", 'value = [1.0, "a"]', "cases[0].value[1]"),
        ('precision = "bf16"', 'precision = "int4"', "cases[0].precision"),
        ('source = "s"', 'source = "t"', "cases[0].source"),
        ('unit = "us"', 'unit = "ms"', "cases[0].unit"),
        ("tp = 1", "tp = 2", "cases[0].tp"),
        ('category = "kernel"', 'category = "decode"', "cases[0].quantity"),
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


def test_alpha_solves_the_expected_tokens_per_verify():
    # (1 - a^(k+1)) / (1 - a) at a = 0.6, k = 4: 1 + .6 + .36 + .216 + .1296 = 2.3056.
    assert fidelity.alpha_for_acceptance_length(2.3056, 4) == pytest.approx(0.6, abs=1e-9)
    assert fidelity.alpha_for_acceptance_length(1.0, 3) == pytest.approx(0.0, abs=1e-9)
    assert fidelity.alpha_for_acceptance_length(4.0, 3) == pytest.approx(1.0, abs=1e-9)
    with pytest.raises(ValueError):
        fidelity.alpha_for_acceptance_length(4.5, 3)


def test_kernel_prediction_at_one_token_is_the_roofline_of_k_experts():
    # M = 1: U = k_e = 8 experts of 3·2048·768 bf16 parameters, memory-bound. The default
    # (launch) form: t0 + 8·(c_e + B / (eta_bw · 1.555 TB/s)) on the A100 PCIe, with the
    # constants fitted in validation/KERNEL_FIT.md (26.6 µs, 0.234 µs, 0.902).
    case = next(c for c in cases_mod.load_cases().cases if c.id == "qwen3-30b-a100-pcie-bf16[0]")
    assert independent_union(128, 8, 1) == 8
    expert_bytes = 3 * 2048 * 768 * 2.0
    want_us = (26.6e-6 + 8 * (0.234e-6 + expert_bytes / (0.902 * 1.555e12))) * 1e6
    got = fidelity.predict_kernel_us(case, fidelity.simspec.load_scenario())
    assert got == pytest.approx(want_us, rel=1e-12)
    # The saturation form: eta = 0.8·(1 − exp(−8·B/94e6)) of the bandwidth.
    eta = 0.8 * (1 - math.exp(-8 * expert_bytes / 94e6))
    want_us = 8 * expert_bytes / (eta * 1.555e12) * 1e6
    saturation = fidelity.simspec.with_overrides(
        fidelity.simspec.load_scenario(), {"costs.moe_kernel": "saturation"}
    )
    assert fidelity.predict_kernel_us(case, saturation) == pytest.approx(want_us, rel=1e-12)
