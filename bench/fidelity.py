"""Fidelity: simspec's predictions against published GPU measurements.

    python bench/fidelity.py [--cases validation/cases.toml] [--out validation] [--workers 2]

Predicts every row of ``validation/cases.toml`` (read by ``bench/fidelity_cases.py``) with the
default scenario's cost model and settings, and writes ``REPORT.md`` (predicted vs measured, the
relative error of every row, median / max per category, the sign of speedup - 1) and
``summary.json`` (per category: rows, median and max |relative error|, wrong signs).

How a row is predicted:

- **kernel** (``moe_layer_us``): the routed-expert term of the roofline
  (:func:`simspec.costs.kernels.routed_experts_s`) at M tokens with the expected distinct experts
  of M uniformly, independently routed tokens N·(1 − (1 − k_e/N)^M)
  (:func:`simspec.physics.experts.independent_union`; the fused-MoE benchmarks route at random).
- **decode**: :func:`simspec.run` on the default scenario with the row's target, precision, GPU,
  ``num_gpus``, a closed loop at the row's concurrency and the row's lengths, policy k = 0.
  TPOT rows simulate at most 256 output tokens and move the prompt up by half the rest, so the
  mean context of the decode steps is the row's (attention cost is linear in context).
- **benchmark rows** (``num_requests`` set, e.g. SpecForge's ``bench_eagle3``): the benchmark
  runs a finite set of requests (two-turn conversations) ``batch`` at a time and divides all
  output tokens by the wall time, so its throughput includes the ramp-down tail while the
  batch drains to its longest request. Such a row runs exactly that: ``num_requests`` requests
  in a closed loop at the row's concurrency, output lengths uniform in mean·(1 ± length_jitter),
  tokens_per_s = output / makespan. Lengths above 512 are scaled down by one factor (prompt
  moved up by half the rest: the drain in steps and the mean context are kept); at batch 1 the
  requests run one after another, so a few requests of the mean length stand for them.
- **speculative**: the same run with ``fixed`` k = ``steps`` and i.i.d. acceptance alpha solving
  (1 − alpha^(k+1)) / (1 − alpha) = AL (the row's measured acceptance length); the prediction is
  the ratio of the quantity the row publishes: throughput (output / makespan) of the run over
  that of its no-speculation baseline for tokens_per_s rows, the TPOT ratio
  (``speedup_vs_no_spec``) for TPOT rows. Draft trees (topk > 1) run as trees
  (``[speculation]`` topk and num_draft_tokens, :mod:`simspec.text.tree`) with the alpha whose
  tree has the measured AL.

Every decode and speculative row is predicted twice: with the engine preset of the row's engine
(``fidelity_cases.engine_preset``: sglang, vllm, trtllm; fitted by ``bench/fit_presets.py``,
whose ``validation/preset_fit.json`` adds the presets' values, residuals and leave-one-source-out
errors to the report) and with ``ideal`` (physics only). Tensor and expert parallelism are
modelled (:mod:`simspec.costs.parallel`). The report also lists every decode series with several
batch sizes as implied time per step and its growth per added request
(``fidelity_presets.step_lines``), so sources can be compared on one scale.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fidelity_cases import CASES_PATH, Case, CaseFile, engine_preset, load_cases
from fidelity_presets import preset_lines, step_lines, target_lines

import simspec
from simspec import catalog
from simspec.config.load import read_scenario_data, scenario_from_dict
from simspec.config.speculation import DEFAULT_RANK_DECAY as RANK_DECAY
from simspec.costs.kernels import routed_experts_s
from simspec.errors import InputError
from simspec.fit.serving import alpha_for_acceptance_length
from simspec.physics.experts import independent_union
from simspec.physics.precision import with_precision
from simspec.text.tree import expected_acceptance_length, fit_alpha

FIT_PATH = Path(__file__).resolve().parent.parent / "validation" / "preset_fit.json"
#: The issue's target series: (label, category, case-id prefixes).
TARGETS = (
    ("Qwen3-30B-A3B TP2 SGLang decode, bs 1-64", "decode", ("qwen3-30b-2xh100-tp2-sglang",)),
    ("gpt-oss-120b TP8 vLLM decode, conc 4-64", "decode", ("gpt-oss-120b-8xh100-tp8-vllm",)),
    ("GLM-4.7 TP8 EP8 TensorRT-LLM decode, conc 4-256", "decode", ("glm-4.7-8xh100",)),
    ("all speculative rows", "speculative", ("",)),
)
#: TPOT rows simulate at most this many output tokens (module docstring).
TPOT_OUTPUT_CAP = 256
#: Requests simulated at least (batch 1 rows average over a few requests).
MIN_REQUESTS = 4
#: Benchmark rows (``num_requests`` set) simulate at most this many output tokens per request:
#: every length is scaled by the same factor (the prompt moves up by half the rest), so the
#: benchmark's drain structure, in steps, and the mean context are kept (module docstring).
BENCH_OUTPUT_CAP = 512


def is_tree_row(case: Case) -> bool:
    """A draft tree: topk > 1, or fewer tokens verified than the chain's steps + 1."""
    return case.topk > 1 or 0 < case.draft_tokens < case.steps + 1


