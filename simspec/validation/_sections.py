"""REPORT.md sections: the targets, the engine presets' fit, the implied step and iteration
times.

:mod:`simspec.fit.presets` writes ``validation/preset_fit.json``; :func:`preset_lines` reads it
and compares the fit's predictions (affine interpolation of probe runs) with the report's own
simulations under the catalog presets, so a stale fit or catalog shows up in the report.
:func:`step_lines` turns every plain-decode series with several batch sizes into time per
decode step and its growth per added request, measured and predicted, so series from different
sources and engines can be compared on one scale; :func:`iteration_lines` does the same for the
speculative rows, as the cost of one draft-and-verify iteration in decode steps.
:func:`ttft_summary` and :func:`ttft_lines` set the median TTFT of the serving-benchmark rows
that publish one against the same runs'.
:func:`decode_by_engine` and :func:`decode_engine_lines` split the plain-decode errors by the
GPU's maker and the engine that ran the row, with the presets and with physics only, so a
reader sees where the physics alone holds and where an engine's own time or a software stack
carries the error.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from simspec import catalog
from simspec.analysis.guardrails import gpu_maker
from simspec.errors import InputError, describe

from .cases import engine_preset


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def rounded_median(values: list[float]) -> float | None:
    """The median to four places, as summary.json holds it (None for no values)."""
    return round(statistics.median(values), 4) if values else None


def gpus_label(case: Any) -> str:
    """A row's GPUs as the report's tables name them, e.g. ``8×h200 TP8 EP8``."""
    ep = f" EP{case.ep}" if case.ep > 1 else ""
    return f"{case.num_gpus}×{case.gpu} TP{case.tp}{ep}"


def target_lines(targets: dict[str, Any]) -> list[str]:
    """The issue's target series: median |relative error| with presets and physics only."""
    lines = [
        "",
        "Target series in sample (the shipped presets; median |relative error| ≤ 15 %):",
        "",
        "| series | rows | median abs rel. error | ideal |",
        "|---|---|---|---|",
    ]
    for label, t in targets.items():
        lines.append(
            f"| {label} | {t['rows']} | {_pct(t['median_abs_relative_error'])} | "
            f"{_pct(t['ideal_median_abs_relative_error'])} |"
        )
    return lines


#: Quantities that are rates (higher is faster); the others are times (lower is faster).
RATES = ("tokens_per_s", "tokens_per_s_per_user", "speedup")


def decode_by_engine(outcomes: list[Any]) -> dict[str, Any]:
    """Plain-decode rows grouped by the GPU's maker (of its catalog name:
    :func:`~simspec.analysis.guardrails.gpu_maker`) and the engine preset of the row: rows,
    median |relative error| with the preset and with physics only, and how many physics-only
    predictions are faster than the measurement (a shorter time, a higher rate)."""
    groups: dict[str, list[Any]] = {}
    for o in outcomes:
        if o.case.category != "decode":
            continue
        maker = gpu_maker(catalog.get_gpu(o.case.gpu).display_name)
        groups.setdefault(f"{maker} / {engine_preset(o.case)}", []).append(o)
    table: dict[str, Any] = {}
    for key, rows in sorted(groups.items()):
        ideal = [o for o in rows if o.ideal is not None]
        faster = sum(
            1
            for o in ideal
            if (o.ideal > o.measured if o.case.quantity in RATES else o.ideal < o.measured)
        )
        table[key] = {
            "rows": len(rows),
            "median_abs_relative_error": rounded_median(
                [abs(o.relative_error) for o in rows if o.relative_error is not None]
            ),
            "ideal_median_abs_relative_error": rounded_median([abs(o.ideal_error) for o in ideal]),
            "ideal_faster_than_measured": faster,
        }
    return table


def decode_engine_lines(table: dict[str, Any]) -> list[str]:
    """REPORT.md's table of :func:`decode_by_engine`."""
    lines = [
        "",
        "Plain decode by GPU maker and engine (in sample; *ideal*: physics only, no engine term;",
        "*faster*: physics-only predictions faster than the measurement):",
        "",
        "| GPU maker / engine | rows | median abs rel. error | ideal | faster |",
        "|---|---|---|---|---|",
    ]
    for key, t in table.items():
        lines.append(
            f"| {key} | {t['rows']} | {_pct(t['median_abs_relative_error'])} | "
            f"{_pct(t['ideal_median_abs_relative_error'])} | "
            f"{t['ideal_faster_than_measured']} of {t['rows']} |"
        )
    return lines


