"""Impossible hardware and models are refused (issue 31, 6, 9 and 10): tensor parallelism must
split the attention heads, expert parallelism at most one rank per expert, requests within the
model's context, and every number of a custom model or GPU bounded, so that none yields NaN, a
hang or a traceback. Each case exits 2 naming the key.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from simspec import catalog
from simspec.cli import main
from simspec.schema import to_dict

from .rejects import assert_rejected, scenario, write_scenario


def _custom_model(edit: dict[str, Any]) -> dict[str, Any]:
    """qwen3-30b-a3b as a [model.custom] table, with ``{"table.key": value}`` edits."""
    model = to_dict(catalog.get_model("qwen3-30b-a3b"))
    del model["name"]
    model = copy.deepcopy(model)
    for path, value in edit.items():
        table, _, key = path.rpartition(".")
        (model[table] if table else model)[key] = value
    return model


def _custom_gpu(edit: dict[str, Any]) -> dict[str, Any]:
    gpu = to_dict(catalog.get_gpu("h100-sxm"))
    del gpu["name"]
    return {**gpu, **edit}


#: Experts offloaded to the host and computed there on a miss (the host's numbers matter).
OFFLOAD_CPU = {"offload.experts": "host_pinned", "offload.miss": "cpu", "hardware.gpu": "rtx-4090"}


def _model_case(edit: dict[str, Any], **more: Any) -> dict[str, Any]:
    return scenario({"model.target": "my-moe", "model.custom": _custom_model(edit), **more})


def _gpu_case(edit: dict[str, Any]) -> dict[str, Any]:
    return scenario({"hardware.gpu": "my-gpu", "hardware.custom": _custom_gpu(edit)})


#: id -> (scenario data, --set overrides, fragments of the message besides the file name)
CASES: dict[str, tuple[dict[str, Any], list[str], list[str]]] = {
    "tp 3 over 32 heads (num_gpus)": (
        scenario({"hardware.num_gpus": 3}),
        [],
        ["hardware.num_gpus", "32 attention heads", "3"],
    ),
    "tp 3 over 32 heads (tensor_parallel)": (
        scenario({"hardware.num_gpus": 6, "hardware.tensor_parallel": 3}),
        [],
        ["hardware.tensor_parallel", "32 attention heads", "found 3"],
    ),
    "tp 3 via tensor_parallel_size": (
        scenario(),
        ["--set", "tensor_parallel_size=3"],
        ["tensor_parallel", "attention heads", "3"],
    ),
    "tp 6 over a custom model's 16 heads": (
        _model_case(
            {"attention.num_heads": 16, "attention.num_kv_heads": 4},
            **{"hardware.num_gpus": 6},
        ),
        [],
        ["hardware.num_gpus", "16 attention heads", "6"],
    ),
    "tp 8 over 3 kv heads": (
        _model_case(
            {"attention.num_heads": 24, "attention.num_kv_heads": 3},
            **{"hardware.num_gpus": 8},
        ),
        [],
        ["hardware.num_gpus", "3 KV heads", "8"],
    ),
    "gqa 10 heads over 4 kv heads": (
        _model_case({"attention.num_heads": 10, "attention.num_kv_heads": 4}),
        [],
        ["model.custom.attention.num_kv_heads", "num_heads = 10", "4"],
    ),
    "gqa 8 heads, 32 kv heads": (
        _model_case({"attention.num_heads": 8, "attention.num_kv_heads": 32}),
        [],
        ["model.custom.attention.num_kv_heads", "num_heads = 8", "32"],
    ),
    "ep 16 over 8 experts": (
        _model_case(
            {"moe.num_experts": 8, "moe.experts_per_token": 2},
            **{
                "hardware.num_gpus": 16,
                "hardware.tensor_parallel": 1,
                "hardware.expert_parallel": 16,
            },
        ),
        [],
        ["hardware.expert_parallel", "8 routed experts", "16"],
    ),
    "ep 2 on a dense model": (
        scenario(
            {
                "model.target": "qwen3-8b",
                "model.drafter": "eagle3-qwen3-8b",
                "hardware.num_gpus": 2,
                "hardware.expert_parallel": 2,
            }
        ),
        [],
        ["hardware.expert_parallel", "no routed experts", "2"],
    ),
    "prompt beyond the max context": (
        scenario({"workload.prompt_tokens": 200000}),
        [],
        ["workload.prompt_tokens", "40,960", "200000"],
    ),
    "prompt + output beyond the max context": (
        scenario({"workload.prompt_tokens": 40000, "workload.output_tokens": 1000}),
        [],
        ["workload.prompt_tokens", "maximum context", "41,000"],
    ),
    "jittered lengths beyond the max context": (
        scenario({"workload.prompt_tokens": 30000, "workload.length_jitter": 0.5}),
        [],
        ["workload.prompt_tokens", "length_jitter", "40,960"],
    ),
    "custom weight_bytes 1e-300": (
        _model_case({"weight_bytes": 1e-300}),
        [],
        ["model.custom.weight_bytes", "0.0625", "1e-300"],
    ),
    "custom weight_bytes 1e300": (
        _model_case({"weight_bytes": 1e300}),
        [],
        ["model.custom.weight_bytes", "<= 8", "1e+300"],
    ),
    "custom expert_weight_bytes 1e-300": (
        _model_case({"expert_weight_bytes": 1e-300}),
        [],
        ["model.custom.expert_weight_bytes", "1e-300"],
    ),
    "custom shared_weight_bytes 1e-300": (
        _model_case({"shared_weight_bytes": 1e-300}),
        [],
        ["model.custom.shared_weight_bytes", "1e-300"],
    ),
    "custom num_layers 10**9": (
        _model_case({"num_layers": 10**9}),
        [],
        ["model.custom.num_layers", "<= 4096", "1000000000"],
    ),
    "custom hidden_size 10**18": (
        _model_case({"hidden_size": 10**18}),
        [],
        ["model.custom.hidden_size", "<= 1048576"],
    ),
    "custom experts_per_token 0": (
        _model_case({"moe.experts_per_token": 0}),
        [],
        ["model.custom.moe.experts_per_token", ">= 1"],
    ),
    "custom vocab 10**12": (
        _model_case({"vocab_size": 10**12}),
        [],
        ["model.custom.vocab_size", "1000000000000"],
    ),
    "custom num_experts 10**9": (
        _model_case({"moe.num_experts": 10**9}),
        [],
        ["model.custom.moe.num_experts", "1000000000"],
    ),
    "custom head_dim 10**9": (
        _model_case({"attention.head_dim": 10**9}),
        [],
        ["model.custom.attention.head_dim", "1000000000"],
    ),
    "gpu hbm 1e300": (
        _gpu_case({"hbm_bytes_per_s": 1e300}),
        [],
        ["hardware.custom.hbm_bytes_per_s", "1e+300"],
    ),
    "gpu hbm 1e-300": (
        _gpu_case({"hbm_bytes_per_s": 1e-300}),
        [],
        ["hardware.custom.hbm_bytes_per_s", "1e-300"],
    ),
    "gpu memory 1e300": (
        _gpu_case({"memory_bytes": 1e300}),
        [],
        ["hardware.custom.memory_bytes", "1e+300"],
    ),
    "gpu flops 1e-300": (
        _gpu_case({"bf16_flops_per_s": 1e-300}),
        [],
        ["hardware.custom.bf16_flops_per_s", "1e-300"],
    ),
    "gpu flops 1e300": (
        _gpu_case({"bf16_flops_per_s": 1e300}),
        [],
        ["hardware.custom.bf16_flops_per_s", "1e+300"],
    ),
    "gpu link 1e300": (
        _gpu_case({"link_bytes_per_s": 1e300}),
        [],
        ["hardware.custom.link_bytes_per_s", "1e+300"],
    ),
    "gpu link 1e-300 over two GPUs (a rate that divides into infinity)": (
        scenario(
            {
                "hardware.gpu": "my-gpu",
                "hardware.num_gpus": 2,
                "hardware.custom": _custom_gpu({"link_bytes_per_s": 1e-300}),
            }
        ),
        [],
        ["hardware.custom.link_bytes_per_s", "0 (not stated) or >= 1e+06", "1e-300"],
    ),
    "gpu collective step latency 1e300": (
        _gpu_case({"collective_step_latency_s": 1e300}),
        [],
        ["hardware.custom.collective_step_latency_s", "<= 1", "1e+300"],
    ),
    "gpu pinned host link 1e-300": (
        _gpu_case({"host_link_pinned_bytes_per_s": 1e-300}),
        [],
        ["hardware.custom.host_link_pinned_bytes_per_s", "or >= 1e+06", "1e-300"],
    ),
    "gpu pageable host link 1e-300": (
        _gpu_case({"host_link_pageable_bytes_per_s": 1e-300}),
        [],
        ["hardware.custom.host_link_pageable_bytes_per_s", "or >= 1e+06", "1e-300"],
    ),
    "host dram 1e-300 (experts computed on the CPU)": (
        scenario({**OFFLOAD_CPU, "hardware.host": {"memory_bytes_per_s": 1e-300}}),
        [],
        ["hardware.host.memory_bytes_per_s", ">= 1e+06", "1e-300"],
    ),
    "host cpu flops 1e-300 (experts computed on the CPU)": (
        scenario({**OFFLOAD_CPU, "hardware.host": {"cpu_flops_per_s": 1e-300}}),
        [],
        ["hardware.host.cpu_flops_per_s", ">= 1e+06", "1e-300"],
    ),
    "host ram 1e-300": (
        scenario({**OFFLOAD_CPU, "hardware.host": {"memory_bytes": 1e-300}}),
        [],
        ["hardware.host.memory_bytes", ">= 1e+06", "1e-300"],
    ),
    "offload link 1e-300 GB/s": (
        scenario({**OFFLOAD_CPU, "offload.miss": "copy", "offload.link_gb_per_s": 1e-300}),
        [],
        ["offload.link_gb_per_s", ">= 0.001", "1e-300"],
    ),
    "gpu collective latency 1e300": (
        _gpu_case({"collective_latency_s": 1e300}),
        [],
        ["hardware.custom.collective_latency_s", "1e+300"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES), ids=sorted(CASES))
def test_impossible_hardware_or_model_is_refused(tmp_path, capsys, case):
    data, flags, fragments = CASES[case]
    path = write_scenario(tmp_path, data)
    for command in (["validate"], ["run"]):
        argv = [*command, str(path), *flags]
        assert_rejected(capsys, argv, tmp_path, [str(path), *fragments])


@pytest.mark.parametrize(
    ("num_gpus", "tp"), [(16, 0), (8, 8), (8, 2), (4, 4)], ids=["16", "8/8", "8/2", "4/4"]
)
def test_tensor_parallel_that_splits_or_replicates_kv_heads_is_fine(tmp_path, num_gpus, tp):
    data = scenario({"hardware.num_gpus": num_gpus, "hardware.tensor_parallel": tp})
    assert main(["validate", str(write_scenario(tmp_path, data))]) == 0


def test_validate_refuses_deepseek_v3_whole_on_one_of_eight_gpus(tmp_path, capsys):
    """Issue 30, 5: ``num_gpus = 8, tensor_parallel = 1`` holds the whole 671B model on each GPU
    of the split; validate (and run) refuse it naming tensor_parallel, and suggest FP8."""
    data = scenario(
        {
            "model.target": "deepseek-v3",
            "model.drafter": "mtp-deepseek-v3",
            "hardware.gpu": "h200",
            "hardware.num_gpus": 8,
            "hardware.tensor_parallel": 1,
        }
    )
    path = write_scenario(tmp_path, data)
    for command in ("validate", "run"):
        fragments = [str(path), "hardware.tensor_parallel", "GB on each GPU", 'precision = "fp8"']
        assert_rejected(capsys, [command, str(path)], tmp_path, fragments)
