"""Fitting the cost model's overheads and efficiencies to a user's serving measurements.

Each measurement row (:mod:`.measurements`) is predicted by the real simulator: the user's
scenario (model, drafter, GPU, precision, parallelism) with the row's settings,

- analytic routing (deterministic expected unique experts, no sampling noise), a closed loop
  of ``batch`` requests in flight, at least :attr:`FitSettings.min_requests` requests, length
  jitter 0 and the row's prompt and output lengths. Per-token rows (``tpot_ms``, ``itl_ms``,
  ``tokens_per_s_per_user``) simulate at most :attr:`FitSettings.output_cap_tokens` output
  tokens and move the prompt up by half the rest, so the decode steps see the row's mean
  context (attention cost is linear in context);
- the ``fixed`` policy with ``k = draft_tokens``; a speculative row draws its match lengths
  from i.i.d. acceptance with the alpha solving (1 - alpha^(k+1)) / (1 - alpha) = AL, the
  expected tokens per verify of Leviathan et al. (2023, eq. 1) set to the measured acceptance
  length (:func:`alpha_for_acceptance_length`).

The fit is ``scipy.optimize.least_squares`` (trust-region reflective, inside each parameter's
bounds from :class:`~simspec.params.RooflineParams`) on the relative residuals
``log(predicted / measured)``, each parameter scaled by its starting value. With n rows and p
parameters, the residual variance is s^2 = sum(r^2) / (n - p) and the covariance of the
estimates s^2 (J^T J)^-1, J being the Jacobian at the solution (the usual Gauss-Newton
linearisation; e.g. Nocedal & Wright, *Numerical Optimization*, 2006, section 10.3); the
reported uncertainty is one standard deviation. A parameter no row moves, or two parameters the
rows cannot tell apart (a near-singular J: pass_overhead_s and weight_efficiency both add a
constant to every memory-bound decode pass), is reported as not identifiable.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simspec.config.load import with_overrides
from simspec.config.scenario import CostsConfig, Scenario
from simspec.errors import InputError
from simspec.params import RooflineParams
from simspec.policies.fixed import FixedPolicy
from simspec.sim.engine import RunLog, run_policy
from simspec.sim.setup import build_setup
from simspec.text.reference import ReferenceSet
from simspec.text.tree import fit_alpha

from .measurements import MeasurementRow

#: Highest i.i.d. alpha a row may get (alpha = 1 is a drafter that is never wrong).
ALPHA_MAX = 0.999
#: Quantities measured per output token: their runs are shortened (module docstring).
PER_TOKEN = ("tpot_ms", "itl_ms", "tokens_per_s_per_user")
#: Columns of J whose norm is below this (relative to the largest) move no row.
NO_EFFECT = 1e-9
#: Smallest singular value of the column-normalised J, relative to the largest, below which
#: the parameters are reported as not separable.
SEPARABLE = 1e-4


@dataclass(frozen=True, slots=True)
class FitSettings:
    """How rows are simulated and how hard the optimiser tries."""

    output_cap_tokens: int = 256
    min_requests: int = 4
    diff_step: float = 1e-3  # finite-difference step of the Jacobian, in units of the start
    max_evaluations: int = 200  # optimiser steps (scipy max_nfev; Jacobians not counted)


@dataclass(frozen=True, slots=True)
class RowFit:
    """One row: measured, predicted with the fitted parameters, and the relative residual."""

    row: MeasurementRow
    predicted: float
    simulated_acceptance_length: float

    @property
    def residual(self) -> float:
        """log(predicted / measured): the relative error the fit minimises."""
        return math.log(self.predicted / self.row.value)


@dataclass(frozen=True)
class FitResult:
    """What :func:`fit_measurements` found."""

    params: RooflineParams  # every cost parameter: fitted ones replaced, the others as resolved
    names: tuple[str, ...]  # the fitted parameters, in order
    start: Mapping[str, float]
    values: Mapping[str, float]
    uncertainty: Mapping[str, float | None]  # one standard deviation; None when not estimable
    bounds: Mapping[str, tuple[float, float]]
    rows: tuple[RowFit, ...]
    warnings: tuple[str, ...]
    evaluations: int  # times every row was simulated, Jacobian columns included
    message: str  # the optimiser's

    @property
    def rms_residual(self) -> float:
        """Root mean square of the rows' log residuals."""
        return float(np.sqrt(np.mean([r.residual**2 for r in self.rows])))


