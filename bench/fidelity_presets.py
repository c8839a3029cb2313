"""REPORT.md sections on the engine presets: the targets, the fit's values and residuals.

``bench/fit_presets.py`` writes ``validation/preset_fit.json``; :func:`preset_lines` reads it
and compares the fit's predictions (affine interpolation of probe runs) with the report's own
simulations under the catalog presets, so a stale fit or catalog shows up in the report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simspec import catalog


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def target_lines(targets: dict[str, Any]) -> list[str]:
    """The issue's target series: median |relative error| with presets and physics only."""
    lines = [
        "",
        "Targets (median |relative error| ≤ 15 %; every sign of speedup − 1 right):",
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


def preset_lines(outcomes: list[Any], fit_path: Path) -> list[str]:
    """The *Engine presets* section (values, residuals, leave-one-source-out, inconsistencies)."""
    lines = ["", "## Engine presets", ""]
    if not fit_path.exists():
        return [*lines, f"No fit yet: run `python bench/fit_presets.py --write` ({fit_path})."]
    fit = json.loads(fit_path.read_text(encoding="utf-8"))
    simulated = {o.case.id: o.predicted for o in outcomes}
    lines += [
        "Each engine's overheads were fitted by `python bench/fit_presets.py --write`",
        "(least squares of log(predicted / measured), soft-L1, physical bounds) on its rows",
        "below, except those called inconsistent; `draft_extend_passes` is set by the engine's",
        "design (one EAGLE-3 draft extend per verify in SGLang and vLLM), not fitted. *fit* is the",
        "fit's own prediction (affine in the overheads, from probe simulations), *simulated* this",
        "report's run with the catalog preset: they agree when the fit is current.",
    ]
    inconsistent = []
    for engine, result in fit.items():
        preset = catalog.get_engine(engine).overrides()
        lines += ["", f"### {engine}", "", "| key | fitted | catalog |", "|---|---|---|"]
        for key, value in result["values"].items():
            lines.append(f"| {key} | {value:.3g} | {preset.get(key, float('nan')):.3g} |")
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