def read_preset_fit(path: Path) -> dict[str, Any] | None:
    """The presets' fit (``preset_fit.json``), or None when there is none yet."""
    if not path.exists():
        return None
    try:
        fit = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InputError(str(path), "", "the presets' fit (JSON)", str(err)) from None
    if not isinstance(fit, dict):
        raise InputError(str(path), "", "a JSON object, one entry per engine", describe(fit))
    return fit


def held_out_summary(fit: dict[str, Any]) -> dict[str, Any]:
    """Out-of-sample errors of the presets: per engine, over its sources left out one at a time.

    ``median_of_source_medians`` and ``worst_source_median`` summarise the median |relative
    error| of each held-out source's rows under the preset fitted without that source.
    """
    out = {}
    for engine, result in fit.items():
        scored = [
            item["median_abs_relative_error"]
            for item in result["leave_one_source_out"]
            if "median_abs_relative_error" in item
        ]
        out[engine] = {
            "in_sample_median_abs_relative_error": round(result["median_abs_relative_error"], 4),
            "held_out_sources": len(scored),
            "median_of_source_medians": round(statistics.median(scored), 4) if scored else None,
            "worst_source_median": round(max(scored), 4) if scored else None,
        }
    return out


def held_out_lines(held_out: dict[str, Any]) -> list[str]:
    """The presets' in-sample and out-of-sample errors, one row per engine."""
    lines = [
        "",
        "Engine presets alone in and out of sample (median |relative error| of the fitted rows;",
        "each source left out in turn and only the preset's overheads refitted without it, the",
        "labels, rank decay and benchmark spread kept: a partial check, see *Out of sample*):",
        "",
        "| engine | in sample | held-out sources | median of their medians | worst |",
        "|---|---|---|---|---|",
    ]
    for engine, h in held_out.items():
        lines.append(
            f"| {engine} | {_pct(h['in_sample_median_abs_relative_error'])} | "
            f"{h['held_out_sources']} | {_pct(h['median_of_source_medians'])} | "
            f"{_pct(h['worst_source_median'])} |"
        )
    return lines


def preset_lines(outcomes: list[Any], fit: dict[str, Any] | None, fit_path: Path) -> list[str]:
    """The *Engine presets* section (values, residuals, leave-one-source-out, inconsistencies)."""
    lines = ["", "## Engine presets", ""]
    if fit is None:
        return [*lines, f"No fit yet: run `simspec fidelity --fit-presets` ({fit_path})."]
    simulated = {o.case.id: o.predicted for o in outcomes}
    lines += [
        "Each engine's overheads were fitted by `simspec fidelity --fit-presets`",
        "(least squares of log(predicted / measured), soft-L1, physical bounds) on its rows",
        "below, except those called inconsistent; `draft_extend_passes` is set by the engine's",
        "design (one EAGLE-3 draft extend per verify in SGLang and vLLM), not fitted, and a",
        "term marked *measured* is the largest of its direct measurements (SGLang's",
        "`verify_overhead_s`: the host time its overlap scheduler for speculation was measured",
        "to hide, the overlap rows of this report and sglang PR #11398;",
        "`simspec.fit.presets.MEASURED`), not fitted either. *fit* is the fit's own prediction",
        "(affine in the overheads, from probe simulations), *simulated* this report's run with",
        "the catalog preset: they agree when the fit is current.",
    ]
    inconsistent = []
    for engine, result in fit.items():
        preset = catalog.get_engine(engine).overrides()
        lines += ["", f"### {engine}", "", "| key | fitted | catalog |", "|---|---|---|"]
        measured = set(result.get("measured_terms", ()))
        for key, value in result["values"].items():
            how = " (measured)" if key in measured else ""
            lines.append(f"| {key} | {value:.3g}{how} | {preset.get(key, float('nan')):.3g} |")
        drift = [
            abs(simulated[row["id"]] / row["predicted"] - 1)
            for row in result["rows"]
            if simulated.get(row["id"]) is not None
        ]
        lines += [
            "",
            f"Fitted on {result['fitted_rows']} rows; median |relative error| of those rows "
            f"{_pct(result['median_abs_relative_error'])}; largest |simulated / fit − 1| "
            f"{max(drift, default=0.0):.1e}.",
            "",
            "| row | measured | fit | rel. error | simulated | fitted |",
            "|---|---|---|---|---|---|",
        ]
        for row in result["rows"]:
            sim = simulated.get(row["id"])
            lines.append(
                f"| {row['id']} | {row['measured']:.4g} | {row['predicted']:.4g} | "
                f"{row['relative_error']:+.0%} | {'—' if sim is None else f'{sim:.4g}'} | "
                f"{'yes' if row['fitted'] else '**no**'} |"
            )
            if row["inconsistent"]:
                inconsistent.append((row["id"], row["inconsistent"]))
        lines += [
            "",
            "Leave one source out (fit without the source, predict its rows):",
            "",
            "| held-out source | rows | median abs rel. error | max | values without it |",
            "|---|---|---|---|---|",
        ]
        for item in result["leave_one_source_out"]:
            if "note" in item:
                lines.append(f"| {item['source']} | {item['rows']} | — | — | {item['note']} |")
                continue
            values = ", ".join(f"{k} {v:.3g}" for k, v in item["values"].items())
            lines.append(
                f"| {item['source']} | {item['rows']} | "
                f"{_pct(item['median_abs_relative_error'])} | "
                f"{_pct(item['max_abs_relative_error'])} | {values} |"
            )
    lines += ["", "### Rows called inconsistent (predicted, not fitted)", ""]
    lines += [f"- `{row}`: {reason}." for row, reason in inconsistent]
    return lines