def alpha_for_acceptance_length(acceptance_length: float, draft_tokens: int) -> float:
    """The i.i.d. alpha with (1 - alpha^(k+1)) / (1 - alpha) = AL (Leviathan et al. 2023).

    A chain is the tree with one candidate per step, so this is
    :func:`simspec.text.tree.fit_alpha` at ``topk = 1``. Raises ValueError outside [1, k + 1].

    >>> round(alpha_for_acceptance_length(1 + 0.5 + 0.25 + 0.125, 3), 9)
    0.5
    """
    return fit_alpha(acceptance_length, draft_tokens, 1, 0, 0.0)


def fittable_params() -> dict[str, tuple[float, float]]:
    """Every float cost parameter a scenario's ``[costs]`` can set, with its bounds.

    The bounds are the ``param()`` metadata of :class:`RooflineParams` (strict ones moved
    inwards by a relative 1e-9), so any field added there is fittable without changes here.
    """
    hints = typing.get_type_hints(RooflineParams)
    settable = {f.name for f in dataclasses.fields(CostsConfig)}
    found = {}
    for f in dataclasses.fields(RooflineParams):
        if hints[f.name] is not float or f.name not in settable:
            continue
        meta = f.metadata
        low, high = -math.inf, math.inf
        if meta.get("ge") is not None:
            low = float(meta["ge"])
        if meta.get("gt") is not None:
            low = float(meta["gt"]) + 1e-9 * max(abs(float(meta["gt"])), 1e-12)
        if meta.get("le") is not None:
            high = float(meta["le"])
        if meta.get("lt") is not None:
            high = float(meta["lt"]) * (1 - 1e-9) if meta["lt"] > 0 else float(meta["lt"])
        found[f.name] = (low, high)
    return found


def default_fit_params(scenario: Scenario, rows: Sequence[MeasurementRow]) -> tuple[str, ...]:
    """The parameters decode and speculative serving numbers can identify.

    The per-pass overhead (the intercept of TPOT over batch), the routed-expert bandwidth
    efficiency for an MoE target (its slope: distinct experts grow with the batch;
    ``moe_bandwidth_efficiency`` of the default launch form, ``moe_efficiency_max`` of the
    saturation form) or the dense-weight efficiency for a dense one, and the per-draft-step
    overhead when some rows are speculative.
    """
    names = ["pass_overhead_s"]
    if not scenario.target.shape.num_moe_layers:
        names.append("weight_efficiency")
    elif getattr(scenario.roofline, "moe_kernel", "saturation") == "launch":
        names.append("moe_bandwidth_efficiency")  # the launch form's bandwidth term
    else:
        names.append("moe_efficiency_max")
    if any(row.speculative for row in rows):
        names.append("draft_step_overhead_s")
    return tuple(names)


def row_overrides(row: MeasurementRow, settings: FitSettings) -> dict[str, object]:
    """The scenario overrides that simulate ``row`` (module docstring)."""
    prompt, output = row.prompt_tokens, row.output_tokens
    if row.quantity in PER_TOKEN and output > settings.output_cap_tokens:
        prompt += (output - settings.output_cap_tokens) // 2
        output = settings.output_cap_tokens
    overrides: dict[str, object] = {
        "routing.mode": "analytic",
        "workload.loop": "closed",
        "workload.concurrency": row.batch,
        "workload.num_requests": max(row.batch, settings.min_requests),
        "workload.prompt_tokens": prompt,
        "workload.output_tokens": output,
        "workload.length_jitter": 0.0,
        "policies": [{"name": "fixed", "draft_tokens": row.draft_tokens}],
    }
    if row.acceptance_length is not None:
        alpha = alpha_for_acceptance_length(row.acceptance_length, row.draft_tokens)
        overrides["acceptance"] = {"process": "iid", "alpha": min(alpha, ALPHA_MAX)}
    return overrides


def row_scenario(
    scenario: Scenario, row: MeasurementRow, source: str, settings: FitSettings
) -> Scenario:
    """``scenario`` set up to simulate ``row``; an InputError naming the row when it cannot."""
    cap = scenario.drafter.max_draft_tokens
    if row.draft_tokens > cap:
        raise InputError(
            source,
            f"{row.where}, draft_tokens",
            f"at most the drafter's max_draft_tokens = {cap} ({scenario.drafter.name})",
            str(row.draft_tokens),
        )
    try:
        return with_overrides(scenario, row_overrides(row, settings))
    except InputError as err:
        raise InputError(
            source,
            row.where,
            f"a row the scenario {scenario.source or scenario.name} can simulate",
            f"{err.key_path}: {err.found} (expected {err.expected})",
        ) from None