def tree_alpha(case: Case) -> float:
    """The i.i.d. alpha whose (steps, topk, draft_tokens) tree has the row's AL (bisection).

    Siblings share the rest of a node's acceptance by the default rank decay
    (:mod:`simspec.text.tree`); capped at the tree's largest AL.
    """
    top = expected_acceptance_length(1.0, case.steps, case.topk, case.draft_tokens, RANK_DECAY)
    target = min(case.acceptance_length, top)
    return fit_alpha(target, case.steps, case.topk, case.draft_tokens, RANK_DECAY)


def predict_kernel_us(case: Case, default: simspec.Scenario) -> float:
    """One MoE layer's routed-expert time at M = ``case.tokens`` tokens, µs (module docstring)."""
    spec = with_precision(
        catalog.get_model(case.model), case.precision, expert=case.expert_precision
    )
    shape, gpu, params = spec.shape, catalog.get_gpu(case.gpu), default.roofline
    unique = independent_union(shape.num_experts, shape.experts_per_token, case.tokens)
    bw = gpu.hbm_bytes_per_s * case.num_gpus
    flops = gpu.bf16_flops_per_s * case.num_gpus * params.compute_efficiency
    rows = case.tokens * shape.experts_per_token
    return float(routed_experts_s(shape, params, np.array([unique]), rows, bw, flops)[0]) * 1e6


def scenario_data(
    case: Case, preset: str | None = None, costs: dict[str, float] | None = None
) -> dict[str, Any]:
    """The default scenario's data with the row's model, hardware, workload and policy.

    ``preset`` is the engine preset (default: the row's engine, :func:`engine_preset`);
    ``costs`` are ``[costs]`` keys set on top (the preset fit's probes).
    """
    data, _ = read_scenario_data(None)
    data["engine"] = {"preset": preset or engine_preset(case)}
    if costs:
        data["costs"] = {**data.get("costs", {}), **costs}
    data["model"] = {"target": case.model, "precision": case.precision}
    if case.expert_precision:
        data["model"]["expert_precision"] = case.expert_precision
    data["hardware"] = {
        "gpu": case.gpu,
        "num_gpus": case.num_gpus,
        "tensor_parallel": case.tp,
        "expert_parallel": case.ep,
    }
    data["routing"] = {**data.get("routing", {}), "mode": "analytic"}
    prompt, output = case.prompt_tokens, case.output_tokens
    cap = BENCH_OUTPUT_CAP if case.num_requests else TPOT_OUTPUT_CAP
    capped = case.num_requests or case.quantity in ("tpot_ms", "tokens_per_s_per_user")
    if capped and output > cap:
        prompt += (output - cap) // 2
        output = cap
    requests = case.num_requests or max(case.batch, MIN_REQUESTS)
    jitter = case.length_jitter
    if case.batch == 1:  # one request at a time: the throughput is one request's
        requests, jitter = MIN_REQUESTS, 0.0
    data["workload"] = {
        "loop": "closed",
        "concurrency": case.batch,
        "num_requests": requests,
        "prompt_tokens": prompt,
        "output_tokens": output,
        "length_jitter": jitter,
    }
    k = case.steps if case.category == "speculative" else 0
    data["policies"] = [{"name": "fixed", "draft_tokens": k}]
    if k and is_tree_row(case):
        data["speculation"] = {"topk": case.topk, "num_draft_tokens": case.draft_tokens}
        data["acceptance"] = {"process": "iid", "alpha": min(tree_alpha(case), 0.999)}
    elif k:
        alpha = alpha_for_acceptance_length(case.acceptance_length, k)
        data["acceptance"] = {"process": "iid", "alpha": min(alpha, 0.999)}
    return data


