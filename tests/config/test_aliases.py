"""vLLM / SGLang names as overrides: each lands on simspec's keys, with the same value."""

from __future__ import annotations

from pathlib import Path

import pytest

import simspec
from simspec.config.aliases import ALIASES, canonical, expand_aliases
from simspec.config.load import apply_overrides, read_scenario_data
from simspec.errors import ScenarioError


@pytest.fixture(scope="module")
def base():
    return simspec.load_scenario()


@pytest.mark.parametrize("alias", ["num_speculative_tokens", "speculative_num_steps"])
def test_speculation_length_becomes_one_fixed_policy(base, alias):
    s = simspec.with_overrides(base, {alias: 3})
    assert [(p.name, p.params()) for p in s.policies] == [("fixed", {"draft_tokens": 3})]


def test_every_alias_sets_its_keys(base):
    s = simspec.with_overrides(
        base,
        {
            "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4,
            "max_num_seqs": 48,
            "gpu_memory_utilization": 0.75,
            "tensor_parallel_size": 2,
        },
    )
    assert (s.speculation.topk, s.speculation.num_draft_tokens) == (1, 4)
    assert s.workload.max_batch_size == 48
    assert s.workload.concurrency == base.workload.concurrency  # a client count, untouched
    assert s.hardware.memory_utilization == 0.75
    assert (s.hardware.num_gpus, s.hardware.tensor_parallel) == (2, 2)


def test_set_strings_with_dashes_match_the_simspec_keys():
    data, _ = read_scenario_data(None)
    by_alias = apply_overrides(data, ["tensor-parallel-size=4", "max-num-seqs=64"])
    by_key = apply_overrides(
        data, ["hardware.num_gpus=4", "hardware.tensor_parallel=4", "workload.max_batch_size=64"]
    )
    assert by_alias == by_key


def test_expand_keeps_order_and_other_keys():
    pairs = [("routing.overlap", 0.5), ("num_speculative_tokens", 2), ("seed", 7)]
    assert expand_aliases(pairs) == [
        ("routing.overlap", 0.5),
        ("policies", [{"name": "fixed", "draft_tokens": 2}]),
        ("seed", 7),
    ]
    assert canonical("workload.max_batch_size") is None
    assert canonical("Max-Num-Seqs") is None  # names are case-sensitive, like the engines'


def test_bad_alias_values_are_reported_on_the_simspec_key(base):
    with pytest.raises(ScenarioError, match="memory_utilization"):
        simspec.with_overrides(base, {"gpu_memory_utilization": 1.5})
    with pytest.raises(ScenarioError, match="num_gpus"):
        simspec.with_overrides(base, {"tensor_parallel_size": 0})


def test_aliases_are_not_scenario_file_keys(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("num_speculative_tokens = 3\n")
    with pytest.raises(ScenarioError, match="num_speculative_tokens"):
        simspec.load_scenario(path)


def test_the_readme_table_lists_every_alias():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    for alias in ALIASES:
        assert f"`{alias}" in readme, alias
