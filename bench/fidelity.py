"""Regenerate the fidelity numbers and print them, out of sample first.

    python bench/fidelity.py [--workers N] [--no-refit]

From the repository root: refits the engine presets on the published rows (writing
``validation/preset_fit.json`` and ``simspec/catalog/engines/*.toml``; ``--no-refit`` keeps
them), holds every reporter (else source) out in turn with everything fitted or chosen refit
without it, predicts every row and writes ``validation/REPORT.md``, ``validation/summary.json``
and ``validation/folds.json``, and each engine preset's out-of-sample errors to
``simspec/catalog/accuracy.json`` (``simspec fidelity``). Then prints the out-of-sample and
in-sample table against issue 27's targets (and issue 29's offload rows,
``validation/offload.toml``), and the wall time of each stage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's simspec, whichever one is installed

from simspec.cli import main as simspec_main  # noqa: E402
from simspec.validation import CATEGORIES  # noqa: E402


def table(summary: dict) -> str:
    """Out-of-sample and in-sample medians per category, with the targets."""
    oos = summary["out_of_sample"]
    lines = [
        f"{'category':<12} {'out of sample':>14} {'target':>7} {'max':>6} {'wrong signs':>12} "
        f"{'rows':>9} {'in sample':>10}",
    ]
    for category in CATEGORIES:
        o, i = oos[category], summary[category]
        med = o["median_abs_relative_error"]
        mx = o["max_abs_relative_error"]
        lines.append(
            f"{category:<12} {'-' if med is None else f'{med:.1%}':>14} "
            f"{oos['targets'][category]:>7.0%} {'-' if mx is None else f'{mx:.0%}':>6} "
            f"{o['wrong_signs']:>5} of {o['signs_checked']:<4} "
            f"{o['predicted_rows']:>4}/{o['rows']:<4} {i['median_abs_relative_error']:>10.1%}"
        )
    for engine, e in oos["engines"].items():
        if "note" in e:
            lines.append(f"{engine}: {e['note']}")
    unseen = summary["not_fitted"]  # rows the shipped presets and kernel constants never saw
    parts = []
    for category, u in unseen.items():
        med = u["median_abs_relative_error"]
        parts.append(f"{category} {'-' if med is None else f'{med:.1%}'} on {u['rows']}")
    lines.append(
        "held out by construction (not fitted by the shipped numbers): " + ", ".join(parts)
    )
    off = summary.get("offload")
    if off is not None:  # validation/offload.toml: expert offloading, held-out rows first
        held, hits = off["held_out"], off["hit_rate_max_abs_points"]
        med = held["median_abs_relative_error"]
        order = off["order_right"]
        loro = off.get("out_of_sample")
        if loro is not None:
            lmed = loro["median_abs_relative_error"]
            lines.append(
                f"offload out of sample (leave one reporter out): "
                f"{'-' if lmed is None else f'{lmed:.1%}'} on {loro['predicted_rows']}/"
                f"{loro['rows']} rows"
            )
        lines.append(
            f"offload: held out {'-' if med is None else f'{med:.1%}'} (target "
            f"{off['targets']['held_out_median']:.0%}) on {held['predicted_rows']}/"
            f"{held['rows']} rows; configurations in order {sum(1 for v in order.values() if v)}"
            f" of {len(order)} series; hit rates within "
            f"{'-' if hits is None else f'{hits:.0f}'} points (target 10)"
        )
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-refit", action="store_true", help="keep the shipped presets")
    args = parser.parse_args(argv)
    command = [
        "fidelity",
        "--cases",
        str(ROOT / "validation" / "cases.toml"),
        "--out",
        str(ROOT / "validation"),
        "--workers",
        str(args.workers),
        "--accuracy",
        str(ROOT / "simspec" / "catalog" / "accuracy.json"),
    ]
    if not args.no_refit:
        command += ["--fit-presets", "--catalog", str(ROOT / "simspec" / "catalog" / "engines")]
    start = time.perf_counter()
    code = simspec_main(command)
    if code:
        return code
    summary = json.loads((ROOT / "validation" / "summary.json").read_text(encoding="utf-8"))
    print(table(summary))
    print(f"wall time {time.perf_counter() - start:.0f} s on {args.workers} workers")
    return 0


if __name__ == "__main__":
    sys.exit(run())
