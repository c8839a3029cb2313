"""GPUs: the spec-sheet numbers the roofline cost model divides by.

A :class:`GpuSpec` holds HBM capacity and bandwidth, dense bf16 tensor throughput, L2 size and
SM count (catalog files under ``simspec/catalog/gpus`` cite the data sheets). Achieved fractions
of these peaks are *not* here: they are named efficiencies of the cost model
(``simspec.params.RooflineParams``), assumed by default and measured by ``simspec calibrate``
into a calibration profile (``simspec.profile``, files under ``calibration/``).

The host link (PCIe generation and lanes, the host-to-device bandwidth reached from pinned and
from pageable memory, the fixed cost of one copy) is what offloaded experts cross; a
:class:`HostSpec` holds the host side (DRAM bandwidth and CPU FLOP/s an expert computed on the
CPU runs at, host RAM). Unlike the HBM and FLOP peaks, the link bandwidths are *reached* values:
a copy engine never reaches the PCIe line rate (:data:`PCIE_REACHED_FRACTION`)."""

from __future__ import annotations

from dataclasses import dataclass

from simspec.errors import FieldError
from simspec.schema import param

#: PCIe line rate per lane and direction after line coding, bytes/s, by generation: 8 GT/s
#: 128b/130b (gen 3), 16 GT/s (gen 4), 32 GT/s (gen 5), 64 GT/s PAM4 with 242 of 256 FLIT
#: bytes carrying data (gen 6) (PCI-SIG, https://pcisig.com/specifications; x16 per direction:
#: 15.75, 31.5, 63.0 and 121 GB/s).
PCIE_LANE_BYTES_PER_S: dict[int, float] = {
    1: 2.5e9 * 0.8 / 8,
    2: 5e9 * 0.8 / 8,
    3: 8e9 * 128 / 130 / 8,
    4: 16e9 * 128 / 130 / 8,
    5: 32e9 * 128 / 130 / 8,
    6: 64e9 * 242 / 256 / 8,
}

#: Fraction of the PCIe line rate a pinned host-to-device copy reaches (TLP headers, flow
#: control, DMA descriptors): 0.8 gives 12.6 / 25.2 / 50.4 GB/s on gen 3 / 4 / 5 x16, inside
#: the published reached rates: ~12 GB/s on PCIe 3 x16 (bandwidthTest, P100 PCIe: 12.15 GB/s,
#: https://github.com/mpicbg-scicomp/gearshifft/pull/82), 21-26 GB/s on PCIe 4 x16 (25 GB/s on
#: A100, https://github.com/ZaidQureshi/bam/issues/54; ~24 typical in the offloading papers,
#: arXiv 2312.17238, 2402.07033, 2510.10302) and ~50-55 GB/s on PCIe 5 x16.
PCIE_REACHED_FRACTION = 0.8

#: Pageable host memory reaches about a third of pinned (the driver stages each chunk through a
#: pinned bounce buffer with a CPU memcpy): ~3x slower in the offloading papers, ~8 GB/s on a
#: PCIe 5 RTX 5090 (https://github.com/toyaix/tritonllm/pull/41).
PAGEABLE_FRACTION_OF_PINNED = 1 / 3

#: Fixed cost of one host-to-device cudaMemcpyAsync (runtime + driver submission, DMA setup):
#: 5-7 us per call measured for many small copies (DualPath, arXiv 2602.21548, section 5.2).
HOST_COPY_LATENCY_S = 6e-6

#: How a node's GPUs connect (:attr:`GpuSpec.fabric`): through a switch, or by a direct link
#: between every pair (a fully connected mesh).
FABRICS = ("switch", "mesh")

