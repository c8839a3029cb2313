"""GPU catalog entries against the published figures their files cite.

Each check derives a catalog number from the vendor's own headline figures by independent
arithmetic (a rack total over its GPUs, SMs x FLOP per clock x clock, a sparse rate halved), or
from the sibling whose die an entry shares, so a typo in an entry fails here."""

from __future__ import annotations

import pytest

from simspec import catalog
from simspec.costs.moe_kernel import kernel_identity

GIB = 2**30
MIB = 2**20


def _gpu(name):
    return catalog.get_gpu(name)


def test_h20_is_a_capped_hopper_with_the_full_nvlink():
    g = _gpu("h20")
    assert (g.memory_bytes, g.hbm_bytes_per_s) == (96e9, 4.0e12)
    # 148 TFLOP/s dense FP16/BF16 = half of its 296 INT8/FP8 TOPS, ~15 % of the H100's 989.
    assert g.bf16_flops_per_s == 296e12 / 2
    assert g.bf16_flops_per_s / _gpu("h100-sxm").bf16_flops_per_s == pytest.approx(0.15, abs=0.01)
    assert g.ridge_flops_per_byte == pytest.approx(37.0)
    assert g.num_sms == 78 and g.l2_bytes == 60 * MIB
    assert g.link_bytes_per_s == 900e9 / 2 and (g.pcie_generation, g.pcie_lanes) == (5, 16)


@pytest.mark.parametrize(
    ("name", "parent", "nvlink_total"),
    [
        ("h800", "h100-sxm", 400e9),
        ("a800-sxm-80gb", "a100-sxm-80gb", 400e9),
    ],
)
def test_export_variants_keep_their_parent_die_and_cut_only_nvlink(name, parent, nvlink_total):
    g, p = _gpu(name), _gpu(parent)
    same = (
        "memory_bytes",
        "hbm_bytes_per_s",
        "bf16_flops_per_s",
        "l2_bytes",
        "num_sms",
        "sm_clock_hz",
        "collective_latency_s",
        "collective_step_latency_s",
        "kernel_floor_graph_s",
        "kernel_floor_eager_s",
        "pcie_generation",
        "pcie_lanes",
    )
    assert {k: getattr(g, k) for k in same} == {k: getattr(p, k) for k in same}
    assert g.link_bytes_per_s == nvlink_total / 2 < p.link_bytes_per_s


def test_h800_and_a800_tensor_peaks_are_sms_times_rate_times_clock():
    # Hopper: 4096 dense FP16 FLOP/clk per SM at the 1.83 GHz tensor clock; Ampere: 2048 at 1.41.
    assert _gpu("h800").bf16_flops_per_s == pytest.approx(132 * 4096 * 1.83e9, rel=1e-3)
    assert _gpu("a800-sxm-80gb").bf16_flops_per_s == pytest.approx(108 * 2048 * 1.41e9, rel=1e-3)


def test_gb200_is_the_nvl72_rack_over_its_72_gpus():
    g, b200 = _gpu("gb200"), _gpu("b200")
    assert g.memory_bytes == pytest.approx(13.4e12 / 72, rel=2e-3)
    assert g.hbm_bytes_per_s == pytest.approx(576e12 / 72)
    assert g.bf16_flops_per_s == pytest.approx(360e15 / 72 / 2)  # sparse rate halved
    assert g.link_bytes_per_s == pytest.approx(130e12 / 72 / 2, rel=0.01)  # each way
    # The B200 die at a higher power limit: same SMs and L2, 2.5 / 2.25 PFLOP/s.
    assert (g.num_sms, g.l2_bytes) == (b200.num_sms, b200.l2_bytes)
    assert g.bf16_flops_per_s / b200.bf16_flops_per_s == pytest.approx(2.5 / 2.25)


def test_b300_per_gpu_figures():
    g = _gpu("b300")
    assert g.memory_bytes == 288e9 and g.hbm_bytes_per_s == 8e12 and g.num_sms == 160
    assert g.bf16_flops_per_s == pytest.approx(36e15 / 8 / 2)  # HGX B300, sparse, 8 GPUs
    assert g.bf16_flops_per_s == _gpu("b200").bf16_flops_per_s
    assert g.link_bytes_per_s == 1.8e12 / 2


def test_amd_peaks_are_cus_times_rate_times_clock():
    mi300x, mi325x, mi355x = _gpu("mi300x"), _gpu("mi325x"), _gpu("mi355x")
    # CDNA 3: 2048 dense FP16 FLOP/clk per CU at 2.1 GHz; the MI325X keeps the MI300X's compute.
    assert mi325x.bf16_flops_per_s == pytest.approx(304 * 2048 * 2.1e9, rel=1e-4)
    assert (mi325x.bf16_flops_per_s, mi325x.num_sms, mi325x.l2_bytes) == (
        mi300x.bf16_flops_per_s,
        mi300x.num_sms,
        mi300x.l2_bytes,
    )
    assert (mi325x.memory_bytes, mi325x.hbm_bytes_per_s) == (256e9, 6.0e12)
    # CDNA 4: 8 XCDs x 32 CUs, 4096 dense FP16 FLOP/clk per CU (half of FP8's 8192) at 2.4 GHz.
    assert mi355x.num_sms == 8 * 32
    assert mi355x.bf16_flops_per_s == pytest.approx(256 * 8192 / 2 * 2.4e9, rel=1e-4)
    assert (mi355x.memory_bytes, mi355x.hbm_bytes_per_s) == (288e9, 8.0e12)
    assert mi355x.l2_bytes == mi325x.l2_bytes == 8 * 4 * MIB


def test_rtx_pro_6000_blackwell_figures():
    g = _gpu("rtx-pro-6000-blackwell")
    assert g.memory_bytes == pytest.approx(96 * GIB, rel=1e-6)
    assert g.hbm_bytes_per_s == 28e9 * 512 / 8  # 28 Gbps GDDR7 on a 512-bit bus
    assert g.bf16_flops_per_s == 4000e12 / 2 / 2 / 2  # FP4 sparse -> dense -> FP8 -> BF16
    assert g.num_sms == 188 and g.l2_bytes == 128 * MIB
    # 125 TFLOP/s FP32 over 188 SMs x 128 lanes x 2 puts the boost clock near the quoted 2.6 GHz.
    assert 125e12 / (g.num_sms * 128 * 2) == pytest.approx(2.6e9, rel=0.01)


@pytest.mark.parametrize(
    ("name", "architecture"),
    [
        ("h20", "hopper"),
        ("h800", "hopper"),
        ("a800-sxm-80gb", "ampere"),
        ("gb200", "blackwell"),
        ("b300", "blackwell"),
    ],
)
def test_datacenter_variants_run_their_generation_s_fused_moe_kernel(name, architecture):
    assert kernel_identity(name, 1.0) == f"{architecture}-fp8"
