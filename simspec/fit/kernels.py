"""The MoE kernel's time fitted to published fused_moe tables: the forms compared, a report.

``simspec fidelity --fit-kernels`` runs :func:`kernel_fit` on the ``kernel`` rows of
``validation/cases.toml`` (one MoE layer, both grouped GEMMs, at M tokens routed uniformly at
random: U = N·(1 − (1 − k_e/N)^M) distinct experts,
:func:`simspec.physics.experts.independent_union`). A row of a TP run is one GPU's shard: expert
bytes and parameters / tp, one GPU's bandwidth, FLOP/s and L2. A row's expert bytes are the
case's precision through :func:`simspec.physics.precision.with_precision`, the function a
decode run prices its experts with, and its kernel is named by
:func:`simspec.costs.moe_kernel.kernel_identity` (GPU generation x expert format): the report
shows each identity's rows, how the constants fitted without an identity predict it, and which
identities the decode and speculative rows run that no kernel row measures. Each form of
:mod:`simspec.costs.moe_kernel` is fitted with ``scipy.optimize.least_squares`` on the relative
errors of the rows with M ≤ 1024 of the *fit series* (tuned or engine-default kernels), one set
of constants for every GPU. The compute efficiency stays the default; the rows above 256 tokens,
whose FLOPs take as long as their bytes, fit how much of the shorter phase the longer fails to
hide (the launch form's ``moe_exposed_fraction``). Held out: each fit series in turn is left
out, the form refitted on the others and the left-out series predicted. Check series (superseded
or untuned configs, assumed shapes, single points) and test series (the kernel rows of role
"test": searched rows) are predicted, never fitted; the test rows also count in their kernel
identity's row, so an identity that only a test row measures is reported as measured, with 0
rows fitted on it. The result is ``kernel_fit.json`` and ``KERNEL_FIT.md`` (deterministic: no
dates, no timings); the winning form's constants are the defaults of ``[costs]``
(:class:`~simspec.params.RooflineParams`).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simspec import catalog
from simspec.costs.moe_kernel import kernel_identity, moe_layer_s
from simspec.params import L2_REUSE_MODES, MOE_KERNEL_FIT_MAX_TOKENS, RooflineParams
from simspec.physics.experts import independent_union
from simspec.validation.cases import Case, CaseFile, for_fitting, target_spec

#: Rows with M up to this are fitted and scored (decode, verify and prefill-sized layers).
M_MAX = MOE_KERNEL_FIT_MAX_TOKENS
#: Above this many tokens a fit series' rows crowd more rows onto an expert than one 64-row
#: tile, so only they re-read an expert (the L2 study's signed errors).
REREAD_M = 256
#: Series fitted: tuned configs, or the default config an engine runs when it has no tuned file
#: (the shipped constants' series, :data:`simspec.params.MOE_KERNEL_FIT_SERIES`, are these).
FIT_SERIES = {
    "mixtral-8x7b-h100-tp2-bf16-tuned": "tuned config (vLLM)",
    "qwen3-30b-h100-fp8-pr-defaults": "vLLM's default configs after PR #24700",
    "qwen3-30b-a100-pcie-bf16": "vLLM default config (what vLLM ran on this GPU)",
    "qwen3-235b-h200-tp8-fp8-untuned": "SGLang default config (no tuned file)",
    "gpt-oss-120b-h100-triton-after": "tuned Triton config, bf16 experts (cases.toml: why)",
}
#: Series predicted with the constants fitted on all fit series, never fitted, and why.
CHECK_SERIES = {
    "qwen3-30b-h100-fp8-main": "the configs PR #24700 replaced (same shape, up to 10 % slower)",
    "gpt-oss-120b-h100-triton-before": "untuned Triton config (superseded by the tuned one)",
    "qwen3-omni-30b-b200-bf16": "Qwen3-Omni priced as Qwen3-30B-A3B (hidden size assumed); B200",
    "qwen3-next-80b-h100-tp4-fp8": "a single point (M = 1)",
}


@dataclass(frozen=True)
class Row:
    """One published kernel time and the per-GPU quantities that price it."""

    series: str
    tokens: int
    measured_s: float
    unique: float
    rows: float
    expert_bytes: float  # one GPU's shard
    expert_params: float
    bandwidth: float
    flops_per_s: float  # peak × the default compute efficiency
    l2_bytes: float
    latency_scale: float  # the GPU's fixed kernel times over the reference clock's
    gpu: str
    identity: str  # the kernel (:func:`simspec.costs.moe_kernel.kernel_identity`)


def _row(case: Case) -> Row:
    """One kernel row as one GPU's shard, its bytes priced as decode prices them."""
    spec = target_spec(case)
    shape, gpu = spec.shape, catalog.get_gpu(case.gpu)
    return Row(
        series=case.id.split("[")[0],
        tokens=case.tokens,
        measured_s=case.value * 1e-6,
        unique=independent_union(shape.num_experts, shape.experts_per_token, case.tokens),
        rows=case.tokens * shape.experts_per_token,
        expert_bytes=shape.expert_bytes / case.tp,
        expert_params=shape.expert_params / case.tp,
        bandwidth=gpu.hbm_bytes_per_s,
        flops_per_s=gpu.bf16_flops_per_s * RooflineParams().compute_efficiency,
        l2_bytes=gpu.l2_bytes,
        latency_scale=gpu.latency_scale,
        gpu=case.gpu,
        identity=kernel_identity(case.gpu, spec.expert_weight_bytes),
    )


