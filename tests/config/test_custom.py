"""Models and GPUs outside the catalog: a config.json path, inline tables, the synthesized head."""

from __future__ import annotations

import json

import pytest

import simspec
from simspec import catalog
from simspec.config.custom import AUTO_DRAFTER, auto_drafter
from simspec.errors import ScenarioError
from simspec.schema import to_dict
from tests.physics.test_hf_config import DEEPSEEK_V3, QWEN3_30B_A3B

SMALL = {"workload.num_requests": 3, "workload.output_tokens": 24, "num_speculative_tokens": 3}


def tpots(result):
    return [
        (p.label, p.tpot_ms, p.tokens_per_s, p.unique_experts_per_layer) for p in result.policies
    ]


@pytest.fixture(scope="module")
def catalog_run():
    return simspec.run(None, SMALL)


@pytest.fixture
def config_folder(tmp_path):
    folder = tmp_path / "Qwen3-30B-A3B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_30B_A3B))
    return tmp_path


def test_config_json_runs_exactly_like_the_catalog_entry(config_folder, catalog_run):
    path = str(config_folder / "Qwen3-30B-A3B" / "config.json")
    result = simspec.run(None, {**SMALL, "model.config": path, "model.drafter": AUTO_DRAFTER})
    assert tpots(result) == tpots(catalog_run)
    assert result.scenario["model"]["config"] == path


def test_config_path_in_a_file_is_relative_to_the_file_and_names_the_target(config_folder):
    scenario_file = config_folder / "s.toml"
    scenario_file.write_text('[model]\nconfig = "Qwen3-30B-A3B/config.json"\n')
    s = simspec.load_scenario(scenario_file)
    assert (s.model.target, s.target.name) == ("qwen3-30b-a3b", "qwen3-30b-a3b")
    assert s.model.drafter == s.drafter.name == AUTO_DRAFTER
    assert s.target.shape == catalog.get_model("qwen3-30b-a3b").shape
    again = simspec.with_overrides(s, {"workload.num_requests": 2})  # re-reads the same file
    assert again.target.shape == s.target.shape and again.workload.num_requests == 2


def test_inline_model_and_gpu_tables(catalog_run):
    model = to_dict(catalog.get_model("qwen3-30b-a3b"))
    gpu = to_dict(catalog.get_gpu("h100-sxm"))
    del model["name"], gpu["name"]
    result = simspec.run(
        None,
        {
            **SMALL,
            "model": {"target": "my-moe", "custom": model, "drafter": "eagle3-qwen3-30b-a3b"},
            "hardware": {"gpu": "my-gpu", "custom": gpu},
        },
    )
    assert tpots(result) == tpots(catalog_run)
    assert result.scenario["hardware"]["custom"]["name"] == "my-gpu"
    assert result.scenario["model"]["custom"]["name"] == "my-moe"


@pytest.mark.parametrize(
    "target",
    [
        "qwen3-30b-a3b",
        "qwen3-235b-a22b",
        "qwen3-coder-30b-a3b",
        "gpt-oss-20b",
        "gpt-oss-120b",
        "qwen3-8b",
    ],
)
def test_auto_drafter_has_the_catalog_heads_shape(target):
    """The synthesized head has the shape of the catalog's heads that follow SpecForge's
    convention: 6 × hidden MLP for a MoE target (its Qwen3 and gpt-oss heads), the target's own
    FFN width for a dense one (its Qwen3-8B head)."""
    ours, theirs = auto_drafter(catalog.get_model(target)), catalog.get_drafter(f"eagle3-{target}")
    keys = ("num_layers", "hidden_size", "intermediate_size", "num_heads", "num_kv_heads")
    assert [getattr(ours, k) for k in keys] == [getattr(theirs, k) for k in keys]
    assert ours.head_weight_bytes() == theirs.head_weight_bytes()
    assert ours.head_kv_bytes_per_token() == theirs.head_kv_bytes_per_token()


def test_mla_config_gets_an_mla_target(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DEEPSEEK_V3))
    s = simspec.load_scenario(
        None,
        {
            "model.config": str(path),
            "model.target": "dsv3",
            "model.drafter": AUTO_DRAFTER,
            "hardware.num_gpus": 16,
            "hardware.gpu": "mi300x",
        },
    )
    assert s.target.attention.kind == "mla"
    assert (
        s.target.shape.total_weight_bytes
        == catalog.get_model("deepseek-v3").shape.total_weight_bytes
    )


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        ({"model.config": "nowhere/config.json"}, ("nowhere/config.json",)),
        ({"model.target": "not-a-model"}, ("model.target", "[model] config")),
        ({"hardware.gpu": "tpu-v5"}, ("hardware.gpu", "[hardware.custom]")),
        ({"model.custom": {"name": "a"}, "model.target": "b"}, ("model.custom.name",)),
    ],
)
def test_bad_custom_inputs_name_the_key(overrides, fragments):
    with pytest.raises(ScenarioError) as err:
        simspec.load_scenario(None, overrides)
    for fragment in fragments:
        assert fragment in str(err.value)


def test_config_and_inline_model_together_are_refused(config_folder):
    model = to_dict(catalog.get_model("qwen3-30b-a3b"))
    with pytest.raises(ScenarioError, match=r"either model\.config or"):
        simspec.load_scenario(
            None,
            {
                "model.config": str(config_folder / "Qwen3-30B-A3B/config.json"),
                "model.custom": model,
            },
        )


def test_a_config_json_of_another_family_is_an_input_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    with pytest.raises(ScenarioError, match="model_type") as err:
        simspec.load_scenario(None, {"model.config": str(path)})
    assert str(path) in str(err.value)


def test_mi300x_runs_from_the_catalog():
    gpu = catalog.get_gpu("mi300x")
    assert (gpu.memory_bytes, gpu.hbm_bytes_per_s, gpu.bf16_flops_per_s) == (
        192e9,
        5.3e12,
        1.3074e15,
    )
    assert gpu.ridge_flops_per_byte == pytest.approx(1307.4 / 5.3)
    result = simspec.run(None, {**SMALL, "hardware.gpu": "mi300x"})
    assert result.scenario["hardware"]["gpu"] == "mi300x"
    assert result.get("fixed-3").speedup_vs_no_spec > 0
