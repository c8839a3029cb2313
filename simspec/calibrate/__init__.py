"""Calibration: torch microbenchmarks on a GPU -> a profile JSON -> the calibrated cost model.

Users calibrate once on a GPU (minutes) and then simulate on CPUs. ``simspec calibrate`` times,
at the model's real shapes and bf16 weights, the MoE layer over tokens x unique experts
(:mod:`.moe`), decode attention over batch x keys x query tokens (:mod:`.attention`), the dense
GEMMs and the device ceilings (:mod:`.gemm`) and the whole layer stack (:mod:`.stack`), with
:mod:`.timing` (CUDA events, medians, L2 flushes; ``time.perf_counter`` at tiny shapes on a CPU,
to test the pipeline). :func:`simspec.fit.assemble_profile` fits the roofline to the tables and
writes one profile (:mod:`simspec.profile`). Only :func:`measure_profile` imports torch (lazily,
through :mod:`.run`); this module, :mod:`.plan` and :mod:`.analytic` are numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from simspec.fit.profiles import assemble_profile
from simspec.params import RooflineParams
from simspec.physics.drafters import DrafterSpec
from simspec.physics.hardware import GpuSpec
from simspec.physics.models import ModelSpec
from simspec.profile import profile_document, profile_from_dict
from simspec.schema import to_dict

from .analytic import ASSUMPTION_SOURCES, assumed_provenance, synthetic_tables
from .plan import CalibrationPlan, bench_model, make_plan

__all__ = ["analytic_profile", "measure_profile"]


def analytic_profile(
    gpu: GpuSpec,
    *,
    model: ModelSpec | None = None,
    params: RooflineParams | None = None,
    date: str = "",
    command: str = "",
    git_sha: str = "",
    quick: bool = False,
) -> dict[str, Any]:
    """A profile of spec-sheet peaks and assumed efficiencies (module :mod:`.analytic`).

    With ``model``, the tables are synthetic (the roofline evaluated on the calibration grid of
    that model); the efficiencies stay exactly ``params`` (they are not re-fitted).
    """
    params = params or RooflineParams()
    tables: dict[str, Any] = {}
    if model is not None:
        bench = bench_model(model, "full")
        tables = synthetic_tables(bench, gpu, params, make_plan(bench, quick=quick, shapes="full"))
    metadata = {
        "kind": "analytic",
        "device": gpu.display_name or gpu.name,
        "gpu": gpu.name,
        "model": model.name if model is not None else "",
        "shapes": "full" if model is not None else "",
        "dtype": "bfloat16",
        "torch_version": "",
        "cuda_version": "",
        "date": date,
        "command": command,
        "git_sha": git_sha,
        "quick": quick,
        "notes": (
            "Nothing here was measured. Peaks are the spec sheet of the catalog GPU; every "
            "efficiency and overhead is the simulator's documented assumption (RooflineParams "
            "defaults)"
            + (
                "; the tables are the roofline evaluated on the calibration grid (synthetic)."
                if model is not None
                else "."
            )
        ),
        "sources": [gpu.source, *ASSUMPTION_SOURCES],
    }
    peak = {
        "hbm_bytes_per_s": gpu.hbm_bytes_per_s,
        "bf16_flops_per_s": gpu.bf16_flops_per_s,
        "source": f"spec sheet (catalog gpu {gpu.name}: {gpu.source})",
    }
    data = profile_document(
        metadata=metadata,
        peak=peak,
        fitted=to_dict(params),
        provenance=assumed_provenance(),
        tables=tables,
    )
    profile_from_dict(data, "<analytic profile>")
    return data


def measure_profile(
    *,
    device: str,
    model: ModelSpec,
    quick: bool,
    shapes: str,
    gpu: GpuSpec | None,
    metadata: Mapping[str, Any],
    assumed: RooflineParams | None = None,
    drafter: DrafterSpec | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Run the torch microbenchmarks on ``device`` and assemble a measured profile.

    Parameters
    ----------
    device : {"cuda", "cpu"}
    model : ModelSpec
        The catalog model whose shapes are benchmarked (scaled down when ``shapes="tiny"``).
    gpu : GpuSpec or None
        The catalog GPU the device is (its spec sheet is the peak); None: the measured
        ceilings are the peak.
    metadata : mapping
        Date, command and git sha (the caller's); device and versions are added here.
    assumed : RooflineParams, optional
        What the tables cannot identify, and the MoE kernel form (``moe_kernel``) to fit for
        (default: ``RooflineParams()``).
    drafter : DrafterSpec, optional
        The model's EAGLE-3 head: its draft step is timed with the kernel floors (scaled down
        with the model when ``shapes="tiny"``).

    Returns
    -------
    profile : dict
        The profile data (:func:`assemble_profile`).
    raw : dict
        Every repetition of every benchmark, one list of rows per benchmark (for CSV files).
    """
    from simspec.calibrate.floors import tiny_drafter  # imports torch
    from simspec.calibrate.run import run_all

    spec = bench_model(model, shapes)
    plan: CalibrationPlan = make_plan(spec, quick=quick, shapes=shapes)
    if drafter is not None and shapes == "tiny":
        drafter = tiny_drafter(drafter)
    result = run_all(spec, plan, device=device, drafter=drafter, progress=progress)
    ceilings = result.ceilings
    if gpu is not None:
        peak = {
            "hbm_bytes_per_s": gpu.hbm_bytes_per_s,
            "bf16_flops_per_s": gpu.bf16_flops_per_s,
            "source": f"spec sheet (catalog gpu {gpu.name}: {gpu.source})",
        }
    else:
        peak = {
            "hbm_bytes_per_s": ceilings["copy_bytes_per_s"],
            "bf16_flops_per_s": ceilings["matmul_flops_per_s"],
            "source": "measured ceilings: copy bandwidth and big bf16 matmul (device not in "
            "the catalog)",
        }
    meta = {
        "kind": "measured",
        "device": result.device_name,
        "gpu": gpu.name if gpu is not None else "",
        "model": model.name,
        "shapes": shapes,
        "dtype": "bfloat16",
        **result.versions,
        **metadata,
        "quick": quick,
        "moe_kernel": result.moe_kernel,
        "timer": result.timer,
        "notes": result.notes,
        "device_properties": result.device_properties,
        "durations_s": result.durations_s,
        "bench_model": to_dict(spec),
        "sources": [
            "simspec/calibrate/{moe,attention,gemm,stack,floors}.py (the benchmarks), "
            "simspec/fit/tables.py (the fit)",
        ],
    }
    data = assemble_profile(
        spec, result.tables, metadata=meta, peak=peak, ceilings=ceilings, assumed=assumed
    )
    return data, result.raw