#: What :func:`run_times` returns: times of one run that are linear in every fixed overhead
#: (each pass or draft step adds its overhead once, and no decision of a fixed-k run depends on
#: time), so the preset fit can interpolate them (bench/fit_presets.py).
TIMES = ("tpot_ms", "baseline_tpot_ms", "ttft_ms", "s_per_token", "baseline_s_per_token")


def run_times(
    case: Case, preset: str | None = None, costs: dict[str, float] | None = None
) -> dict[str, float]:
    """One simulated run of a decode or speculative row: the times of :data:`TIMES`."""
    data = scenario_data(case, preset, costs)
    scenario = scenario_from_dict(data, f"validation case {case.id}")
    rows = simspec.run(scenario).policies
    row, baseline = rows[-1], rows[0]
    tpot = float(row.tpot_ms)
    return {
        "tpot_ms": tpot,
        "baseline_tpot_ms": tpot * float(row.speedup_vs_no_spec),
        "ttft_ms": float(row.ttft_ms),
        "s_per_token": 1.0 / float(row.tokens_per_s),
        "baseline_s_per_token": 1.0 / float(baseline.tokens_per_s),
    }


def quantity(case: Case, times: dict[str, float]) -> float:
    """The row's published quantity from a run's :data:`TIMES` (module docstring)."""
    if case.category == "speculative" and case.quantity == "tokens_per_s":
        return times["baseline_s_per_token"] / times["s_per_token"]
    if case.category == "speculative":
        return times["baseline_tpot_ms"] / times["tpot_ms"]
    if case.quantity == "tpot_ms":
        return times["tpot_ms"]
    if case.quantity == "tokens_per_s_per_user":
        return 1000.0 / times["tpot_ms"]
    if case.quantity == "tokens_per_s":
        return 1.0 / times["s_per_token"]
    if case.quantity == "e2e_latency_s":
        return (times["ttft_ms"] + times["tpot_ms"] * (case.output_tokens - 1)) / 1000.0
    raise ValueError(case.quantity)


def predict_run(case: Case, preset: str | None = None) -> float:
    """Decode and speculative rows: the quantity from one simulated run (module docstring)."""
    return quantity(case, run_times(case, preset))


#: A measured speedup within this of 1 has no meaningful sign: a benchmark's run-to-run noise
#: is of this order, so sign(speedup − 1) of such a row is not checked (REPORT.md says so).
SIGN_NOISE = 0.01


def _sign_right(category: str, predicted: float | None, measured: float) -> bool | None:
    """sign(predicted − 1) == sign(measured − 1); None off speculative rows or within noise."""
    if category != "speculative" or predicted is None or abs(measured - 1) <= SIGN_NOISE:
        return None
    return (predicted > 1) == (measured > 1)


@dataclass(frozen=True)
class Outcome:
    """A row's prediction (or why there is none)."""

    case: Case
    measured: float
    predicted: float | None
    error: str = ""
    ideal: float | None = None  # the prediction with the physics-only preset

    @property
    def relative_error(self) -> float | None:
        """(predicted − measured) / measured."""
        if self.predicted is None:
            return None
        return (self.predicted - self.measured) / self.measured

    @property
    def sign_right(self) -> bool | None:
        """Speculative rows: does sign(predicted − 1) match sign(measured − 1)?"""
        return _sign_right(self.case.category, self.predicted, self.measured)

    @property
    def ideal_error(self) -> float | None:
        """(ideal − measured) / measured: the physics-only prediction's error."""
        return None if self.ideal is None else (self.ideal - self.measured) / self.measured

    @property
    def ideal_sign_right(self) -> bool | None:
        """The sign check of the physics-only prediction."""
        return _sign_right(self.case.category, self.ideal, self.measured)


