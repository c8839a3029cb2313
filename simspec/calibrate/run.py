"""Run every torch microbenchmark of a calibration plan on one device (imports torch).

The order is ceilings, MoE layer (:mod:`.moe`), decode attention (:mod:`.attention`), dense
GEMMs (:mod:`.gemm`), layer stack (:mod:`.stack`), kernel floors and draft step (:mod:`.floors`);
each section is timed, and on a GPU the
device is synchronised and the allocator's cache emptied between sections so one benchmark's
buffers do not shrink the next one's memory budget. Only
:func:`simspec.calibrate.measure_profile` imports this module (lazily).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from simspec.physics.drafters import DrafterSpec
from simspec.physics.models import ModelSpec

from .attention import bench_attention, lower_right_bias_works
from .common import Progress, RandomTensors, RawRows, device_info, first_line, free_bytes
from .floors import bench_floors
from .gemm import bench_ceilings, bench_gemm
from .moe import bench_moe, probe_grouped_mm
from .plan import CalibrationPlan, attention_layer
from .stack import bench_stack
from .timing import make_timer

T = TypeVar("T")


@dataclass
class BenchResult:
    """Everything :func:`run_all` measured."""

    tables: dict[str, Any]
    ceilings: dict[str, float]
    raw: dict[str, RawRows]
    device_name: str
    versions: dict[str, str]
    moe_kernel: str
    timer: str
    notes: str
    device_properties: dict[str, Any]
    durations_s: dict[str, float] = field(default_factory=dict)


def _no_progress(_: str) -> None:
    pass


def run_all(
    spec: ModelSpec,
    plan: CalibrationPlan,
    *,
    device: str,
    drafter: DrafterSpec | None = None,
    progress: Progress = _no_progress,
) -> BenchResult:
    """Run every benchmark of ``plan`` on ``device`` ("cuda" or "cpu").

    ``drafter`` (an EAGLE-3 head of the model, already at the benchmarked shapes) adds the draft
    step to the kernel-floor section.

    On a CPU torch runs single-threaded for the duration (restored afterwards): the CPU run
    only exercises the pipeline, and intra-op thread pools on small shared machines turn
    microsecond kernels into milliseconds of spinning.
    """
    if device == "cuda":
        dev = torch.device("cuda", torch.cuda.current_device())
        return _run_all(spec, plan, dev, drafter, progress)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run_all(spec, plan, torch.device(device), drafter, progress)
    finally:
        torch.set_num_threads(threads)


def _run_all(
    spec: ModelSpec,
    plan: CalibrationPlan,
    dev: torch.device,
    drafter: DrafterSpec | None,
    progress: Progress,
) -> BenchResult:
    rand = RandomTensors(dev)
    timer = make_timer(dev, plan.warmup, plan.repetitions)
    grouped, kernel_note = probe_grouped_mm(dev)
    bias = attention_layer(spec) is not None and lower_right_bias_works(spec, dev)
    notes: list[str] = [
        "causal mask: torch lower-right bias" if bias else "causal mask: explicit boolean"
    ]
    name, props = device_info(dev)
    durations: dict[str, float] = {}
    tables: dict[str, Any] = {}
    raw: dict[str, RawRows] = {}

    def section(label: str, fn: Callable[[], T]) -> T:
        start = time.perf_counter()
        result = fn()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            torch.cuda.empty_cache()
        durations[label] = time.perf_counter() - start
        return result

    ceilings, raw["ceilings"] = section("ceilings", lambda: bench_ceilings(plan, timer, rand))
    progress("ceilings done")
    if spec.shape.num_moe_layers:
        tables["moe"], raw["moe"] = section(
            "moe", lambda: bench_moe(spec, plan, timer, rand, grouped, progress)
        )
    attention, raw["attention"], note = section(
        "attention",
        lambda: bench_attention(spec, plan, timer, rand, 0.4 * free_bytes(dev), bias, progress),
    )
    if attention is not None:
        tables["attention"] = attention
    notes.append(note)
    tables["gemm"], raw["gemm"] = section(
        "gemm", lambda: bench_gemm(spec, plan, timer, rand, progress)
    )
    tables["stack"], raw["stack"], note = section(
        "stack",
        lambda: bench_stack(
            spec, plan, timer, rand, grouped, 0.3 * free_bytes(dev), bias, progress
        ),
    )
    notes.append(note)
    try:
        tables["floors"], raw["floors"], note = section(
            "floors", lambda: bench_floors(spec, drafter, timer, rand, progress)
        )
        notes.append(note)
    except Exception as err:  # the floors are an addition: a failure keeps the other tables
        notes.append(f"kernel floors failed ({type(err).__name__}: {first_line(err)})")
    if timer.eager_fallbacks:
        notes.append(f"{timer.eager_fallbacks} table cells timed eagerly (graph capture failed)")
    versions = {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "",
    }
    return BenchResult(
        tables=tables,
        ceilings=ceilings,
        raw=raw,
        device_name=name,
        versions=versions,
        moe_kernel=kernel_note,
        timer=timer.kind,
        notes="; ".join(n for n in notes if n),
        device_properties=props,
        durations_s=durations,
    )