def load_rows(cases: CaseFile) -> list[Row]:
    """Every kernel row of the case file the fits may use (role "fit"), as one GPU's shard."""
    return [_row(case) for case in for_fitting(cases.cases) if case.category == "kernel"]


def load_test_rows(cases: CaseFile) -> list[Row]:
    """The kernel rows of role "test" (searched rows), as one GPU's shard: predicted with the
    fitted constants and reported, never fitted."""
    return [_row(c) for c in cases.cases if c.category == "kernel" and c.role == "test"]


@dataclass(frozen=True)
class Form:
    """A form's fitted constants: names, units, start, bounds, and how they become params."""

    name: str
    keys: tuple[str, ...]
    scales: tuple[float, ...]  # fitted variable × scale = the [costs] value
    units: tuple[str, ...]
    start: tuple[float, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]

    def params(self, x: np.ndarray) -> RooflineParams:
        """The default parameters with this form and its constants at ``x`` (scaled)."""
        values: dict[str, Any] = {
            k: float(v) * s for k, v, s in zip(self.keys, x, self.scales, strict=True)
        }
        return dataclasses.replace(RooflineParams(moe_kernel=self.name), **values)


FORMS = (
    Form(
        "saturation",
        ("moe_efficiency_max", "moe_saturation_bytes"),
        (1.0, 1e6),
        ("", "bytes"),
        (0.8, 94.0),
        (0.01, 1.0),
        (1.0, 1e5),
    ),
    Form(
        "launch",
        ("moe_launch_s", "moe_expert_s", "moe_bandwidth_efficiency", "moe_exposed_fraction"),
        (1e-6, 1e-6, 1.0, 1.0),
        ("s", "s", "", ""),
        (20.0, 0.1, 0.9, 0.3),
        (0.0, 0.0, 0.05, 0.0),
        (1000.0, 100.0, 1.0, 1.0),
    ),
)


def predict(params: RooflineParams, row: Row) -> float:
    """The form's time of one row, s."""
    t = moe_layer_s(
        params,
        row.unique,
        row.rows,
        expert_bytes=row.expert_bytes,
        expert_params=row.expert_params,
        bandwidth=row.bandwidth,
        flops_per_s=row.flops_per_s,
        l2_bytes=row.l2_bytes,
        latency_scale=row.latency_scale,
    )
    return float(t)


def relative_errors(params: RooflineParams, rows: list[Row]) -> np.ndarray:
    """(predicted − measured) / measured per row."""
    return np.array([predict(params, r) / r.measured_s - 1.0 for r in rows])


@dataclass(frozen=True)
class Fit:
    """Fitted variables, their standard errors (Jacobian), and the rows they were fitted on."""

    form: Form
    x: np.ndarray
    stderr: np.ndarray
    rows: int

    @property
    def params(self) -> RooflineParams:
        return self.form.params(self.x)


