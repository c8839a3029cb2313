"""Timers for the microbenchmarks (imports torch: only the benchmark modules use it).

On a GPU (:class:`CudaTimer`), each repetition is bracketed by two CUDA events recorded on the
current stream; all repetitions are queued, then one ``torch.cuda.synchronize()`` waits for
them, and ``start.elapsed_time(end)`` gives the GPU time of each. Warm-up calls (JIT, cuBLAS
heuristics, allocator) run and are synchronised first. Before a flushed repetition the timer
zeroes a buffer of twice the L2 size, which evicts whatever the previous repetition left in
L2 (the approach of ``triton.testing.do_bench``), so weights come from HBM as they do in a
real pass, where the other layers' weights pass through L2 in between. The median of the
repetitions is the table value; every repetition goes to the raw CSV.

If the CPU launches kernels more slowly than the GPU runs them (tiny kernels, eager mode), the
events also capture the GPU idling between launches, and that idle time depends on the host
CPU, not on the GPU: two runs on one H200 type measured the same MoE cell at 140 and 300 µs.
So a table cell is timed with ``replay=True``: the call is captured once as a CUDA graph and
each repetition replays it (the GPU's time, as engines run decode); the layer stack is timed
both ways, and the kernel floors measure the launch path on purpose.

On a CPU (:class:`CpuTimer`) torch runs synchronously, so ``time.perf_counter`` around the call
is the time; the flush buffer is smaller (the point is only to exercise the same code).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

CPU_FLUSH_BYTES = 8 << 20
MIN_FLUSH_BYTES = 64 << 20


class CudaTimer:
    """CUDA-event timing with warm-up, optional L2 flush, and per-repetition samples."""

    kind = (
        "cuda events (table cells: CUDA-graph replays; median of repetitions after warm-up, "
        "synchronised)"
    )

    def __init__(self, device: torch.device, warmup: int, repetitions: int):
        self.device = device
        self.warmup = warmup
        self.repetitions = repetitions
        props = torch.cuda.get_device_properties(device)
        self.l2_bytes = int(getattr(props, "L2_cache_size", 50 << 20))
        flush_bytes = max(2 * self.l2_bytes, MIN_FLUSH_BYTES)
        self.eager_fallbacks = 0
        self._flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device=device)

    def flush(self) -> None:
        """Evict L2 by writing a buffer twice its size."""
        self._flush.zero_()

    def measure(
        self, fn: Callable[[], Any], *, flush: bool = True, replay: bool = False
    ) -> list[float]:
        """Seconds of each repetition of ``fn`` (GPU time between two events).

        ``replay``: capture ``fn`` as a CUDA graph after the warm-up and time its replays (a
        call that cannot be captured is timed eagerly and counted in ``eager_fallbacks``).
        """
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize(self.device)
        if replay:
            fn = self._replayable(fn)
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(self.repetitions)
        ]
        for start, end in events:
            if flush:
                self.flush()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(self.device)
        return [start.elapsed_time(end) * 1e-3 for start, end in events]

    def _replayable(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        """``fn`` captured as a CUDA graph (warmed on a side stream), or ``fn`` if it cannot be."""
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                fn()
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn()
        except Exception:  # any capture failure: time the call eagerly
            torch.cuda.synchronize(self.device)
            self.eager_fallbacks += 1
            return fn
        return graph.replay


class CpuTimer:
    """``time.perf_counter`` timing of synchronous CPU torch calls (tests, tiny shapes)."""

    kind = "time.perf_counter (CPU, median of repetitions after warm-up)"

    def __init__(self, device: torch.device, warmup: int, repetitions: int):
        self.device = device
        self.warmup = warmup
        self.repetitions = repetitions
        self.l2_bytes = 0
        self.eager_fallbacks = 0
        self._flush = torch.empty(CPU_FLUSH_BYTES // 4, dtype=torch.int32)

    def flush(self) -> None:
        """Write a buffer larger than the per-core caches."""
        self._flush.zero_()

    def measure(
        self, fn: Callable[[], Any], *, flush: bool = True, replay: bool = False
    ) -> list[float]:
        """Seconds of each repetition of ``fn`` (``replay`` has no meaning on a CPU)."""
        for _ in range(self.warmup):
            fn()
        samples = []
        for _ in range(self.repetitions):
            if flush:
                self.flush()
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return samples


def make_timer(device: torch.device, warmup: int, repetitions: int) -> CudaTimer | CpuTimer:
    """The timer for ``device``."""
    if device.type == "cuda":
        return CudaTimer(device, warmup, repetitions)
    return CpuTimer(device, warmup, repetitions)


def median(samples: list[float]) -> float:
    """Median of the samples (the table value)."""
    ordered = sorted(samples)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return 0.5 * (ordered[mid - 1] + ordered[mid])
