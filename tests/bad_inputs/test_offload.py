"""Impossible expert offloading is refused (issue 29): a cache larger than the experts, a host
link of 0 GB/s, a prefetch accuracy outside [0, 1], no GPU memory left for the cache, more than
one GPU. Each case exits 2 with one paragraph naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from simspec import catalog
from simspec.schema import to_dict

from .rejects import assert_rejected, scenario, write_scenario

OFFLOAD = {"offload.experts": "host_pinned", "hardware.gpu": "rtx-4090"}


def _no_link_gpu() -> dict[str, Any]:
    gpu = to_dict(catalog.get_gpu("rtx-4090"))
    del gpu["name"]
    gpu.update(pcie_generation=0, pcie_lanes=0, host_link_pinned_bytes_per_s=0.0)
    gpu["host_link_pageable_bytes_per_s"] = 0.0
    return gpu


#: id -> (scenario data, fragments of the message besides the file name)
CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "cache larger than the experts (per layer)": (
        scenario({**OFFLOAD, "offload.cache_experts_per_layer": 129}),
        ["offload.cache_experts_per_layer", "128 experts", "129"],
    ),
    "cache larger than the experts (GB)": (
        scenario({**OFFLOAD, "offload.cache_gb": 500.0}),
        ["offload.cache_gb", "GB of qwen3-30b-a3b's routed experts", "500"],
    ),
    "link of 0 GB/s": (
        scenario({**OFFLOAD, "offload.link_gb_per_s": 0.0}),
        ["offload.link_gb_per_s", ">= 0.001", "0.0"],
    ),
    "a GPU without a host link": (
        scenario({**OFFLOAD, "hardware.gpu": "my-gpu", "hardware.custom": _no_link_gpu()}),
        ["offload.link_gb_per_s", "above 0 GB/s", "0 GB/s"],
    ),
    "more host layers than MoE layers": (
        scenario({**OFFLOAD, "offload.host_moe_layers": 49}),
        ["offload.host_moe_layers", "48 MoE layers", "49"],
    ),
    "prefetch accuracy above 1": (
        scenario({**OFFLOAD, "offload.prefetch_accuracy": 1.5}),
        ["offload.prefetch_accuracy", "<= 1", "1.5"],
    ),
    "prefetch accuracy below 0": (
        scenario({**OFFLOAD, "offload.prefetch_accuracy": -0.1}),
        ["offload.prefetch_accuracy", ">= 0", "-0.1"],
    ),
    "nothing left for the cache": (
        scenario(
            {
                **OFFLOAD,
                "hardware.gpu": "rtx-3060-12gb",
                "workload.concurrency": 64,
                "workload.prompt_tokens": 4000,
            }
        ),
        ["offload.cache_gb", "GB of GPU memory left", "nothing left for it"],
    ),
    "a fixed cache that does not fit": (
        scenario({**OFFLOAD, "offload.cache_experts_per_layer": 100}),
        ["offload.cache_experts_per_layer", "GB of GPU memory left", "GB"],
    ),
    "both capacities": (
        scenario({**OFFLOAD, "offload.cache_experts_per_layer": 4, "offload.cache_gb": 2.0}),
        ["offload.cache_gb", "cache_experts_per_layer", "2.0"],
    ),
    "offloading over two GPUs": (
        scenario({**OFFLOAD, "hardware.num_gpus": 2}),
        ["hardware.num_gpus", "single-GPU", "2"],
    ),
    "an unknown cache policy": (
        scenario({**OFFLOAD, "offload.cache_policy": "fifo"}),
        ["offload.cache_policy", "lru", "fifo"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_impossible_offloading_is_refused(tmp_path, capsys, case):
    data, fragments = CASES[case]
    path = write_scenario(tmp_path, data)
    assert_rejected(capsys, ["validate", str(path)], tmp_path, [str(path), *fragments])