def fit(form: Form, rows: list[Row]) -> Fit:
    """Least squares on relative errors; standard errors from (JᵀJ)⁻¹·s²."""
    from scipy.optimize import least_squares

    def residuals(x: np.ndarray) -> np.ndarray:
        return relative_errors(form.params(x), rows)

    result = least_squares(residuals, form.start, bounds=(form.lower, form.upper), x_scale="jac")
    dof = max(len(rows) - len(result.x), 1)
    s2 = float(result.fun @ result.fun) / dof
    try:
        cov = np.linalg.inv(result.jac.T @ result.jac) * s2
        stderr = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    except np.linalg.LinAlgError:
        stderr = np.full(len(result.x), np.nan)
    return Fit(form, result.x, stderr, len(rows))


def scored(rows: list[Row], series: str) -> list[Row]:
    """The rows of one series with M ≤ M_MAX."""
    return [r for r in rows if r.series == series and r.tokens <= M_MAX]


def error_stats(errors: np.ndarray) -> dict[str, float]:
    """Median and max |relative error|."""
    a = np.abs(errors)
    return {"median": round(float(np.median(a)), 4), "max": round(float(np.max(a)), 4)}


def searched_series(tests: Sequence[Row]) -> list[str]:
    """The series of the test rows, in file order."""
    return list(dict.fromkeys(r.series for r in tests))


def evaluate(form: Form, rows: list[Row], tests: Sequence[Row] = ()) -> dict:
    """The full fit, per-series errors, leave-one-series-out errors, check- and test-series
    errors (``tests``: rows of role "test", predicted with the full fit, never fitted)."""
    fit_rows = [r for s in FIT_SERIES for r in scored(rows, s)]
    full = fit(form, fit_rows)
    fitted = {s: error_stats(relative_errors(full.params, scored(rows, s))) for s in FIT_SERIES}
    held_out = {}
    for left_out in FIT_SERIES:
        train = [r for s in FIT_SERIES if s != left_out for r in scored(rows, s)]
        part = fit(form, train)
        held_out[left_out] = error_stats(relative_errors(part.params, scored(rows, left_out)))
    checks = {s: error_stats(relative_errors(full.params, scored(rows, s))) for s in CHECK_SERIES}
    searched = {
        s: error_stats(relative_errors(full.params, scored(list(tests), s)))
        for s in searched_series(tests)
    }
    all_fit = relative_errors(full.params, fit_rows)
    return {
        "constants": {
            key: {"value": float(v) * scale, "stderr": float(e) * scale, "unit": unit}
            for key, v, e, scale, unit in zip(
                form.keys, full.x, full.stderr, form.scales, form.units, strict=True
            )
        },
        "fit_rows": full.rows,
        "fitted": fitted,
        "fitted_overall": error_stats(all_fit),
        "held_out": held_out,
        "held_out_median_of_medians": round(
            statistics.median(v["median"] for v in held_out.values()), 4
        ),
        "held_out_worst_median": round(max(v["median"] for v in held_out.values()), 4),
        "checks": checks,
        "tests": searched,
        "_params": full.params,
    }


def l2_study(params: RooflineParams, rows: list[Row]) -> dict[str, dict[str, Any]]:
    """Each moe_l2_reuse mode with the fitted constants, on every fit row (all M)."""
    out: dict[str, dict[str, Any]] = {}
    for mode in L2_REUSE_MODES:
        p = dataclasses.replace(params, moe_l2_reuse=mode)
        out[mode] = {}
        for s in FIT_SERIES:
            series_rows = [r for r in rows if r.series == s]
            errors = relative_errors(p, series_rows)
            out[mode][s] = {
                "all_m": error_stats(errors),
                "large_m": {
                    str(r.tokens): round(float(e), 4)
                    for r, e in zip(series_rows, errors, strict=True)
                    if r.tokens > REREAD_M
                },
            }
    return out