def step_ms(case: Any, value: float) -> float | None:
    """Time per decode step (ms) a decode row's number implies; None where it implies none.

    TPOT is the step; per-user tok/s is its inverse; a whole-batch tok/s over B running
    requests is B / rate (B capped at the benchmark's request count, ``num_requests``). A
    benchmark's throughput includes its ramp-down tail, and a serving benchmark's TPOT the
    prefills of the requests that replace finished ones, so their implied steps are upper
    bounds.
    """
    if case.quantity == "tpot_ms":
        return value
    if case.quantity == "tokens_per_s_per_user":
        return 1000.0 / value
    if case.quantity == "tokens_per_s":
        running = min(case.batch, case.num_requests) if case.num_requests else case.batch
        return 1000.0 * running / value
    return None


def step_lines(outcomes: list[Any]) -> list[str]:
    """Implied step time vs batch for every decode series with several batch sizes."""
    series: dict[str, list[Any]] = {}
    for o in outcomes:
        c = o.case
        if c.category != "decode" or o.predicted is None or step_ms(c, o.measured) is None:
            continue
        series.setdefault(c.id.split("[")[0], []).append(o)
    lines = [
        "",
        "## Implied time per decode step",
        "",
        "Every plain-decode series with two or more batch sizes, as time per decode step (TPOT;",
        "B / whole-batch throughput, B capped at a benchmark's request count) and its growth per",
        "added running request between neighbouring batch sizes, measured and predicted.",
        "",
        "| series | engine | source | batch | step ms measured | predicted | growth µs per "
        "request measured | predicted |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, rows in series.items():
        rows = [o for o in rows if len({o.case.batch for o in rows}) > 1]
        if not rows:
            continue
        rows.sort(key=lambda o: o.case.batch)
        batches = [o.case.batch for o in rows]
        meas = [step_ms(o.case, o.measured) for o in rows]
        pred = [step_ms(o.case, o.predicted) for o in rows]
        running = [
            min(o.case.batch, o.case.num_requests) if o.case.num_requests else o.case.batch
            for o in rows
        ]

        c = rows[0].case
        lines.append(
            f"| {key} | {c.engine} | {c.source} | {' / '.join(map(str, batches))} | "
            f"{' / '.join(f'{m:.2f}' for m in meas)} | {' / '.join(f'{p:.2f}' for p in pred)} | "
            f"{_growth(meas, running)} | {_growth(pred, running)} |"
        )
    return lines


def iteration_steps(acceptance_length: float, speedup: float) -> float:
    """Decode steps one draft-and-verify iteration costs, as a row's speedup implies it.

    A speculative run commits ``acceptance_length`` tokens per iteration where plain decoding
    commits one per step, so speedup = AL · step / iteration and iteration / step = AL /
    speedup: the speedup exceeds 1 exactly when an iteration costs fewer steps than its AL.
    Measured and predicted on one scale that holds no model, so rows of one model and setting
    from different reporters can be set side by side.
    """
    return acceptance_length / speedup


def iteration_lines(outcomes: list[Any]) -> list[str]:
    """Implied iteration cost of every speculative row (:func:`iteration_steps`), grouped by
    model, reporter, GPUs, engine and batch: the median (and range) measured, with the row's
    preset and with physics only, and the group's wrong signs of speedup − 1."""
    groups: dict[tuple[str, str, str, str, int], list[Any]] = {}
    for o in outcomes:
        c = o.case
        if c.category != "speculative" or o.predicted is None or not c.acceptance_length:
            continue
        key = (c.model, c.reporter, gpus_label(c), c.engine, c.batch)
        groups.setdefault(key, []).append(o)
    if not groups:
        return []
    lines = [
        "",
        "## Implied cost of a speculative iteration",
        "",
        "Every speculative row as the decode steps one draft-and-verify iteration costs: AL /",
        "speedup (a speedup above 1 exactly when the iteration costs fewer steps than its AL),",
        "measured and predicted, grouped by model, reporter, GPUs, engine and batch (median,",
        "and the range over the group's settings). The measured column holds no model: groups",
        "of one model at like settings that imply very different costs disagree with each",
        "other, whatever prices them.",
        "",
        "| model | reporter | GPUs | engine | batch | rows | AL | measured steps | predicted |"
        " ideal | wrong signs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups):
        rows = groups[key]
        model, reporter, gpus, engine, batch = key
        measured = [iteration_steps(o.case.acceptance_length, o.measured) for o in rows]
        predicted = [iteration_steps(o.case.acceptance_length, o.predicted) for o in rows]
        ideal = [iteration_steps(o.case.acceptance_length, o.ideal) for o in rows if o.ideal]
        al = [o.case.acceptance_length for o in rows]
        wrong = sum(1 for o in rows if o.sign_right is False)
        lines.append(
            f"| {model} | {reporter} | {gpus} | {engine} | {batch} | {len(rows)} | "
            f"{_spread(al)} | {_spread(measured)} | {_spread(predicted)} | {_spread(ideal)} | "
            f"{wrong} |"
        )
    return lines


def _spread(values: list[float]) -> str:
    """``median [min-max]`` to two places (the median alone for one value, "—" for none)."""
    if not values:
        return "—"
    mid = f"{statistics.median(values):.2f}"
    low, high = min(values), max(values)
    return mid if low == high else f"{mid} [{low:.2f}-{high:.2f}]"


def _growth(steps: list[Any], running: list[int]) -> str:
    """µs of step time per added running request between neighbouring rows ("—": none added)."""
    out = []
    for i in range(1, len(steps)):
        db = running[i] - running[i - 1]
        out.append("—" if db <= 0 else f"{1000.0 * (steps[i] - steps[i - 1]) / db:.0f}")
    return " / ".join(out)


def ttft_summary(outcomes: list[Any]) -> dict[str, Any]:
    """The rows that publish a median TTFT: how many, and the median |relative error| of the
    same runs' median TTFT with the rows' presets and with physics only (no term of any
    preset was fitted on a TTFT, so every row is held out)."""
    pairs = [o.ttft_errors for o in outcomes if o.case.ttft_ms]
    preset = [abs(p) for p, _ in pairs if p is not None]
    ideal = [abs(i) for _, i in pairs if i is not None]
    return {
        "rows": len(pairs),
        "predicted_rows": len(preset),
        "median_abs_relative_error": rounded_median(preset),
        "ideal_median_abs_relative_error": rounded_median(ideal),
        "predicted_below_measured": sum(1 for p, _ in pairs if p is not None and p < 0),
    }


def ttft_lines(outcomes: list[Any], summary: dict[str, Any]) -> list[str]:
    """REPORT.md's TTFT section (:func:`ttft_summary`): one line per row that publishes one."""
    rows = [o for o in outcomes if o.case.ttft_ms]
    if not rows:
        return []
    lines = [
        "",
        "## Time to first token (serving-benchmark rows)",
        "",
        f"{summary['rows']} decode rows also publish their run's median TTFT, which no fit has",
        "seen: the same runs' median TTFT, with the row's preset and with physics only, is set",
        "against it (median |relative error| "
        f"{_pct(summary['median_abs_relative_error'])}, physics only "
        f"{_pct(summary['ideal_median_abs_relative_error'])}; "
        f"{summary['predicted_below_measured']} of {summary['predicted_rows']} predicted below "
        "the measurement). The measured TTFT also holds what the simulator leaves out: the",
        "client's request and tokenisation, and the wait for the decode step in flight.",
        "",
        "| case | GPUs | batch | in/out | measured ms | predicted | rel. error | ideal | "
        "rel. error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in rows:
        c = o.case
        preset, ideal = o.ttft_errors
        cells = [
            "—" if v is None else f"{v:.1f} | {e:+.0%}"
            for v, e in ((o.ttft, preset), (o.ideal_ttft, ideal))
        ]
        lines.append(
            f"| {c.id} | {gpus_label(c)} | {c.batch} | {c.prompt_tokens}/{c.output_tokens} | "
            f"{c.ttft_ms:g} | {cells[0]} | {cells[1]} |"
        )
    return lines
