"""Calibration: torch microbenchmarks on a GPU -> a profile JSON -> the calibrated cost model.

Users calibrate once on a GPU (minutes) and then simulate on CPUs. ``simspec calibrate`` runs,
with the model's real shapes and bf16 weights (one module per kernel, run by
:mod:`simspec.calibrate.run`):

- **MoE layer** (:mod:`.moe`: router GEMM, softmax + top-k, gather, SwiGLU experts, weighted
  combine) over a grid of tokens in the pass x unique experts touched. The routing is forced,
  so the unique count is exact; experts run as one grouped kernel that reads each distinct
  expert once (``torch._grouped_mm`` where the build has it, else one GEMM pair per expert;
  the profile records which), timed with and without an L2 flush between repetitions, so L2
  reuse of co-routed experts is measured rather than assumed.
- **Decode attention** (:mod:`.attention`: ``scaled_dot_product_attention``) over batch x keys
  per request x query tokens per request (1 .. max draft + 1), GQA shapes; MLA models use
  their compressed KV (one latent "head" of kv_lora + rope dimensions).
- **Dense GEMMs** (:mod:`.gemm`): attention projections, shared expert, dense FFN, LM head,
  over tokens.
- **Layer stack** (:mod:`.stack`) of the model's depth at one token (eager, and CUDA-graph
  replay on a GPU) for the fixed per-pass overhead, plus a few (batch, tokens per request)
  points kept out of the fit to report the calibrated model's per-pass error on them.
- **Ceilings** (:mod:`.gemm`): device-to-device copy bandwidth and a large bf16 matmul.

Timing (:mod:`simspec.calibrate.timing`): CUDA events around each repetition after warm-up,
synchronised, median of the repetitions, an L2 flush (writing a buffer twice the L2 size)
before each flushed repetition; on a CPU the same code with ``time.perf_counter`` at tiny
shapes, to test the pipeline. :mod:`simspec.calibrate.fit` fits the roofline's efficiencies to
the tables; :func:`assemble_profile` writes everything into one profile (:mod:`simspec.profile`).

Without a GPU at hand, :mod:`.measured` (``simspec fit``) fits the overheads and efficiencies
to serving benchmark numbers instead (vLLM / SGLang TPOT at a few batch sizes, with and without
speculation), simulating each measured point.

Only :func:`measure_profile` imports torch (lazily, through :mod:`.run`); this module and
:mod:`.plan`, :mod:`.fit` and :mod:`.analytic` are numpy and scipy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from simspec.costs.calibrated import calibrated_pass_cost
from simspec.params import RooflineParams
from simspec.physics.hardware import GpuSpec
from simspec.physics.models import ModelSpec
from simspec.profile import SCHEMA, SCHEMA_VERSION, CalibrationProfile, profile_from_dict
from simspec.schema import to_dict

from .analytic import ASSUMPTION_SOURCES, assumed_provenance, synthetic_tables
from .fit import fit_efficiencies, fit_overhead
from .plan import CalibrationPlan, bench_model, make_plan

__all__ = [
    "analytic_profile",
    "assemble_profile",
    "measure_profile",
]


def _peak_gpu(name: str, bytes_per_s: float, flops_per_s: float) -> GpuSpec:
    return GpuSpec(
        name=name or "profile-peaks",
        memory_bytes=1.0,
        hbm_bytes_per_s=bytes_per_s,
        bf16_flops_per_s=flops_per_s,
    )


def _document(
    metadata: Mapping[str, Any],
    peak: Mapping[str, Any],
    ceilings: Mapping[str, Any],
    params: RooflineParams,
    provenance: Mapping[str, str],
    details: Mapping[str, Any],
    validation: list[dict[str, Any]],
    tables: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "metadata": dict(metadata),
        "peak": dict(peak),
        "ceilings": dict(ceilings),
        "fitted": to_dict(params),
        "provenance": dict(provenance),
        "fit_details": dict(details),
        "validation": validation,
        "tables": dict(tables),
    }


def assemble_profile(
    spec: ModelSpec,
    tables: Mapping[str, Any],
    *,
    metadata: Mapping[str, Any],
    peak: Mapping[str, Any],
    ceilings: Mapping[str, Any] | None = None,
    assumed: RooflineParams | None = None,
) -> dict[str, Any]:
    """Fit ``tables`` (measured on the benchmarked model ``spec``) into a complete profile.

    Efficiencies come from :func:`~simspec.calibrate.fit.fit_efficiencies`, the fixed overhead
    from the layer-stack "fit" points, and every stack point gets the calibrated model's
    prediction and relative error (``validation``); the "validation" points were not used by
    the fit, so their errors are out-of-sample.

    Returns
    -------
    dict
        The profile as JSON-ready data; it passes :func:`simspec.profile.profile_from_dict`.
    """
    ceilings = dict(ceilings or {})
    assumed = assumed or RooflineParams()
    peak_bw, peak_flops = float(peak["hbm_bytes_per_s"]), float(peak["bf16_flops_per_s"])
    fit = fit_efficiencies(
        tables,
        peak_bytes_per_s=peak_bw,
        peak_flops_per_s=peak_flops,
        assumed=assumed,
        matmul_flops_per_s=ceilings.get("matmul_flops_per_s"),
    )
    provenance = {**fit.provenance}
    details: dict[str, Any] = dict(fit.details)
    gpu = _peak_gpu(str(metadata.get("gpu", "")), peak_bw, peak_flops)
    shape = spec.shape

    def predict(
        row: Mapping[str, Any],
        profile: CalibrationProfile,
        params: RooflineParams,
        overhead: float,
    ) -> float:
        cost = calibrated_pass_cost(
            shape,
            gpu,
            params,
            profile,
            np.full(row["batch"], row["tokens_per_request"]),
            np.full(row["batch"], row["context_tokens"]),
            np.full(shape.num_moe_layers, row["unique_experts"]),
            overhead_s=overhead,
        )
        return cost.total_s

    draft = _document(metadata, peak, ceilings, fit.params, provenance, details, [], tables)
    profile = profile_from_dict(draft, "<profile being fitted>")
    stack = list(tables.get("stack", []))
    overhead, overhead_details = fit_overhead(
        stack, lambda row: predict(row, profile, fit.params, 0.0)
    )
    details.update(overhead_details)
    params = fit.params
    if overhead is not None:
        params = dataclasses.replace(params, pass_overhead_s=overhead)
        mode = "graph replay" if "overhead_graph_s" in overhead_details else "eager"
        provenance["pass_overhead_s"] = (
            f"fitted: layer stack at one token ({mode}) minus the tables' prediction"
        )
    validation = []
    for row in stack:
        predicted = predict(row, profile, params, params.pass_overhead_s)
        validation.append(
            {
                "batch": row["batch"],
                "tokens_per_request": row["tokens_per_request"],
                "context_tokens": row["context_tokens"],
                "mode": row["mode"],
                "use": row["use"],
                "measured_s": row["time_s"],
                "predicted_s": predicted,
                "relative_error": predicted / row["time_s"] - 1.0,
            }
        )
    data = _document(metadata, peak, ceilings, params, provenance, details, validation, tables)
    profile_from_dict(data, "<assembled profile>")  # a profile we write must load
    return data


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
    data = _document(metadata, peak, {}, params, assumed_provenance(), {}, [], tables)
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

    Returns
    -------
    profile : dict
        The profile data (:func:`assemble_profile`).
    raw : dict
        Every repetition of every benchmark, one list of rows per benchmark (for CSV files).
    """
    from simspec.calibrate.run import run_all  # imports torch

    spec = bench_model(model, shapes)
    plan: CalibrationPlan = make_plan(spec, quick=quick, shapes=shapes)
    result = run_all(spec, plan, device=device, progress=progress)
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
            "simspec/calibrate/{moe,attention,gemm,stack}.py (the benchmarks), "
            "simspec/calibrate/fit.py (the fit)",
        ],
    }
    data = assemble_profile(
        spec, result.tables, metadata=meta, peak=peak, ceilings=ceilings, assumed=assumed
    )
    return data, result.raw