def observed(log: RunLog, row: MeasurementRow) -> tuple[float, float]:
    """The row's quantity from a simulated run, and the run's acceptance length."""
    requests, steps = log.requests, log.steps
    request_steps = int(steps.column("batch_size").sum())  # the columns: no row objects
    accepted = int(steps.column("accepted").sum())
    acceptance = (accepted + request_steps) / request_steps if request_steps else 1.0
    tpot_ms = log.mean_tpot_s() * 1e3
    if row.quantity == "tpot_ms":
        return tpot_ms, acceptance
    if row.quantity == "itl_ms":
        return tpot_ms * acceptance, acceptance
    if row.quantity == "tokens_per_s_per_user":
        return 1e3 / tpot_ms, acceptance
    if row.quantity == "tokens_per_s":
        start = min(r.arrival_s for r in requests)
        makespan = max(r.finish_s for r in requests) - start
        return sum(r.output_tokens for r in requests) / makespan, acceptance
    if row.quantity == "e2e_latency_s":
        return float(np.mean([r.finish_s - r.arrival_s for r in requests])), acceptance
    raise ValueError(row.quantity)


def simulate_row(
    scenario: Scenario,
    row: MeasurementRow,
    values: Mapping[str, float],
    references: ReferenceSet | None = None,
) -> RowFit:
    """Predict ``row`` on its prepared scenario (:func:`row_scenario`) with cost ``values``;
    ``references``: the prepared scenario's reference set, reused across calls (the fit's
    evaluations change costs only, never the text: its draws are made once)."""
    changes: dict[str, Any] = {k: float(v) for k, v in values.items()}
    costs = dataclasses.replace(scenario.costs, **changes)
    priced = dataclasses.replace(scenario, costs=costs)
    setup = build_setup(priced, references=references)
    log = run_policy(setup, FixedPolicy(draft_tokens=row.draft_tokens))
    value, acceptance = observed(log, row)
    return RowFit(row, value, acceptance)


def _check_names(names: Sequence[str]) -> dict[str, tuple[float, float]]:
    valid = fittable_params()
    for name in names:
        if name not in valid:
            raise InputError("--params", name, "one of " + ", ".join(valid), repr(name))
    if len(set(names)) != len(names) or not names:
        raise InputError("--params", ",".join(names), "distinct parameter names", "a repeat")
    return {name: valid[name] for name in names}


def _diagnose(
    jac: np.ndarray, names: Sequence[str], rows: int, at_bound: Sequence[str]
) -> list[str]:
    warnings = []
    if rows <= len(names):
        warnings.append(
            f"{rows} rows for {len(names)} parameters: no uncertainty (add rows or fit fewer)"
        )
    norms = np.linalg.norm(jac, axis=0)
    moved = norms > NO_EFFECT * max(float(norms.max()), 1e-300)
    for name, ok in zip(names, moved, strict=True):
        if not ok:
            warnings.append(f"{name} is not identifiable: no row depends on it")
    if moved.sum() >= 2:
        cols = jac[:, moved] / norms[moved]
        _, sv, vt = np.linalg.svd(cols, full_matrices=False)
        if sv[-1] < SEPARABLE * sv[0]:
            weights = np.abs(vt[-1])
            involved = [n for n, w in zip(np.array(names)[moved], weights, strict=True) if w > 0.1]
            warnings.append(
                "not identifiable: the rows cannot tell " + " and ".join(involved) + " apart "
                "(fit fewer of them, or add rows that move them differently)"
            )
    for name in at_bound:
        warnings.append(f"{name} ended at its bound: its uncertainty is not meaningful")
    return warnings


