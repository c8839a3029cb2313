"""The fidelity report: every published row predicted, compared, summarised (REPORT.md).

:func:`fidelity_report` predicts every row of a cases file (:mod:`.cases`, :mod:`.predict`)
and writes ``REPORT.md`` (predicted vs measured, the relative error of every row, median / max
per category, the sign of speedup − 1, with the engine presets and physics only) and
``summary.json`` (per category: rows, median and max |relative error|, wrong signs: in sample
for the rows the engine presets were fitted on). When the presets' fit (``preset_fit.json``,
:mod:`simspec.fit.presets`) sits in the output folder, the summary adds the presets' errors out
of sample (``presets_out_of_sample``: each source left out of the fit in turn) and the report
their values, residuals, leave-one-source-out table, and how far the fit's own predictions
drift from this report's simulations. The plain-decode errors are also split by the GPU's maker
and the engine that ran each row (``decode_by_engine``), with physics only beside the presets,
so where the physics alone holds shows apart from an engine's own time. Every plain-decode
series with several batch sizes is also shown as implied time per step, so sources can be
compared on one scale.
Given the nested fold table (:mod:`simspec.fit.nested`), the summary and the report lead with
the out-of-sample errors (``out_of_sample``, :mod:`.holdout`) and every row's table gains its
held-out prediction. Both files carry :func:`~.holdout.inputs_hash`, so a test can tell when
they are stale. Rows the shipped presets and kernel constants were not fitted on
(:func:`.fitted.fitted_on`: test rows, rows called inconsistent, other engines' rows, and every
row of a cases file of one's own) are summarised apart (``not_fitted``): for them the shipped
numbers are out of sample as they stand. The expert-offloading rows (``offload.toml`` next to the
cases file, :mod:`.offload`) add a section of their own and ``summary["offload"]``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from simspec.io import write_atomic

from ._sections import (
    decode_by_engine,
    decode_engine_lines,
    gpus_label,
    held_out_lines,
    held_out_summary,
    iteration_lines,
    preset_lines,
    read_preset_fit,
    rounded_median,
    step_lines,
    target_lines,
    ttft_lines,
    ttft_summary,
)
from .accuracy import accuracy_table
from .cases import (
    CASES_PATH,
    CATEGORIES,
    OFFLOAD_CASES_PATH,
    Case,
    CaseFile,
    engine_preset,
    load_cases,
)
from .fitted import fitted_on
from .holdout import REGENERATE, inputs_hash, out_of_sample, out_of_sample_lines
from .holdout import TARGETS as OOS_TARGETS
from .offload import (
    leave_one_reporter_out,
    offload_lines,
    offload_summary,
    predict_offload_all,
)
from .predictions import SIGN_NOISE, Outcome, is_tree_row, predict, speedup_sign_right

#: The issue's target series: (label, category, case-id prefixes).
TARGETS = (
    ("Qwen3-30B-A3B TP2 SGLang decode, bs 1-64", "decode", ("qwen3-30b-2xh100-tp2-sglang",)),
    ("gpt-oss-120b TP8 vLLM decode, conc 4-64", "decode", ("gpt-oss-120b-8xh100-tp8-vllm",)),
    ("GLM-4.7 TP8 EP8 TensorRT-LLM decode, conc 4-256", "decode", ("glm-4.7-8xh100",)),
    ("all speculative rows", "speculative", ("",)),
)
#: The engine presets' fit (:mod:`simspec.fit.presets`), read from the output folder.
PRESET_FIT = "preset_fit.json"


def predict_all(
    cases: list[Case], *, workers: int = 1, progress: Callable[[int, int], None] | None = None
) -> list[Outcome]:
    """Every row's :class:`Outcome`, in the order of ``cases``, on ``workers`` processes.

    The longest simulations start first, so the workers finish together.
    """
    order = sorted(cases, key=lambda c: -(c.batch * c.output_tokens))
    done: dict[str, Outcome] = {}
    pool = ProcessPoolExecutor(max_workers=workers) if workers > 1 else None
    with pool or contextlib.nullcontext():
        outcomes = pool.map(predict, order) if pool is not None else map(predict, order)
        for n, outcome in enumerate(outcomes, 1):
            done[outcome.case.id] = outcome
            if progress is not None:
                progress(n, len(order))
    return [done[c.id] for c in cases]


def fidelity_report(
    cases_path: str | Path,
    out: str | Path,
    *,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
    folds: dict[str, Any] | None = None,
    accuracy: str | Path | None = None,
) -> dict[str, Any]:
    """Predict every row of ``cases_path``, write ``REPORT.md`` and ``summary.json`` to ``out``.

    ``folds`` is the nested fold table (:func:`simspec.fit.nested.nested_folds`): with it the
    summary and the report lead with the out-of-sample errors and ``folds.json`` holds it, and
    the summary's ``accuracy`` holds each engine preset's errors
    (:func:`~simspec.validation.accuracy.accuracy_table`), also written to ``accuracy``
    (``simspec/catalog/accuracy.json`` in a checkout: what a run's guardrail reads).

    Returns
    -------
    dict
        The summary (what ``summary.json`` holds).
    """
    cases = load_cases(cases_path)
    offload_path = Path(cases_path).with_name(OFFLOAD_CASES_PATH.name)
    offload = load_cases(offload_path) if offload_path.exists() else None
    folder = Path(out)
    fit = read_preset_fit(folder / PRESET_FIT)  # a broken file fails before any simulation
    outcomes = predict_all(cases.cases, workers=workers, progress=progress)
    summary: dict[str, Any] = {
        "inputs_hash": inputs_hash(cases_path),
        "cases_file": cases_file_name(cases_path),
    }
    if folds is not None:
        summary["out_of_sample"] = out_of_sample(folds)
    summary |= summarize(outcomes)
    summary["not_fitted"] = {
        category: _stats(
            [o for o in outcomes if o.case.category == category and not fitted_on(o.case)]
        )
        for category in CATEGORIES
    }
    if folds is not None:
        held = {r["id"]: r["predicted"] for r in folds["rows"]}
        summary["speculative_by_shape"] = shape_summary(outcomes, held)
        summary["accuracy"] = accuracy_table(outcomes, folds, summary["inputs_hash"])
    if fit is not None:
        summary["presets_out_of_sample"] = held_out_summary(fit)
    folder.mkdir(parents=True, exist_ok=True)
    text = report(outcomes, cases, summary, fit, folder / PRESET_FIT, folds)
    if offload is not None:  # the expert-offloading rows next to the cases file
        offloaded = predict_offload_all(offload.cases, workers=workers)
        loro = leave_one_reporter_out(offload.cases, workers=workers)
        summary["offload"] = offload_summary(offloaded, loro)
        text += "\n".join(offload_lines(offloaded, offload, summary["offload"])) + "\n"
    if folds is not None:
        write_atomic(folder / "folds.json", json.dumps(folds, indent=1) + "\n")
    write_atomic(folder / "summary.json", json.dumps(summary, indent=2) + "\n")
    write_atomic(folder / "REPORT.md", text)
    if accuracy is not None and "accuracy" in summary:
        write_atomic(accuracy, json.dumps(summary["accuracy"], indent=1) + "\n")
    return summary


def _stats(rows: list[Outcome]) -> dict[str, Any]:
    """Rows, predicted rows, median / max |relative error|, wrong signs, with physics only."""
    errors = [abs(o.relative_error) for o in rows if o.relative_error is not None]
    signs = [o.sign_right for o in rows if o.sign_right is not None]
    ideal = [abs(o.ideal_error) for o in rows if o.ideal_error is not None]
    ideal_signs = [o.ideal_sign_right for o in rows if o.ideal_sign_right is not None]
    return {
        "rows": len(rows),
        "predicted_rows": len(errors),
        "median_abs_relative_error": rounded_median(errors),
        "max_abs_relative_error": round(max(errors), 4) if errors else None,
        "wrong_signs": sum(1 for s in signs if not s),
        "signs_checked": len(signs),
        "ideal_median_abs_relative_error": rounded_median(ideal),
        "ideal_wrong_signs": sum(1 for s in ideal_signs if not s),
    }


def cases_file_name(cases_path: str | Path) -> str:
    """The cases file as the report names it: its folder and name (``validation/cases.toml``
    for the shipped one), the same on every machine."""
    path = Path(cases_path)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    """Per category: rows, predicted rows, median / max |relative error|, wrong signs."""
    summary: dict[str, Any] = {}
    for category in CATEGORIES:
        summary[category] = _stats([o for o in outcomes if o.case.category == category])
    targets: dict[str, Any] = {}
    for label, category, prefixes in TARGETS:
        rows = [
            o for o in outcomes if o.case.category == category and o.case.id.startswith(prefixes)
        ]
        targets[label] = {
            "rows": len(rows),
            "median_abs_relative_error": rounded_median(
                [abs(o.relative_error) for o in rows if o.relative_error is not None]
            ),
            "ideal_median_abs_relative_error": rounded_median(
                [abs(o.ideal_error) for o in rows if o.ideal_error is not None]
            ),
        }
    summary["targets"] = targets
    summary["speculative_by_shape"] = shape_summary(outcomes)
    summary["ttft"] = ttft_summary(outcomes)
    summary["decode_by_engine"] = decode_by_engine(outcomes)
    return summary


def _category_table(stats: dict[str, dict[str, Any]]) -> list[str]:
    """A summary table: per category (:func:`_stats`) rows, predicted rows, median (physics
    only), max, wrong signs (physics only)."""
    lines = [
        "| category | rows | predicted | median abs rel. error (ideal) | max abs rel. error | "
        "wrong sign of speedup − 1 (ideal) |",
        "|---|---|---|---|---|---|",
    ]
    for category, s in stats.items():
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
    return lines


def _not_fitted_lines(summary: dict[str, Any]) -> list[str]:
    """The summary's table of the rows the shipped numbers were not fitted on
    (:func:`.fitted.fitted_on`)."""
    return [
        "",
        "Held out by construction (the shipped presets and kernel constants on the rows they",
        "were not fitted on: test rows, rows called inconsistent, rows of engines without a",
        "fitted preset, and every row of a cases file of one's own):",
        "",
        *_category_table(summary["not_fitted"]),
    ]


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}"


def _signs(wrong: int, checked: int) -> str:
    return f"{wrong} of {checked}" if checked else "—"


def _held_out(held: dict[str, float | None], case_id: str, measured: float) -> str:
    """The out-of-sample prediction's cells ("n/i": not identifiable out of sample)."""
    if case_id not in held:
        return "— | — |"
    value = held[case_id]
    if value is None:
        return "n/i | — |"
    return f"{_fmt(value)} | {value / measured - 1:+.0%} |"


def shape_summary(
    outcomes: list[Outcome], held: dict[str, float | None] | None = None
) -> dict[str, dict[str, Any]]:
    """Speculative rows by draft shape (``chain``: topk 1; ``tree``: SGLang's (steps, topk,
    draft) trees with topk > 1): rows, median |relative error| and wrong signs in sample and,
    given ``held`` (row id -> held-out prediction), out of sample."""
    result: dict[str, dict[str, Any]] = {}
    for shape in ("chain", "tree"):
        rows = [
            o
            for o in outcomes
            if o.case.category == "speculative" and is_tree_row(o.case) == (shape == "tree")
        ]
        errors = [abs(o.relative_error) for o in rows if o.relative_error is not None]
        signs = [o.sign_right for o in rows if o.sign_right is not None]
        entry: dict[str, Any] = {
            "rows": len(rows),
            "median_abs_relative_error": rounded_median(errors),
            "wrong_signs": sum(1 for s in signs if not s),
            "signs_checked": len(signs),
        }
        if held is not None:
            pairs = [(held.get(o.case.id), o.measured) for o in rows]
            known = [(p, m) for p, m in pairs if p is not None]
            out_signs = [speedup_sign_right("speculative", p, m) for p, m in known]
            checked = [x for x in out_signs if x is not None]
            entry["out_of_sample"] = {
                "predicted_rows": len(known),
                "median_abs_relative_error": rounded_median([abs(p / m - 1.0) for p, m in known]),
                "wrong_signs": sum(1 for x in checked if not x),
                "signs_checked": len(checked),
            }
        result[shape] = entry
    return result


def _shape_lines(shapes: dict[str, dict[str, Any]]) -> list[str]:
    def pct(value: float | None) -> str:
        return "—" if value is None else f"{value:.0%}"

    lines = [
        "",
        "By draft shape (chains: topk 1; trees: topk > 1, priced as SGLang's trees):",
        "",
        "| shape | rows | out of sample: median abs rel. error | wrong signs | "
        "in sample: median abs rel. error | wrong signs |",
        "|---|---|---|---|---|---|",
    ]
    for shape, s in shapes.items():
        o = s.get("out_of_sample", {})
        lines.append(
            f"| {shape} | {s['rows']} | {pct(o.get('median_abs_relative_error'))} | "
            f"{_signs(o.get('wrong_signs', 0), o.get('signs_checked', 0))} | "
            f"{pct(s['median_abs_relative_error'])} | "
            f"{_signs(s['wrong_signs'], s['signs_checked'])} |"
        )
    return lines


def report(
    outcomes: list[Outcome],
    cases: CaseFile,
    summary: dict[str, Any],
    preset_fit: dict[str, Any] | None,
    preset_fit_path: Path,
    folds: dict[str, Any] | None = None,
) -> str:
    """REPORT.md text (deterministic: no dates or timings); ``preset_fit`` is the presets' fit
    (read from ``preset_fit_path``, :mod:`simspec.fit.presets`), None when there is none;
    ``folds`` the nested fold table (out-of-sample predictions), None when not run."""
    held = {r["id"]: r["predicted"] for r in folds["rows"]} if folds is not None else {}
    name = summary.get("cases_file", str(CASES_PATH))
    regenerate = REGENERATE if name == CASES_PATH.as_posix() else f"simspec fidelity --cases {name}"
    lines = [
        "# Fidelity report: simspec vs published GPU measurements",
        "",
        f"Written by `simspec fidelity` from `{name}` (every number there cites",
        "its source); do not edit by hand. Method: `simspec/validation/predictions.py`.",
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
        f"Inputs hash (cases file, catalog, pricing and fitting code): `{summary['inputs_hash']}`;",
        f"when it no longer matches, `{regenerate}` regenerates this report.",
        "",
        "## Summary",
        "",
    ]
    oos = summary.get("out_of_sample")
    fitted = sum(summary[c]["rows"] - summary["not_fitted"][c]["rows"] for c in CATEGORIES)
    if not fitted:  # a file the shipped numbers never saw: these are its out-of-sample errors
        lines += [*_not_fitted_lines(summary)[1:], ""]
    if oos is not None:
        intro = (
            [
                "Out of sample first (nested leave-one-group-out, every fitted or chosen quantity",
                "refit without the held-out reporter or source; see *Out of sample* below):",
            ]
            if fitted
            else [
                "Nested leave-one-group-out within this file (every fitted or chosen quantity",
                "refit on the other reporters' rows of this file alone; see *Out of sample*):",
            ]
        )
        lines += [
            *intro,
            "",
            "| category | held-out rows predicted | median abs rel. error | target | max | "
            "wrong sign of speedup − 1 | median of reporter medians (reporters) |",
            "|---|---|---|---|---|---|---|",
        ]
        for category in CATEGORIES:
            o = oos[category]
            med, mx = o["median_abs_relative_error"], o["max_abs_relative_error"]
            balanced = o["median_of_group_medians"]
            lines.append(
                f"| {category} | {o['predicted_rows']} of {o['rows']} | "
                f"{'—' if med is None else f'{med:.0%}'} | ≤ {OOS_TARGETS[category]:.0%} | "
                f"{'—' if mx is None else f'{mx:.0%}'} | "
                f"{_signs(o['wrong_signs'], o['signs_checked'])} | "
                f"{'—' if balanced is None else f'{balanced:.0%}'} ({o['groups_predicted']}) |"
            )
    if lines[-1] == "":  # no table above
        lines.pop()
    if fitted:
        lines += _not_fitted_lines(summary)
        lines += [
            "",
            "In sample (every row with the shipped presets and kernel constants, which were "
            f"fitted on {fitted} of them):",
            "",
            *_category_table({c: summary[c] for c in CATEGORIES}),
        ]
        lines += target_lines(summary["targets"])
        lines += decode_engine_lines(summary["decode_by_engine"])
    else:
        lines += [
            "",
            "The shipped presets and kernel constants were fitted on none of these rows: the",
            "first table (held out by construction) holds every row.",
        ]
    if oos is not None and folds is not None:
        lines += out_of_sample_lines(oos, folds)
    if "presets_out_of_sample" in summary:
        lines += held_out_lines(summary["presets_out_of_sample"])
    titles = {
        "kernel": "Kernel: one MoE layer (µs) at M tokens",
        "decode": "Decode without speculation",
        "speculative": "Speculative decoding: speedup over plain decoding at the same batch",
        "overlap": "Overlap scheduling: a speculative run with the overlap scheduler over without",
    }
    for category, title in titles.items():
        lines += ["", f"## {title}", ""]
        if category == "kernel":
            lines.append(
                "| case | model | GPUs | precision | M | measured | predicted | rel. error | "
                "held out | rel. error |"
            )
            lines.append("|---|---|---|---|---|---|---|---|---|---|")
        elif category == "decode":
            lines.append(
                "| case | model | GPUs | precision | batch | in/out | quantity | measured | "
                "predicted | rel. error | preset | ideal | rel. error | held out | rel. error |"
            )
            lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        elif category == "overlap":
            lines += [
                "Each row is one speculative setting measured with the engine's overlap",
                "scheduler for speculative decoding and without it (SGLang spec v2 against v1);",
                "*host ms* is the time per iteration the overlap hid, AL·B × (1 / slower − 1 /",
                "faster throughput), from the two published numbers. The preset predicts it as",
                "`verify_overhead_s`; the physics-only preset exposes no such time (ratio 1).",
                "",
                "| case | model | GPUs | batch | (steps, topk, draft) | AL | host ms | measured | "
                "predicted | rel. error | preset | ideal | rel. error | held out | rel. error |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
        else:
            lines.append(
                "| case | model | GPUs | batch | (steps, topk, draft) | AL | measured | "
                "predicted | rel. error | sign | preset | ideal | rel. error | held out | "
                "rel. error |"
            )
            lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for o in (o for o in outcomes if o.case.category == category):
            c = o.case
            err = "—" if o.relative_error is None else f"{o.relative_error:+.0%}"
            ierr = "—" if o.ideal_error is None else f"{o.ideal_error:+.0%}"
            ideal = f"{engine_preset(c)} | {_fmt(o.ideal)} | {ierr} |"
            out = _held_out(held, c.id, o.measured)
            prec = c.precision + (f" / experts {c.expert_precision}" if c.expert_precision else "")
            if category == "kernel":
                lines.append(
                    f"| {c.id} | {c.model} | {gpus_label(c)} | {prec} | {c.tokens} | "
                    f"{_fmt(o.measured)} | {_fmt(o.predicted)} | {err} | {out}"
                )
            elif category == "decode":
                lines.append(
                    f"| {c.id} | {c.model} | {gpus_label(c)} | {prec} | {c.batch} | "
                    f"{c.prompt_tokens}/{c.output_tokens} | {c.quantity} | {_fmt(o.measured)} | "
                    f"{_fmt(o.predicted)} | {err} | {ideal} {out}"
                )
            elif category == "overlap":
                lines.append(
                    f"| {c.id} | {c.model} | {gpus_label(c)} | {c.batch} | "
                    f"({c.steps}, {c.topk}, {c.draft_tokens}) | {c.acceptance_length:g} | "
                    f"{c.exposed_host_ms:.2f} | {o.measured:.3f}× | {_fmt(o.predicted)}× | "
                    f"{err} | {ideal} {out}"
                )
            else:
                sign = {None: "—", True: "right", False: "**wrong**"}[o.sign_right]
                if o.sign_right is None and abs(o.measured - 1) <= SIGN_NOISE:
                    sign = f"not meaningful (±{SIGN_NOISE:.0%} of 1)"
                lines.append(
                    f"| {c.id} | {c.model} | {gpus_label(c)} | {c.batch} | "
                    f"({c.steps}, {c.topk}, {c.draft_tokens}) | {c.acceptance_length:g} | "
                    f"{o.measured:.3f}× | {_fmt(o.predicted)}× | {err} | {sign} | {ideal} {out}"
                )
        if category == "speculative":
            lines += _shape_lines(summary["speculative_by_shape"])
        failed = [o for o in outcomes if o.case.category == category and o.error]
        for o in failed:
            lines.append(f"\n- `{o.case.id}` not predicted: {o.error}")
    lines += ttft_lines(outcomes, summary["ttft"])
    lines += step_lines(outcomes)
    lines += iteration_lines(outcomes)
    lines += preset_lines(outcomes, preset_fit, preset_fit_path)
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
