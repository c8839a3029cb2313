"""GPU and host specs: every catalog GPU loads inside physical bounds; the host link's derived
bandwidths follow the PCIe closed form; ``[hardware.host]`` parses strictly and is optional."""

from __future__ import annotations

import dataclasses

import pytest

from simspec import catalog
from simspec.config.load import load_scenario
from simspec.errors import ScenarioError
from simspec.physics.hardware import (
    PAGEABLE_FRACTION_OF_PINNED,
    PCIE_REACHED_FRACTION,
    GpuSpec,
    HostSpec,
)
from simspec.schema import build

#: GPUs that expert-offloading users run (issue 29), and the four with a host link added.
OFFLOAD_GPUS = [
    "rtx-3060-12gb",
    "rtx-3080-mobile-16gb",
    "rtx-3090",
    "rtx-4090",
    "rtx-5090",
    "rtx-a6000",
    "rtx-a5000",
    "l4",
    "l40s",
    "t4",
    "a30",
    "h100-pcie",
    "quadro-rtx-6000",
    "rtx-6000-ada",
    "a100-pcie-40gb",
    "a100-sxm-80gb",
    "h100-sxm",
    "h200",
]


@pytest.mark.parametrize("name", catalog.gpu_names())
def test_every_catalog_gpu_loads_inside_physical_bounds(name):
    g = catalog.get_gpu(name)
    assert 8e9 <= g.memory_bytes <= 3e11  # up to the 288 GB of B300 / MI355X
    assert 2e11 <= g.hbm_bytes_per_s <= 1e13
    assert 1e13 <= g.bf16_flops_per_s <= 5e15
    assert 1e6 <= g.l2_bytes <= 3e8 and 20 <= g.num_sms <= 400
    # Dense peaks: a decode GPU's ridge point sits between ~30 (the H20, whose tensor rate is
    # capped by firmware: 148 TFLOP/s over 4.0 TB/s) and ~700 FLOP/byte.
    assert 30 < g.ridge_flops_per_byte < 700
    assert g.source.startswith("https://") and g.notes
    # every kernel pays a floor, more when launched eagerly (simspec.physics.launches)
    assert 1e-6 <= g.kernel_floor_graph_s < g.kernel_floor_eager_s <= 2e-5
    if g.pcie_generation:
        assert g.pcie_generation in (3, 4, 5) and g.pcie_lanes == 16


@pytest.mark.parametrize("name", OFFLOAD_GPUS)
def test_offload_gpus_state_their_host_link(name):
    g = catalog.get_gpu(name)
    assert g.pcie_generation in (3, 4, 5) and g.pcie_lanes == 16
    # The reached pinned rates of offload.md: ~12 (gen 3), 21-26 (gen 4), 50-55 (gen 5) GB/s.
    low, high = {3: (11e9, 13e9), 4: (21e9, 26e9), 5: (48e9, 55e9)}[g.pcie_generation]
    assert low <= g.host_link_bytes_per_s(pinned=True) <= high
    assert g.host_link_bytes_per_s(pinned=False) < g.host_link_bytes_per_s(pinned=True) / 2
    assert 0 < g.host_copy_latency_s <= 1e-5  # a few us per cudaMemcpyAsync


def _gpu(**kw) -> GpuSpec:
    return GpuSpec(name="g", memory_bytes=1e10, hbm_bytes_per_s=1e12, bf16_flops_per_s=1e14, **kw)


@pytest.mark.parametrize(
    ("generation", "gt_per_s", "coding"),
    [(3, 8e9, 128 / 130), (4, 16e9, 128 / 130), (5, 32e9, 128 / 130), (6, 64e9, 242 / 256)],
)
@pytest.mark.parametrize("lanes", [1, 4, 8, 16])
def test_derived_link_bandwidth_is_the_line_rate_times_the_reached_fraction(
    generation, gt_per_s, coding, lanes
):
    g = _gpu(pcie_generation=generation, pcie_lanes=lanes)
    line = gt_per_s * coding / 8 * lanes  # bytes/s per direction
    assert g.host_link_bytes_per_s(pinned=True) == pytest.approx(line * PCIE_REACHED_FRACTION)
    assert g.host_link_bytes_per_s(pinned=False) == pytest.approx(
        line * PCIE_REACHED_FRACTION * PAGEABLE_FRACTION_OF_PINNED
    )


def test_pcie_4_x16_is_31_5_gb_per_s_line_rate():
    assert _gpu(pcie_generation=4, pcie_lanes=16).host_link_bytes_per_s() == pytest.approx(
        31.5e9 * PCIE_REACHED_FRACTION, rel=1e-3
    )


def test_stated_bandwidths_win_and_a_stated_pinned_one_bases_the_pageable_one():
    g = _gpu(pcie_generation=4, pcie_lanes=16, host_link_pinned_bytes_per_s=22e9)
    assert g.host_link_bytes_per_s(pinned=True) == 22e9
    assert g.host_link_bytes_per_s(pinned=False) == pytest.approx(22e9 / 3)
    g = dataclasses.replace(g, host_link_pageable_bytes_per_s=8e9)
    assert g.host_link_bytes_per_s(pinned=False) == 8e9


