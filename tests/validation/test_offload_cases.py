"""validation/offload.toml: the expert-offloading rows parse, follow the data rules (second-hand
rows are test rows, Mixtral-offloading's PCIe 3 machines are held out), keep the published order
of Mixtral-offloading's configurations, and bad offload rows are rejected naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from simspec import catalog
from simspec.errors import InputError
from simspec.validation import cases as cases_mod

OFFLOAD = Path(__file__).resolve().parents[2] / cases_mod.OFFLOAD_CASES_PATH
ORDER = ("full", "no_prefetch", "no_lru", "naive")


@pytest.fixture(scope="module")
def offload() -> cases_mod.CaseFile:
    return cases_mod.load_cases(OFFLOAD)


def test_every_row_is_an_offload_case_on_catalog_entries(offload):
    assert len(offload.cases) >= 40 and len(offload.unexpressed) >= 8
    for case in offload.cases:
        assert case.category == cases_mod.OFFLOAD
        assert case.model in catalog.model_names() and case.gpu in catalog.gpu_names()
        assert catalog.get_gpu(case.gpu).host_link_bytes_per_s() > 0  # every GPU has a link
        assert case.experts and case.cache_policy and case.prefetch and case.miss
        assert case.assumed, case.id  # every offload source leaves something unstated


def test_second_hand_and_searched_rows_are_test_rows(offload):
    for case in offload.cases:
        if case.source != "mixtral-offloading":
            assert case.role == "test", case.id
        else:  # one first-hand reporter: the PCIe 3 machines are held out
            held_out = case.gpu in ("rtx-3060-12gb", "t4")
            assert (case.role == "test") == held_out, case.id
    fitted = [c for c in offload.cases if c.role == "fit"]
    assert {c.reporter for c in fitted} == {"mixtral-offloading"}
    assert len(fitted) < len(offload.cases) / 2


def test_mixtral_offloadings_configurations_are_in_the_published_order(offload):
    series: dict[str, list[cases_mod.Case]] = {}
    for case in offload.cases:
        if case.source == "mixtral-offloading":
            series.setdefault(case.id.split("[")[0], []).append(case)
    assert len(series) == 8
    for rows in series.values():
        assert [c.configuration for c in rows] == list(ORDER[: len(rows)])
        values = [c.value for c in rows]
        assert values == sorted(values, reverse=True)  # full > no prefetch > no LRU > naive
        full, no_prefetch, no_lru = rows[:3]
        assert full.prefetch == "next_layer" and no_prefetch.prefetch == "none"
        assert full.cache_policy == no_prefetch.cache_policy == "lru"
        assert no_lru.cache_policy == "none" and no_lru.cache_experts_per_layer == 0
        if len(rows) == 4:
            assert rows[3].experts == "host_pageable"


def test_hqq_sizes_of_mixtral_offloading_rows(offload):
    for case in offload.cases:
        if case.source == "mixtral-offloading":
            assert case.expert_precision in ("int2", "int3")
            assert case.attention_precision == "int4"


BASE = """
[sources.s]
url = "https://example.org"
[[cases]]
id = "x"
category = "offload"
model = "mixtral-8x7b"
gpu = "rtx-4090"
num_gpus = 1
tp = 1
ep = 1
engine = "e"
precision = "bf16"
output_tokens = 64
experts = "host_pinned"
cache_policy = "lru"
cache_experts_per_layer = 4
prefetch = "none"
miss = "copy"
quantity = "tokens_per_s"
unit = "tok/s"
value = 2.0
source = "s"
reporter = "someone"
"""


def test_the_base_offload_row_loads(tmp_path):
    path = tmp_path / "offload.toml"
    path.write_text(BASE, encoding="utf-8")
    (case,) = cases_mod.load_cases(path).cases
    assert case.cache_experts_per_layer == 4 and case.drafter == ""


@pytest.mark.parametrize(
    ("old", "new", "key_path"),
    [
        ('experts = "host_pinned"', "", "cases[0].experts"),
        ('miss = "copy"', 'miss = "disk"', "cases[0].miss"),
        ('cache_policy = "lru"', 'cache_policy = "none"', "cases[0].cache_policy"),
        ("cache_experts_per_layer = 4", "cache_experts_per_layer = 4\ncache_gb = 3",
         "cases[0].cache_gb"),
        ("cache_experts_per_layer = 4", "cache_experts_per_layer = -1",
         "cases[0].cache_experts_per_layer"),
        ('prefetch = "none"', 'prefetch = "none"\nprefetch_accuracy = 1.5',
         "cases[0].prefetch_accuracy"),
        ('miss = "copy"', 'miss = "copy"\ndrafter = "eagle3-qwen3-30b-a3b"\nsteps = 1\n'
         "acceptance_length = 1.5", "cases[0].drafter"),
        ('miss = "copy"', 'miss = "copy"\ndrafter = "mistral-7b-draft"',
         "cases[0].acceptance_length"),
        ('quantity = "tokens_per_s"', 'quantity = "hit_rate"', "cases[0].unit"),
        ('category = "offload"', 'category = "decode"', "cases[0].cache_experts_per_layer"),
        ('gpu = "rtx-4090"', 'gpu = "rtx-4090"\npcie_generation = 9', "cases[0].pcie_generation"),
    ],
)  # fmt: skip
def test_bad_offload_rows_name_the_key(tmp_path, old, new, key_path):
    path = tmp_path / "offload.toml"
    assert old in BASE
    path.write_text(BASE.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(InputError) as err:
        cases_mod.load_cases(path)
    assert err.value.key_path == key_path
    assert str(path) in str(err.value)
