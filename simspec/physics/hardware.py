"""GPUs: the spec-sheet numbers the roofline cost model divides by.

A :class:`GpuSpec` holds HBM capacity and bandwidth, dense bf16 tensor throughput, L2 size and
SM count (catalog files under ``simspec/catalog/gpus`` cite the data sheets). Achieved fractions
of these peaks are *not* here: they are named efficiencies of the cost model
(``simspec.params.RooflineParams``), assumed by default and measured by ``simspec calibrate``
into a calibration profile (``simspec.profile``, files under ``calibration/``)."""

from __future__ import annotations

from dataclasses import dataclass

from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
    """One accelerator's peak numbers."""

    name: str = param(help="catalog key")
    display_name: str = param("", "human-readable name")
    source: str = param("", "data sheet(s)")
    notes: str = param("", "assumptions")
    memory_bytes: float = param(help="HBM capacity, bytes", gt=0)
    hbm_bytes_per_s: float = param(help="peak HBM bandwidth, bytes/s", gt=0)
    bf16_flops_per_s: float = param(help="peak dense bf16 tensor throughput, FLOP/s", gt=0)
    l2_bytes: float = param(0.0, "L2 cache, bytes", ge=0)
    num_sms: int = param(0, "streaming multiprocessors", ge=0)
    link_bytes_per_s: float = param(
        0.0,
        "GPU-to-GPU bandwidth per direction (NVLink, else PCIe), bytes/s; 0 = not stated "
        "(collectives then cost their latency only)",
        ge=0,
    )
    collective_latency_s: float = param(
        0.0,
        "base latency of one small collective (all-reduce, all-to-all) across the GPUs, s "
        "(NCCL's tuning model: baseLat of the ring's low-latency protocol)",
        ge=0,
    )
    collective_step_latency_s: float = param(
        0.0,
        "latency of each ring step of a collective over this link, s: an all-reduce over r "
        "GPUs takes 2(r - 1) steps, an all-to-all r - 1 (NCCL's tuning model: hwLat)",
        ge=0,
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

    def kernel_floor_s(self, cuda_graphs: bool) -> float:
        """The per-kernel floor of a pass launched from a CUDA graph or eagerly."""
        return self.kernel_floor_graph_s if cuda_graphs else self.kernel_floor_eager_s

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity above which a kernel is compute-bound at peak."""
        return self.bf16_flops_per_s / self.hbm_bytes_per_s