def test_an_unstated_link_is_zero():
    g = _gpu()
    assert g.host_link_bytes_per_s(pinned=True) == g.host_link_bytes_per_s(pinned=False) == 0.0


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"pcie_generation": 4}, "pcie_lanes"),
        ({"pcie_lanes": 16}, "pcie_generation"),
        ({"pcie_generation": 7, "pcie_lanes": 16}, "pcie_generation"),
        ({"pcie_generation": 4, "pcie_lanes": 64}, "pcie_lanes"),
        ({"host_link_pinned_bytes_per_s": -1.0}, "host_link_pinned_bytes_per_s"),
        ({"host_copy_latency_s": 1.0}, "host_copy_latency_s"),
    ],
)
def test_a_bad_host_link_names_its_key(table, key):
    data = {"name": "g", "memory_bytes": 1e10, "hbm_bytes_per_s": 1e12, "bf16_flops_per_s": 1e14}
    with pytest.raises(ScenarioError) as err:
        build(GpuSpec, {**data, **table}, source="x.toml", path="hardware.custom")
    assert f"hardware.custom.{key}" in str(err.value)


def test_host_table_is_optional_and_leaves_the_digest_alone():
    base = load_scenario()
    assert base.hardware.host is None and base.host == HostSpec()
    assert "host" not in base.to_dict()["hardware"]  # results JSON as before the key existed
    same = load_scenario(overrides=["hardware.host.memory_bytes_per_s=64e9"])
    assert same.host == base.host and same.digest() != base.digest()  # set = stated
    server = load_scenario(overrides=["hardware.host.memory_bytes_per_s=1.5e11"])
    assert server.host.memory_bytes_per_s == 1.5e11
    assert server.host.cpu_flops_per_s == HostSpec().cpu_flops_per_s
    assert server.to_dict()["hardware"]["host"]["memory_bytes_per_s"] == 1.5e11


@pytest.mark.parametrize(
    "override",
    [
        "hardware.host.memory_bytes_per_s=0",
        "hardware.host.cpu_flops_per_s=-1",
        "hardware.host.memory_bytes=0",
        "hardware.host.bogus=1",
    ],
)
def test_a_bad_host_value_names_its_key(override):
    with pytest.raises(ScenarioError) as err:
        load_scenario(overrides=[override])
    assert override.split("=")[0] in str(err.value)


def test_a_scenario_picks_an_offload_gpu():
    s = load_scenario(overrides=['hardware.gpu="rtx-4090"', 'model.target="qwen3-8b"',
                                 'model.drafter="eagle3-qwen3-8b"'])  # fmt: skip
    assert s.gpu.name == "rtx-4090" and s.gpu.pcie_generation == 4


#: Spec-sheet FP64 (non-tensor) peaks, FLOP/s, and FP64 FMA units per SM: A100 9.7 TFLOP/s,
#: 32 per SM (NVIDIA A100 data sheet and Ampere whitepaper); H100 SXM 34 TFLOP/s, 64 per SM
#: (NVIDIA H100 data sheet and Hopper whitepaper). peak = SMs · units · 2 · f_SM.
FP64_PEAKS = {
    "a100-sxm-80gb": (9.7e12, 32),
    "a100-pcie-40gb": (9.7e12, 32),
    "h100-sxm": (34e12, 64),
    "h200": (34e12, 64),
}


@pytest.mark.parametrize("name", sorted(FP64_PEAKS))
def test_the_sm_clock_reproduces_the_data_sheets_fp64_peak(name):
    """The catalog's boost clock is the one the published FP64 peak implies (within 2 %: the
    sheets round, 33.5 to 34 TFLOP/s)."""
    gpu = catalog.get_gpu(name)
    peak, units = FP64_PEAKS[name]
    assert gpu.num_sms * units * 2 * gpu.sm_clock_hz == pytest.approx(peak, rel=0.02)


def test_latency_scale_is_the_reference_clock_over_the_gpus_and_one_when_unstated():
    assert catalog.get_gpu("h200").latency_scale == 1.0
    assert catalog.get_gpu("a100-pcie-40gb").latency_scale == pytest.approx(1980 / 1410)
    assert catalog.get_gpu("h100-pcie").latency_scale == pytest.approx(1980 / 1755)
    assert catalog.get_gpu("t4").latency_scale == 1.0  # no clock stated


@pytest.mark.parametrize("name", [n for n in catalog.gpu_names() if not n.startswith("mi")])
def test_an_unmeasured_graph_floor_is_the_measured_one_at_this_gpus_clock(name):
    """Every NVIDIA GPU's graph floor is the H200's measured floor (a clock-bound chain) times
    the clock ratio (1 where no clock is stated), to the 3 digits the catalog states: no GPU
    launches its kernels for free."""
    gpu, reference = catalog.get_gpu(name), catalog.get_gpu("h200")
    expected = reference.kernel_floor_graph_s * gpu.latency_scale
    assert gpu.kernel_floor_graph_s == pytest.approx(expected, rel=2e-3)


def test_host_bandwidth_from_channels_and_threads():
    """Channels x 8 B x MT/s at the default desktop's stream fraction (64 of 89.6 GB/s); a
    GEMV on few threads is bound by what each streams (Little's law, 12 GB/s)."""
    from simspec.physics.hardware import CORE_STREAM_BYTES_PER_S

    server = HostSpec(memory_channels=8, memory_mt_per_s=3200)
    assert server.expert_bytes_per_s == pytest.approx(8 * 8 * 3200e6 * 64 / 89.6)
    assert HostSpec(memory_channels=2, memory_mt_per_s=2666).expert_bytes_per_s / 1e9 == (
        pytest.approx(2 * 8 * 2.666 * 64 / 89.6)
    )
    few = HostSpec(memory_channels=8, memory_mt_per_s=3200, cpu_threads=4)
    assert few.expert_bytes_per_s == 4 * CORE_STREAM_BYTES_PER_S
    assert HostSpec().expert_bytes_per_s == HostSpec().memory_bytes_per_s