#: SM boost clock the fixed kernel times are stated at, Hz: the H100 SXM's and H200's 1980 MHz
#: (same GH100 die and clocks; the measured kernel floors come from an H200 and most published
#: fused-MoE tables the MoE kernel's fixed time is fitted on from H100/H200/B200, all
#: ~1.98 GHz). A fixed time is a chain of dependent steps that each wait on the SM (issue,
#: synchronisation, a reduction's rounds), so on another GPU it takes
#: ``REFERENCE_SM_CLOCK_HZ / sm_clock_hz`` times as long (:meth:`GpuSpec.latency_scale`).
REFERENCE_SM_CLOCK_HZ = 1.98e9


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
    """One accelerator's peak numbers (bounded far beyond any GPU, so a custom one stays finite;
    the bandwidth bounds are a profile's)."""

    name: str = param(help="catalog key")
    display_name: str = param("", "human-readable name")
    source: str = param("", "data sheet(s)")
    notes: str = param("", "assumptions")
    memory_bytes: float = param(help="HBM capacity, bytes", ge=1e6, le=1e15)
    hbm_bytes_per_s: float = param(help="peak HBM bandwidth, bytes/s", ge=1e6, le=1e15)
    bf16_flops_per_s: float = param(
        help="peak dense bf16 tensor throughput, FLOP/s", ge=1e6, le=1e18
    )
    l2_bytes: float = param(0.0, "L2 cache, bytes", ge=0, le=1e12)
    num_sms: int = param(0, "streaming multiprocessors", ge=0, le=1_000_000)
    sm_clock_hz: float = param(
        0.0,
        "SM boost clock, Hz (0 = not stated: fixed kernel times are taken at the reference "
        "clock, simspec.physics.hardware.REFERENCE_SM_CLOCK_HZ)",
        ge=0,
        zero_or_ge=1e7,
        le=1e11,
    )
    link_bytes_per_s: float = param(
        0.0,
        "GPU-to-GPU bandwidth per direction (NVLink, else PCIe), bytes/s: through the switch "
        "(fabric = switch), or of one direct link to a peer (fabric = mesh); 0 = not stated "
        "(collectives then cost their latency only)",
        ge=0,
        zero_or_ge=1e6,
        le=1e15,
    )
    node_gpus: int = param(
        8,
        "GPUs one node's GPU-to-GPU fabric joins (an HGX board: 8; a GB200 NVL72 rack: 72); "
        "simspec prices every collective over that fabric, so a run over more GPUs, whose "
        "collectives cross nodes, is priced as if one node held them all (a multi-node "
        "warning says so)",
        ge=1,
        le=100_000,
    )
    fabric: str = param(
        "switch",
        "how the GPUs of a node connect: switch (NVSwitch, PCIe: a collective reaches "
        "link_bytes_per_s whatever its size) or mesh (a direct link to each peer, AMD's "
        "Infinity Fabric: a collective over r GPUs drives r - 1 links at once)",
        choices=FABRICS,
    )
    collective_latency_s: float = param(
        0.0,
        "base latency of one small collective (all-reduce, all-to-all) across the GPUs, s "
        "(NCCL's tuning model: baseLat of the ring's low-latency protocol)",
        ge=0,
        le=1.0,
    )
    collective_step_latency_s: float = param(
        0.0,
        "latency of each ring step of a collective over this link, s: an all-reduce over r "
        "GPUs takes 2(r - 1) steps, an all-to-all r - 1 (NCCL's tuning model: hwLat)",
        ge=0,
        le=1.0,
    )
    custom_allreduce_latency_s: float = param(
        0.0,
        "latency a of the engines' custom all-reduce inside one node (vLLM's and SGLang's, "
        "TensorRT-LLM's one-shot) for decode-sized messages: a + s·(r − 1) + "
        "(r − 1)/r · m / (b·l) over r GPUs driving l links (l = 1 through a switch, r − 1 in "
        "a mesh), the cheaper of it and the ring, s (0 = not measured: the ring)",
        ge=0,
        le=1.0,
    )
    custom_allreduce_step_s: float = param(
        0.0, "latency s the custom all-reduce adds per further GPU, s", ge=0, le=1.0
    )
    custom_allreduce_bytes_per_s: float = param(
        0.0,
        "bandwidth b the custom all-reduce reaches per link driven on decode-sized "
        "messages, bytes/s",
        ge=0,
        le=1e15,
    )
    kernel_floor_graph_s: float = param(
        0.0,
        "fixed time of one kernel launched from a CUDA graph (launch gap plus the shortest "
        "kernel's run), s: every kernel of a pass pays it on top of its bytes and FLOPs",
        ge=0,
        lt=1e-3,
    )
    kernel_floor_eager_s: float = param(
        0.0,
        "fixed time of one kernel launched eagerly (host launch path per kernel), s",
        ge=0,
        lt=1e-3,
    )

    pcie_generation: int = param(0, "PCIe generation of the host link (0 = not stated)", ge=0, le=6)
    pcie_lanes: int = param(0, "PCIe lanes of the host link (0 = not stated)", ge=0, le=32)
    host_link_pinned_bytes_per_s: float = param(
        0.0,
        "host-to-device bandwidth reached from pinned host memory, bytes/s (0 = derive: "
        "generation x lanes line rate x 0.8, simspec.physics.hardware.PCIE_REACHED_FRACTION)",
        ge=0,
        zero_or_ge=1e6,
        le=1e13,
    )
    host_link_pageable_bytes_per_s: float = param(
        0.0,
        "host-to-device bandwidth reached from pageable host memory, bytes/s (0 = derive: a "
        "third of pinned)",
        ge=0,
        zero_or_ge=1e6,
        le=1e13,
    )
    host_copy_latency_s: float = param(
        HOST_COPY_LATENCY_S,
        "fixed cost of one host-to-device copy (cudaMemcpyAsync submission + DMA setup), s "
        "(default 6 us: 5-7 us measured, arXiv 2602.21548)",
        ge=0,
        lt=1e-2,
    )

    def __post_init__(self) -> None:
        if self.pcie_generation and not self.pcie_lanes:
            raise FieldError("pcie_lanes", "lanes (1-32) with pcie_generation", self.pcie_lanes)
        if self.pcie_lanes and not self.pcie_generation:
            raise FieldError(
                "pcie_generation", "a generation (1-6) with pcie_lanes", self.pcie_generation
            )

    def host_link_bytes_per_s(self, pinned: bool = True) -> float:
        """Host-to-device bandwidth reached from pinned (or pageable) host memory, bytes/s.

        The stated value when the catalog or scenario gives one; else derived from the PCIe
        generation and lanes: line rate x :data:`PCIE_REACHED_FRACTION` for pinned, that times
        :data:`PAGEABLE_FRACTION_OF_PINNED` for pageable (a stated pinned value is the base of a
        derived pageable one). 0.0 when neither the bandwidth nor the link is stated.

        Examples
        --------
        >>> g = GpuSpec(name="g", memory_bytes=1e10, hbm_bytes_per_s=1e12,
        ...             bf16_flops_per_s=1e14, pcie_generation=4, pcie_lanes=16)
        >>> pinned, pageable = g.host_link_bytes_per_s(), g.host_link_bytes_per_s(pinned=False)
        >>> round(pinned / 1e9, 2), round(pageable / 1e9, 2)
        (25.21, 8.4)
        """
        pinned_bps = self.host_link_pinned_bytes_per_s or (
            PCIE_LANE_BYTES_PER_S.get(self.pcie_generation, 0.0)
            * self.pcie_lanes
            * PCIE_REACHED_FRACTION
        )
        if pinned:
            return pinned_bps
        return self.host_link_pageable_bytes_per_s or pinned_bps * PAGEABLE_FRACTION_OF_PINNED

    @property
    def mesh(self) -> bool:
        """Whether each pair of GPUs has its own link (``fabric = "mesh"``): a collective over r
        GPUs then drives r − 1 links at once (:func:`simspec.costs.parallel.allreduce_s`)."""
        return self.fabric == "mesh"

    @property
    def collectives_stated(self) -> bool:
        """Whether the catalog states what a collective costs on this GPU (a latency, or the
        engines' measured custom all-reduce): without it a collective costs its bytes over
        the link only, or nothing (:func:`simspec.analysis.guardrails.gpu_warnings`)."""
        return self.collective_latency_s > 0 or self.custom_allreduce_latency_s > 0

    @property
    def custom_allreduce(self) -> tuple[float, float, float]:
        """(latency, per further GPU, bandwidth) of the engines' custom all-reduce; all 0 where
        the catalog has no measurement (:func:`simspec.costs.parallel.allreduce_s`)."""
        return (
            self.custom_allreduce_latency_s,
            self.custom_allreduce_step_s,
            self.custom_allreduce_bytes_per_s,
        )

    def kernel_floor_s(self, cuda_graphs: bool) -> float:
        """The per-kernel floor of a pass launched from a CUDA graph or eagerly."""
        return self.kernel_floor_graph_s if cuda_graphs else self.kernel_floor_eager_s

    @property
    def latency_scale(self) -> float:
        """How much longer than at :data:`REFERENCE_SM_CLOCK_HZ` a fixed, clock-bound kernel
        time takes on this GPU: the reference clock over this GPU's SM clock (1.0 when the
        clock is not stated).

        >>> g = GpuSpec(name="a100", memory_bytes=8e10, hbm_bytes_per_s=2.039e12,
        ...             bf16_flops_per_s=3.12e14, sm_clock_hz=1.41e9)
        >>> round(g.latency_scale, 3)  # 1980 / 1410 MHz
        1.404
        """
        return REFERENCE_SM_CLOCK_HZ / self.sm_clock_hz if self.sm_clock_hz else 1.0

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity above which a kernel is compute-bound at peak."""
        return self.bf16_flops_per_s / self.hbm_bytes_per_s


#: Host defaults: a desktop that runs a single-GPU offloaded deployment.
#: Dual-channel DDR5-5600: 2 x 8 B x 5.6 GT/s = 89.6 GB/s peak; a streaming read reaches ~70 %
#: of it (STREAM on dual-channel DDR5 desktops: ~60-70 GB/s), so 64 GB/s. An 8-channel DDR4-3200
#: server has 204.8 GB/s peak (~150 reached); set it in ``[hardware.host]``.
HOST_MEMORY_BYTES_PER_S = 64e9
#: A 16-core AVX2/AVX-512 desktop CPU (Zen 4 / Raptor Lake class): 16 cores x 2 FMA pipes x 8
#: fp32 lanes x 2 FLOP x ~4 GHz = 2 TFLOP/s fp32 peak; a GEMV of one token is memory-bound far
#: below it, so the default only matters for many tokens per expert.
HOST_CPU_FLOPS_PER_S = 2e12
#: Fraction of the DRAM channels' peak a streaming read reaches: the default desktop's 64 of
#: 89.6 GB/s (above), applied to a host described by its channels and transfer rate.
HOST_STREAM_FRACTION = HOST_MEMORY_BYTES_PER_S / 89.6e9
#: Bytes per DRAM transfer of one channel (a 64-bit DDR4/DDR5 channel).
CHANNEL_BYTES_PER_TRANSFER = 8
#: What one CPU thread streams from DRAM, bytes/s. Little's law: bandwidth = bytes in flight /
#: latency; a core keeps ~10-12 64-byte line misses in flight (its L1 line fill buffers, Intel
#: 64 and IA-32 Optimization Reference Manual) plus the L2 streamer's prefetches, over ~80-100
#: ns of DRAM latency: ~10-15 GB/s; 12 GB/s. A GEMV on few threads is bound by this, not by
#: the channels.
CORE_STREAM_BYTES_PER_S = 12e9
#: 128 GB of host RAM: enough for Mixtral-8x7B's experts in bf16 (~90 GB), as the offloading
#: papers' machines have (Fiddler, SP-MoE: 128-256 GB).
HOST_MEMORY_BYTES = 128e9


@dataclass(frozen=True, slots=True, kw_only=True)
class HostSpec:
    """The host an offloaded expert lives on (scenario table ``[hardware.host]``): the DRAM
    bandwidth and CPU FLOP/s an expert computed on the CPU runs at, and the RAM that must hold
    the offloaded experts. Defaults: a 16-core desktop with dual-channel DDR5 (module
    constants)."""

    memory_bytes_per_s: float = param(
        HOST_MEMORY_BYTES_PER_S,
        "host DRAM bandwidth a CPU-computed expert reads its weights at, bytes/s (reached, not "
        "peak; default: dual-channel DDR5 desktop)",
        ge=1e6,
        le=1e13,
    )
    cpu_flops_per_s: float = param(
        HOST_CPU_FLOPS_PER_S,
        "CPU fp32/bf16 throughput for an expert's GEMV/GEMM, FLOP/s (default: 16-core desktop)",
        ge=1e6,
        le=1e16,
    )
    memory_bytes: float = param(
        HOST_MEMORY_BYTES, "host RAM holding the offloaded experts, bytes", ge=1e6, le=1e15
    )
    memory_channels: int = param(
        0,
        "populated DRAM channels the experts are spread over, all sockets (0 = not stated: "
        "memory_bytes_per_s is the reached bandwidth)",
        ge=0,
        le=64,
    )
    memory_mt_per_s: float = param(
        0.0,
        "DRAM transfer rate, MT/s (DDR4-2666: 2666); with memory_channels it sets the reached "
        "bandwidth: channels x 8 B x rate x the stream fraction (0 = not stated)",
        ge=0,
        le=20000,
    )
    cpu_threads: int = param(
        0,
        "threads computing CPU experts (0 = not stated: no per-thread bound); each streams at "
        "most ~12 GB/s (Little's law), so few threads cannot reach the channels",
        ge=0,
        le=4096,
    )

    @property
    def expert_bytes_per_s(self) -> float:
        """Bandwidth a CPU-computed expert's GEMV reads its weights at, bytes/s: the channels'
        peak x :data:`HOST_STREAM_FRACTION` when channels and rate are stated (else
        ``memory_bytes_per_s``), at most ``cpu_threads`` x :data:`CORE_STREAM_BYTES_PER_S`.

        >>> HostSpec(memory_channels=2, memory_mt_per_s=5600).expert_bytes_per_s / 1e9
        64.0
        >>> HostSpec(memory_channels=2, memory_mt_per_s=5600, cpu_threads=2).expert_bytes_per_s
        24000000000.0
        """
        reached = self.memory_bytes_per_s
        if self.memory_channels and self.memory_mt_per_s:
            peak = self.memory_channels * CHANNEL_BYTES_PER_TRANSFER * self.memory_mt_per_s * 1e6
            reached = peak * HOST_STREAM_FRACTION
        if self.cpu_threads:
            reached = min(reached, self.cpu_threads * CORE_STREAM_BYTES_PER_S)
        return reached