def predict(case: Case) -> Outcome:
    """Predict one row; a scenario the row cannot build is an outcome with its reason."""
    measured = case.measured_speedup if case.category == "speculative" else case.value
    try:
        if case.category == "kernel":
            value = predict_kernel_us(case, simspec.load_scenario())
            return Outcome(case, measured, value, ideal=value)
        value = predict_run(case)
        ideal = value if engine_preset(case) == "ideal" else predict_run(case, "ideal")
    except InputError as exc:
        return Outcome(case, measured, None, str(exc))
    return Outcome(case, measured, value, ideal=ideal)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    """Per category: rows, predicted rows, median / max |relative error|, wrong signs."""
    summary: dict[str, Any] = {}
    for category in ("kernel", "decode", "speculative"):
        rows = [o for o in outcomes if o.case.category == category]
        errors = [abs(o.relative_error) for o in rows if o.relative_error is not None]
        signs = [o.sign_right for o in rows if o.sign_right is not None]
        ideal = [abs(o.ideal_error) for o in rows if o.ideal_error is not None]
        ideal_signs = [o.ideal_sign_right for o in rows if o.ideal_sign_right is not None]
        summary[category] = {
            "rows": len(rows),
            "predicted_rows": len(errors),
            "median_abs_relative_error": _median(errors),
            "max_abs_relative_error": round(max(errors), 4) if errors else None,
            "wrong_signs": sum(1 for s in signs if not s),
            "signs_checked": len(signs),
            "ideal_median_abs_relative_error": _median(ideal),
            "ideal_wrong_signs": sum(1 for s in ideal_signs if not s),
        }
    targets: dict[str, Any] = {}
    for label, category, prefixes in TARGETS:
        rows = [
            o for o in outcomes if o.case.category == category and o.case.id.startswith(prefixes)
        ]
        targets[label] = {
            "rows": len(rows),
            "median_abs_relative_error": _median(
                [abs(o.relative_error) for o in rows if o.relative_error is not None]
            ),
            "ideal_median_abs_relative_error": _median(
                [abs(o.ideal_error) for o in rows if o.ideal_error is not None]
            ),
        }
    summary["targets"] = targets
    return summary


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}"


def _gpus(case: Case) -> str:
    ep = f" EP{case.ep}" if case.ep > 1 else ""
    return f"{case.num_gpus}×{case.gpu} TP{case.tp}{ep}"


