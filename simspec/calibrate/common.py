"""What every torch microbenchmark shares: the dtype, seeded random tensors, device facts.

The benchmark modules (:mod:`.moe`, :mod:`.attention`, :mod:`.gemm`, :mod:`.stack`, run by
:mod:`.run`) import torch; only :func:`simspec.calibrate.measure_profile` imports them, lazily,
so ``import simspec`` never loads torch. Weights and inputs are bf16 random tensors of the
benchmarked model's exact shapes (:func:`simspec.calibrate.plan.bench_model`); their values only
have to keep the arithmetic finite, since the kernels' time does not depend on them.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from typing import Any

import torch

from .timing import CpuTimer, CudaTimer

DTYPE = torch.bfloat16
#: The timer of the device (:func:`simspec.calibrate.timing.make_timer`).
Timer = CudaTimer | CpuTimer
#: Receives one line of progress per finished part of a benchmark.
Progress = Callable[[str], None]
#: A benchmark's raw rows: every repetition of every cell (written as CSV with ``--raw``).
RawRows = list[dict[str, Any]]


class RandomTensors:
    """Seeded bf16 tensors on one device (values only matter for not overflowing)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.generator = torch.Generator(device=device).manual_seed(0)

    def __call__(
        self, *shape: int, scale: float = 0.02, dtype: torch.dtype = DTYPE
    ) -> torch.Tensor:
        t = torch.randn(shape, generator=self.generator, device=self.device, dtype=dtype)
        return t.mul_(scale)


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (for notes in the profile's metadata)."""
    return (str(err).splitlines() or [type(err).__name__])[0][:160]


def device_info(device: torch.device) -> tuple[str, dict[str, Any]]:
    """The device's name and the properties the profile records."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return props.name, {
            "multiprocessors": props.multi_processor_count,
            "memory_bytes": float(props.total_memory),
            "l2_bytes": float(getattr(props, "L2_cache_size", 0)),
            "compute_capability": f"{props.major}.{props.minor}",
        }
    name = platform.processor() or platform.machine() or "cpu"
    return f"cpu ({name})", {"threads": torch.get_num_threads()}


def free_bytes(device: torch.device) -> float:
    """Free device memory (the budget the large grids shrink to fit)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free)
    return 1.0e9  # tiny shapes on a CPU: far below any budget