def fit_measurements(
    scenario: Scenario,
    rows: Sequence[MeasurementRow],
    params: Sequence[str] | None = None,
    *,
    source: str = "<measurements>",
    settings: FitSettings | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> FitResult:
    """Fit cost parameters so the simulator reproduces ``rows`` (module docstring).

    Parameters
    ----------
    scenario : Scenario
        The served setup (model, drafter, GPU, ...); its resolved cost parameters are the
        starting point and the values of every parameter not fitted.
    rows : sequence of MeasurementRow
        The measurements (:func:`~simspec.fit.measurements.read_measurements`).
    params : sequence of str, optional
        The parameters to fit (names from :func:`fittable_params`); default
        :func:`default_fit_params`.
    source : str
        The measurements file, named by error messages.
    progress : callable, optional
        Called as ``progress(evaluations, rms_log_residual)`` after each evaluation (every
        row simulated once), Jacobian columns included.

    Returns
    -------
    FitResult
    """
    from scipy.optimize import least_squares

    settings = settings or FitSettings()
    names = tuple(params) if params else default_fit_params(scenario, rows)
    bounds = _check_names(names)
    prepared = [row_scenario(scenario, row, source, settings) for row in rows]
    resolved = scenario.roofline
    start = {name: float(getattr(resolved, name)) for name in names}
    lower = np.array([bounds[n][0] for n in names])
    upper = np.array([bounds[n][1] for n in names])
    scale = np.array(
        [
            abs(start[n]) or (upper_n / 100 if math.isfinite(upper_n) else 1.0)
            for n, upper_n in zip(names, upper, strict=True)
        ]
    )
    width = np.where(np.isfinite(upper - lower), upper - lower, np.abs(lower) + 1.0)
    x0 = np.clip(np.array([start[n] for n in names]), lower + 1e-6 * width, upper - 1e-6 * width)
    measured = np.array([row.value for row in rows])

    texts = [build_setup(s).references for s in prepared]  # drawn once, read by every evaluation

    def predictions(x: np.ndarray) -> list[RowFit]:
        values = dict(zip(names, x * scale, strict=True))
        return [
            simulate_row(s, row, values, text)
            for s, row, text in zip(prepared, rows, texts, strict=True)
        ]

    evaluations = 0
    last: dict[str, np.ndarray] = {}

    def residuals(x: np.ndarray) -> np.ndarray:
        nonlocal evaluations
        predicted = np.array([p.predicted for p in predictions(x)])
        found = np.log(np.maximum(predicted, 1e-300) / measured)
        evaluations += 1
        if progress is not None:
            progress(evaluations, float(np.sqrt(np.mean(found**2))))
        last["x"], last["f"] = x.copy(), found
        return found

    def jacobian(x: np.ndarray) -> np.ndarray:
        # Forward differences with a step of diff_step scaled units (at least): a step relative
        # to x itself would vanish for a parameter that sits at 0 (a preset's zero draft-step
        # overhead), leaving a zero column that reads as "no row depends on it".
        same = "x" in last and np.array_equal(last["x"], x)
        f0 = last["f"] if same else residuals(x)
        columns = []
        for j in range(len(x)):
            h = settings.diff_step * max(1.0, abs(float(x[j])))
            if x[j] + h > upper[j] / scale[j]:
                h = -h
            moved = x.copy()
            moved[j] += h
            columns.append((residuals(moved) - f0) / h)
        last["x"], last["f"] = x.copy(), f0
        return np.column_stack(columns)

    solution = least_squares(
        residuals,
        x0 / scale,
        jac=jacobian,
        bounds=(lower / scale, upper / scale),
        method="trf",
        max_nfev=settings.max_evaluations,
    )
    x = np.where(solution.active_mask < 0, lower / scale, solution.x)
    x = np.where(solution.active_mask > 0, upper / scale, x)
    values = {n: float(v) for n, v in zip(names, x * scale, strict=True)}
    fitted: dict[str, Any] = dict(values)
    jac = np.asarray(solution.jac)
    at_bound = [n for n, active in zip(names, solution.active_mask, strict=True) if active]
    warnings = _diagnose(jac, names, len(rows), at_bound)
    uncertainty: dict[str, float | None] = dict.fromkeys(names)
    dof = len(rows) - len(names)
    if dof > 0 and not any(w.startswith("not identifiable") or "no row" in w for w in warnings):
        variance = float(np.sum(solution.fun**2)) / dof
        covariance = variance * np.linalg.pinv(jac.T @ jac)
        sigma = np.sqrt(np.maximum(np.diag(covariance), 0.0)) * scale
        uncertainty = {n: float(s) for n, s in zip(names, sigma, strict=True)}
    return FitResult(
        params=dataclasses.replace(resolved, **fitted),
        names=names,
        start=start,
        values=values,
        uncertainty=uncertainty,
        bounds=bounds,
        rows=tuple(predictions(x)),
        warnings=tuple(warnings),
        evaluations=evaluations,
        message=str(solution.message),
    )