def report(outcomes: list[Outcome], cases: CaseFile, summary: dict[str, Any]) -> str:
    """REPORT.md text (deterministic: no dates or timings)."""
    lines = [
        "# Fidelity report: simspec vs published GPU measurements",
        "",
        "Written by `python bench/fidelity.py` from `validation/cases.toml` (every number there",
        "cites its source); do not edit by hand. Method: the docstring of `bench/fidelity.py`.",
        "Predictions use the default scenario's cost model (roofline, assumed efficiencies, no",
        "calibration profile), its routing (lag-1 overlap 0.38, analytic mode) and the row's",
        "model, weight precision, GPU, GPU count, TP/EP degrees, batch and lengths, and the",
        "engine preset of the row's engine (sglang, vllm, trtllm: fitted overheads, see *Engine",
        "presets*; other rows: `ideal`). Columns *ideal* give the physics-only prediction (preset",
        "`ideal`, TP/EP sharding and alpha-beta collectives included). Draft trees run as",
        "SGLang's (steps, topk, draft) trees. The sign of speedup − 1 is checked on every",
        f"speculative row except one measured within ±{SIGN_NOISE:.0%} of 1 (run-to-run noise;",
        "marked *not meaningful*).",
        "",
        "## Summary",
        "",
        "| category | rows | predicted | median abs rel. error (ideal) | max abs rel. error | "
        "wrong sign of speedup − 1 (ideal) |",
        "|---|---|---|---|---|---|",
    ]
    for category, s in summary.items():
        if category == "targets":
            continue
        med, mx = s["median_abs_relative_error"], s["max_abs_relative_error"]
        ideal = s["ideal_median_abs_relative_error"]
        signs = (
            f"{s['wrong_signs']} of {s['signs_checked']} ({s['ideal_wrong_signs']})"
            if s["signs_checked"]
            else "—"
        )
        lines.append(
            f"| {category} | {s['rows']} | {s['predicted_rows']} | "
            f"{'—' if med is None else f'{med:.0%}'} ({'—' if ideal is None else f'{ideal:.0%}'})"
            f" | {'—' if mx is None else f'{mx:.0%}'} | {signs} |"
        )
    lines += target_lines(summary["targets"])
    titles = {
        "kernel": "Kernel: one MoE layer (µs) at M tokens",
        "decode": "Decode without speculation",
        "speculative": "Speculative decoding: speedup over plain decoding at the same batch",
    }
    for category, title in titles.items():
        lines += ["", f"## {title}", ""]
        if category == "kernel":
            lines.append(
                "| case | model | GPUs | precision | M | measured | predicted | rel. error |"
            )
            lines.append("|---|---|---|---|---|---|---|---|")
        elif category == "decode":
            lines.append(
                "| case | model | GPUs | precision | batch | in/out | quantity | measured | "
                "predicted | rel. error | preset | ideal | rel. error |"
            )
            lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        else:
            lines.append(
                "| case | model | GPUs | batch | (steps, topk, draft) | AL | measured | "
                "predicted | rel. error | sign | preset | ideal | rel. error |"
            )
            lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for o in (o for o in outcomes if o.case.category == category):
            c = o.case
            err = "—" if o.relative_error is None else f"{o.relative_error:+.0%}"
            ierr = "—" if o.ideal_error is None else f"{o.ideal_error:+.0%}"
            ideal = f"{engine_preset(c)} | {_fmt(o.ideal)} | {ierr} |"
            prec = c.precision + (f" / experts {c.expert_precision}" if c.expert_precision else "")
            if category == "kernel":
                lines.append(
                    f"| {c.id} | {c.model} | {_gpus(c)} | {prec} | {c.tokens} | "
                    f"{_fmt(o.measured)} | {_fmt(o.predicted)} | {err} |"
                )
            elif category == "decode":
                lines.append(
                    f"| {c.id} | {c.model} | {_gpus(c)} | {prec} | {c.batch} | "
                    f"{c.prompt_tokens}/{c.output_tokens} | {c.quantity} | {_fmt(o.measured)} | "
                    f"{_fmt(o.predicted)} | {err} | {ideal}"
                )
            else:
                sign = {None: "—", True: "right", False: "**wrong**"}[o.sign_right]
                if o.sign_right is None and abs(o.measured - 1) <= SIGN_NOISE:
                    sign = f"not meaningful (±{SIGN_NOISE:.0%} of 1)"
                lines.append(
                    f"| {c.id} | {c.model} | {_gpus(c)} | {c.batch} | "
                    f"({c.steps}, {c.topk}, {c.draft_tokens}) | {c.acceptance_length:g} | "
                    f"{o.measured:.3f}× | {_fmt(o.predicted)}× | {err} | {sign} | {ideal}"
                )
        failed = [o for o in outcomes if o.case.category == category and o.error]
        for o in failed:
            lines.append(f"\n- `{o.case.id}` not predicted: {o.error}")
    lines += step_lines(outcomes)
    lines += preset_lines(outcomes, FIT_PATH)
    lines += ["", "## Notes and assumptions per series", ""]
    seen = set()
    for c in cases.cases:
        key = c.id.split("[")[0]
        if key in seen or not (c.notes or c.assumed):
            continue
        seen.add(key)
        text = " ".join(t for t in (c.notes, f"Assumed: {c.assumed}." if c.assumed else "") if t)
        lines.append(f"- `{key}` ({cases.sources[c.source]['url']}): {text}")
    lines += ["", "## Rows not expressed yet", ""]
    for u in cases.unexpressed:
        lines.append(f"- {u.row}: {u.reason}.")
    lines += ["", "## Sources", ""]
    for key, src in sorted(cases.sources.items()):
        lines.append(f"- `{key}`: {src.get('title', '')} — {src['url']}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=str(CASES_PATH))
    parser.add_argument("--out", default=str(Path(CASES_PATH).parent))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    cases = load_cases(args.cases)
    start = time.perf_counter()
    # Longest simulations first, so the two workers finish together.
    order = sorted(cases.cases, key=lambda c: -(c.batch * c.output_tokens))
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = dict(zip((c.id for c in order), pool.map(predict, order), strict=True))
    outcomes = [done[c.id] for c in cases.cases]
    summary = summarize(outcomes)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "REPORT.md").write_text(report(outcomes, cases, summary), encoding="utf-8")
    print(json.dumps(summary, indent=2))
    print(f"{len(outcomes)} rows in {time.perf_counter() - start:.0f} s -> {out}/REPORT.md")


if __name__ == "__main__":
    main()