def identity_study(form: Form, params: RooflineParams, rows: list[Row]) -> dict[str, Any]:
    """Per kernel identity: its series and scored rows, their errors with the constants fitted
    on every fit series, and (for an identity with fit rows) with the constants fitted
    without them: how the one set of constants transfers to that kernel."""
    fit_rows = [r for s in FIT_SERIES for r in scored(rows, s)]
    out: dict[str, Any] = {}
    for identity in sorted({r.identity for r in rows}):
        mine = [r for r in rows if r.identity == identity and r.tokens <= M_MAX]
        own = [r for r in fit_rows if r.identity == identity]
        entry: dict[str, Any] = {
            "series": sorted({r.series for r in mine}),
            "rows": len(mine),
            "fit_rows": len(own),
            "with_all": error_stats(relative_errors(params, mine)),
        }
        if own and len(own) < len(fit_rows):
            part = fit(form, [r for r in fit_rows if r.identity != identity])
            entry["without_it"] = error_stats(relative_errors(part.params, mine))
        out[identity] = entry
    return out


def run_identities(cases: CaseFile) -> dict[str, list[str]]:
    """The kernel identity every decode and speculative series runs, series by identity."""
    out: dict[str, set[str]] = {}
    for case in cases.cases:
        if case.category not in ("decode", "speculative"):
            continue
        spec = target_spec(case)
        identity = kernel_identity(case.gpu, spec.expert_weight_bytes)
        out.setdefault(identity, set()).add(case.id.split("[")[0])
    return {k: sorted(v) for k, v in sorted(out.items())}


def _pct(value: float) -> str:
    return f"{value:.1%}"


def report(
    results: dict[str, dict],
    l2: dict,
    winner: str,
    identities: dict,
    runs: dict[str, list[str]],
    tests: Sequence[str] = (),
) -> str:
    """KERNEL_FIT.md (deterministic)."""
    lines = [
        "# MoE kernel fit: forms of the routed-expert time vs published fused_moe tables",
        "",
        "Written by `simspec fidelity --fit-kernels` from the `kernel` rows of",
        "`validation/cases.toml`; do not edit by hand. Forms: `simspec/costs/moe_kernel.py`.",
        f"Rows with M ≤ {M_MAX} are fitted and scored; U(M) = N·(1 − (1 − k_e/N)^M) (uniform",
        "random routing); a TP row is one GPU's shard (expert bytes / tp). Least squares on",
        "relative errors, one set of constants for all GPUs; ± = one standard error from the",
        "Jacobian.",
        "",
        "## Series",
        "",
        "| series | role | why |",
        "|---|---|---|",
    ]
    lines += [f"| `{s}` | fit | {why} |" for s, why in FIT_SERIES.items()]
    lines += [f"| `{s}` | check only | {why} |" for s, why in CHECK_SERIES.items()]
    lines += [
        f'| `{s}` | test | a searched row (role "test" in cases.toml): predicted, never fitted |'
        for s in tests
    ]
    lines += [
        "",
        "## Kernel identities (launch form)",
        "",
        "A row's kernel is its GPU generation and the format of the expert bytes it streams",
        "(`simspec.costs.moe_kernel.kernel_identity`), the bytes decode prices with the same",
        "`with_precision`. Errors of the scored rows with the constants fitted on every fit",
        "series, and with those fitted without the identity's own rows.",
        "",
        "| kernel | series | rows | fitted on | with all median / max | without it median / max |",
        "|---|---|---|---|---|---|",
    ]
    for identity, e in identities.items():
        w = e["with_all"]
        o = e.get("without_it")
        without = f"{_pct(o['median'])} / {_pct(o['max'])}" if o else "—"
        lines.append(
            f"| `{identity}` | {', '.join(f'`{x}`' for x in e['series'])} | {e['rows']} | "
            f"{e['fit_rows']} | {_pct(w['median'])} / {_pct(w['max'])} | {without} |"
        )
    unmeasured = {k: v for k, v in runs.items() if k not in identities}
    lines += [
        "",
        "Kernels the decode and speculative rows run that no kernel row measures (priced with",
        "these constants, an extrapolation): "
        + (
            "; ".join(f"`{k}` ({len(v)} series: {', '.join(v)})" for k, v in unmeasured.items())
            or "none"
        )
        + ".",
        "",
    ]
    for name, r in results.items():
        lines += [f"## Form `{name}`", "", "| key | value | ± |", "|---|---|---|"]
        for key, c in r["constants"].items():
            lines.append(f"| `{key}` | {c['value']:.4g} {c['unit']} | {c['stderr']:.2g} |")
        lines += [
            "",
            f"Fitted on {r['fit_rows']} rows: median {_pct(r['fitted_overall']['median'])}, "
            f"max {_pct(r['fitted_overall']['max'])}.",
            "",
            "| series | fitted median | fitted max | held out median | held out max |",
            "|---|---|---|---|---|",
        ]
        for s in FIT_SERIES:
            f, h = r["fitted"][s], r["held_out"][s]
            lines.append(
                f"| `{s}` | {_pct(f['median'])} | {_pct(f['max'])} | {_pct(h['median'])} | "
                f"{_pct(h['max'])} |"
            )
        for s in CHECK_SERIES:
            c = r["checks"][s]
            lines.append(f"| `{s}` (check) | {_pct(c['median'])} | {_pct(c['max'])} | — | — |")
        for s, t in r["tests"].items():
            lines.append(f"| `{s}` (test) | {_pct(t['median'])} | {_pct(t['max'])} | — | — |")
        lines += [
            "",
            f"Held out (leave one series out): median of the series' medians "
            f"{_pct(r['held_out_median_of_medians'])}, worst series median "
            f"{_pct(r['held_out_worst_median'])}.",
            "",
        ]
    lines += [
        "## L2 and co-routed re-reads (`moe_l2_reuse`, launch form, fitted constants)",
        "",
        f"Errors over every M of the fit series. Only the rows above {REREAD_M} tokens crowd more",
        "rows onto an expert than one 64-row tile; their signed errors are listed.",
        "",
        f"| mode | series | median | max | M > {REREAD_M} |",
        "|---|---|---|---|---|",
    ]
    for mode, per in l2.items():
        for s, v in per.items():
            large = ", ".join(f"{m}: {e:+.0%}" for m, e in v["large_m"].items()) or "—"
            lines.append(
                f"| {mode} | `{s}` | {_pct(v['all_m']['median'])} | {_pct(v['all_m']['max'])} "
                f"| {large} |"
            )
    lines += [
        "",
        "## Verdict",
        "",
        f"`{winner}` has the lower held-out error (median of the left-out series' medians).",
        "",
    ]
    default = RooflineParams().moe_kernel
    if winner == default:
        lines += [
            f"`{winner}` is simspec's default form (`[costs] moe_kernel`), with these constants",
            "as the defaults of its keys. `simspec calibrate` fits its per-layer time and",
            "bandwidth efficiency to a measured MoE table; the per-expert time keeps this fit's",
            "value, because one model's table has one expert size and cannot separate the two.",
            "",
        ]
    else:
        lines += [f"The default form is still `{default}` (`[costs] moe_kernel`).", ""]
    return "\n".join(lines) + "\n"


