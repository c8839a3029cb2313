"""Fits written as calibration profiles: measured tables, or serving measurements.

:func:`assemble_profile` turns the tables ``simspec calibrate`` measured (or synthetic ones) into
a profile: the efficiencies and MoE constants fitted to them (:mod:`.tables`), the fixed overhead
from the layer-stack points, and the calibrated model's error on every stack point.

:func:`fitted_profile` writes a :mod:`.serving` fit (``simspec fit``) as a profile with
``metadata.kind = "fitted"``: its ``fitted`` table is the scenario's resolved cost parameters
with the fitted ones replaced, so ``[costs] profile = "that.json"`` reproduces the measurements;
``fit_details`` records the measurements' SHA-256, the scenario, each parameter's start, value,
bounds and uncertainty, and every row's prediction and residual. Tables, peaks and ceilings of a
profile the scenario already used are carried over.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from simspec.config.scenario import Scenario
from simspec.costs.calibrated import calibrated_pass_cost
from simspec.params import RooflineParams
from simspec.physics.hardware import GpuSpec
from simspec.physics.launches import table_cell_kernels
from simspec.physics.models import ModelSpec
from simspec.profile import CalibrationProfile, profile_document, profile_from_dict
from simspec.schema import help_of, to_dict

from .measurements import Measurements
from .serving import FitResult, FitSettings, RowFit
from .tables import fit_efficiencies, fit_overhead

__all__ = ["assemble_profile", "fitted_profile"]

SOURCES = (
    "simspec/fit/serving.py: each row simulated with the scenario; "
    "scipy.optimize.least_squares (trf) on log(predicted / measured)",
    "Leviathan, Kalman & Matias 2023, Fast Inference from Transformers via Speculative "
    "Decoding (i.i.d. acceptance: expected tokens per verify)",
)


def _peak_gpu(name: str, bytes_per_s: float, flops_per_s: float) -> GpuSpec:
    """The measured peaks on the catalog GPU ``name`` (its kernel floors and links kept), or
    on a bare device outside the catalog (no floors: a CPU test run)."""
    from simspec import catalog

    try:
        known = catalog.get_gpu(name) if name else None
    except KeyError:
        known = None
    if known is not None:
        return dataclasses.replace(known, hbm_bytes_per_s=bytes_per_s, bf16_flops_per_s=flops_per_s)
    return GpuSpec(
        name=name or "profile-peaks",
        memory_bytes=1.0,
        hbm_bytes_per_s=bytes_per_s,
        bf16_flops_per_s=flops_per_s,
    )


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

    Efficiencies come from :func:`~simspec.fit.tables.fit_efficiencies`, the fixed overhead
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
    gpu = _peak_gpu(str(metadata.get("gpu", "")), peak_bw, peak_flops)
    floor = gpu.kernel_floor_s(True)  # table cells are timed as CUDA-graph replays
    fit = fit_efficiencies(
        tables,
        peak_bytes_per_s=peak_bw,
        peak_flops_per_s=peak_flops,
        assumed=assumed,
        matmul_flops_per_s=ceilings.get("matmul_flops_per_s"),
        cell_floors_s={
            name: count * floor for name, count in table_cell_kernels(spec.attention.kind).items()
        },
    )
    # The table measures the MoE layer's fixed time at this GPU's clock; the profile states
    # it at the reference clock, as the cost model prices it (GpuSpec.latency_scale).
    fitted_params = dataclasses.replace(
        fit.params, moe_launch_s=fit.params.moe_launch_s / gpu.latency_scale
    )
    provenance = {**fit.provenance}
    details: dict[str, Any] = dict(fit.details)
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

    draft = profile_document(
        metadata=metadata,
        peak=peak,
        ceilings=ceilings,
        fitted=to_dict(fitted_params),
        provenance=provenance,
        fit_details=details,
        tables=tables,
    )
    profile = profile_from_dict(draft, "<profile being fitted>")
    stack = list(tables.get("stack", []))
    overhead, overhead_details = fit_overhead(
        stack, lambda row: predict(row, profile, fitted_params, 0.0)
    )
    details.update(overhead_details)
    params = fitted_params
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
    data = profile_document(
        metadata=metadata,
        peak=peak,
        ceilings=ceilings,
        fitted=to_dict(params),
        provenance=provenance,
        fit_details=details,
        validation=validation,
        tables=tables,
    )
    profile_from_dict(data, "<assembled profile>")  # a profile we write must load
    return data


def _row_record(fit: RowFit) -> dict[str, Any]:
    row = fit.row
    return {
        "row": row.where,
        "batch": row.batch,
        "quantity": row.quantity,
        "prompt_tokens": row.prompt_tokens,
        "output_tokens": row.output_tokens,
        "draft_tokens": row.draft_tokens,
        "acceptance_length": row.acceptance_length,
        "simulated_acceptance_length": fit.simulated_acceptance_length,
        "measured": row.value,
        "predicted": fit.predicted,
        "log_residual": fit.residual,
    }


def _provenance(
    scenario: Scenario, result: FitResult, measurements: Measurements
) -> dict[str, str]:
    helps = help_of(type(result.params))
    explicit = scenario.costs.explicit()
    base = scenario.profile
    inherited: Mapping[str, Any] = base.data.get("provenance", {}) if base is not None else {}
    provenance = {}
    for name in helps:
        if name in result.values:
            sigma = result.uncertainty.get(name)
            spread = f" +- {sigma:.3g}" if sigma is not None else " (uncertainty not estimable)"
            provenance[name] = (
                f"fitted to {len(measurements.rows)} serving measurements "
                f"({measurements.source}): {result.values[name]:.6g}{spread}"
            )
        elif name in explicit:
            provenance[name] = f"set in the scenario's [costs] ({scenario.source or scenario.name})"
        elif base is not None and name in inherited:
            provenance[name] = f"from {base.source}: {inherited[name]}"
        else:
            provenance[name] = f"assumed: {helps[name]}"
    return provenance


def _peak(gpu: GpuSpec) -> dict[str, Any]:
    return {
        "hbm_bytes_per_s": gpu.hbm_bytes_per_s,
        "bf16_flops_per_s": gpu.bf16_flops_per_s,
        "source": f"spec sheet (catalog gpu {gpu.name}: {gpu.source})",
    }


def fitted_profile(
    scenario: Scenario,
    measurements: Measurements,
    result: FitResult,
    *,
    date: str = "",
    command: str = "",
    git_sha: str = "",
    settings: FitSettings | None = None,
) -> dict[str, Any]:
    """The profile of a fit, as JSON-ready data that passes the profile parser (module doc)."""
    settings = settings or FitSettings()
    base = scenario.profile
    base_data: Mapping[str, Any] = base.data if base is not None else {}
    metadata = {
        "kind": "fitted",
        "device": scenario.gpu.display_name or scenario.gpu.name,
        "gpu": base.gpu if base is not None else scenario.hardware.gpu,
        "model": scenario.model.target,
        "shapes": base.shapes if base is not None else "",
        "dtype": scenario.model.precision,
        "torch_version": "",
        "cuda_version": "",
        "date": date,
        "command": command,
        "git_sha": git_sha,
        "notes": (
            f"Cost parameters {', '.join(result.names)} fitted to the serving measurements "
            f"{measurements.source} (sha256 {measurements.sha256[:12]}...) by simulating each "
            f"row with the scenario {scenario.source or scenario.name}; every other parameter "
            "is the scenario's resolved value."
        ),
        "sources": [*SOURCES, *base_data.get("metadata", {}).get("sources", [])],
        "measurements": {
            "file": measurements.source,
            "sha256": measurements.sha256,
            "rows": len(measurements.rows),
        },
        "scenario": {
            "source": scenario.source,
            "name": scenario.name,
            "digest": scenario.digest(),
            "engine_preset": scenario.engine.preset,
            "profile": base.source if base is not None else "",
        },
    }
    details = {
        "method": "scipy.optimize.least_squares (trf, bounded) on log(predicted / measured)",
        "params": {
            name: {
                "start": result.start[name],
                "value": result.values[name],
                "uncertainty": result.uncertainty[name],
                "lower": result.bounds[name][0],
                "upper": result.bounds[name][1],
            }
            for name in result.names
        },
        "rms_log_residual": result.rms_residual,
        "evaluations": result.evaluations,
        "optimizer_message": result.message,
        "warnings": list(result.warnings),
        "settings": to_dict(settings),
        "rows": [_row_record(fit) for fit in result.rows],
    }
    data = profile_document(
        metadata=metadata,
        peak=dict(base_data["peak"]) if base is not None else _peak(scenario.gpu),
        ceilings=base_data.get("ceilings", {}),
        fitted=to_dict(result.params),
        provenance=_provenance(scenario, result, measurements),
        fit_details=_finite(details),
        tables=base_data.get("tables", {}),
    )
    profile_from_dict(data, "<fitted profile>")  # a profile we write must load
    return data


def _finite(value: Any) -> Any:
    """``value`` with infinite bounds written as None (JSON has no infinity)."""
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