def kernel_fit(cases: CaseFile) -> tuple[dict[str, Any], str]:
    """Fit every form to the kernel rows of ``cases`` (module docstring).

    Returns
    -------
    data : dict
        What ``kernel_fit.json`` holds: per form its constants, fitted, held-out and check
        errors; the L2 study; the winner and the ``[costs]`` it recommends.
    report : str
        ``KERNEL_FIT.md``.
    """
    rows = load_rows(cases)
    tests = load_test_rows(cases)
    results = {form.name: evaluate(form, rows, tests) for form in FORMS}
    winner = min(results, key=lambda n: results[n]["held_out_median_of_medians"])
    launch = results["launch"]["_params"]
    l2 = l2_study(launch, rows)
    identities = identity_study(next(f for f in FORMS if f.name == "launch"), launch, rows + tests)
    runs = run_identities(cases)
    data = {
        "m_max": M_MAX,
        "fit_series": FIT_SERIES,
        "check_series": CHECK_SERIES,
        "test_series": searched_series(tests),
        "forms": {n: {k: v for k, v in r.items() if k != "_params"} for n, r in results.items()},
        "l2_reuse": l2,
        "kernel_identities": identities,
        "run_identities": runs,
        "unmeasured_identities": sorted(k for k in runs if k not in identities),
        "winner": winner,
        "recommended_costs": {
            "moe_kernel": winner,
            **{k: float(f"{v['value']:.3g}") for k, v in results[winner]["constants"].items()},
            **({"moe_l2_reuse": "ideal", "moe_tile_rows": 64.0} if winner == "launch" else {}),
        },
    }
    return data, report(results, l2, winner, identities, runs, searched_series(tests))
