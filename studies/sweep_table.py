"""Markdown tables of sweeps that the paper READMEs quote (``tools/docs_numbers.py``).

    python -m studies.sweep_table runs/paper-a
    python -m studies.sweep_table --by-batch runs/prior runs/full --labels "(a) prior,(b) full"
    python -m studies.sweep_table --findings runs/paper-a

The first form: one row per case and policy of the folder's ``summary.csv`` (``simspec
sweep``): TPOT with its 95 % CI, the speedup over no speculation and the paired gap to the
oracle, the case named on its first row and the fixed k with the highest mean speedup marked
"(best fixed)". ``--by-batch``: one row per case, one column per folder holding the speedups of
its one speculative policy at each ``workload.concurrency``, in increasing order.
``--findings``: per case, the sentences paper A's README draws from the table (the best fixed
k's speedup against the oracle's; the cost-aware rule against the best fixed k and the share of
their TPOT gap to the oracle it closes), so the prose's numbers are regenerated with the table.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path


def table(folder: Path) -> str:
    """The Markdown table of ``folder``'s summary.csv (module docstring)."""
    rows = _summary(folder)
    lines = [
        "| model | policy | TPOT ms | speedup | vs oracle (ms) |",
        "|---|---|---|---|---|",
    ]
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case]
        fixed = [r for r in mine if r["policy"].startswith("fixed-")]
        best = max(fixed, key=lambda r: float(r["speedup_vs_no_spec"]))["policy"] if fixed else ""
        for n, r in enumerate(mine):
            policy = r["policy"] + (" (best fixed)" if r["policy"] == best else "")
            tpot = f"{float(r['tpot_ms']):.3f} ± {float(r['tpot_ms_ci95']):.3f}"
            if r["policy"] == "oracle":
                gap = "0"
            else:
                diff, ci = (
                    float(r["tpot_diff_vs_oracle_ms"]),
                    float(r["tpot_diff_vs_oracle_ci95_ms"]),
                )
                gap = f"{diff:+.3f} ± {ci:.3f}"
            speedup = f"{float(r['speedup_vs_no_spec']):.3f}"
            lines.append(f"| {case if n == 0 else ''} | {policy} | {tpot} | {speedup} | {gap} |")
    return "\n".join(lines) + "\n"


def findings(folder: Path) -> str:
    """The README's sentences about ``folder``'s table, one bullet per case (module docstring)."""
    rows = _summary(folder)
    lines = []
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = {r["policy"]: r for r in rows if r["case"] == case}
        fixed = [p for p in mine if p.startswith("fixed-")]
        if not fixed or "oracle" not in mine:
            continue
        best = max(fixed, key=lambda p: float(mine[p]["speedup_vs_no_spec"]))
        gain = {p: float(mine[p]["speedup_vs_no_spec"]) for p in (best, "oracle")}
        text = (
            f"- {case}: the best fixed k ({best}) gains {gain[best]:.2f}x against the oracle's"
            f" {gain['oracle']:.2f}x"
        )
        if "cost_aware" in mine:
            tpot = {p: float(mine[p]["tpot_ms"]) for p in (best, "cost_aware", "oracle")}
            closed = (tpot[best] - tpot["cost_aware"]) / (tpot[best] - tpot["oracle"])
            text += (
                f"; cost_aware {tpot['cost_aware']:.3f} ms vs {tpot[best]:.3f} ms, closing"
                f" {100 * closed:.0f} % of the best fixed k's TPOT gap to the oracle"
            )
        lines.append(text + ".")
    return "\n".join(lines) + "\n"


def _summary(folder: Path) -> list[dict[str, str]]:
    with (folder / "summary.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def by_batch(folders: list[Path], labels: list[str], first: str = "model (experts)") -> str:
    """Speedups of each folder's speculative policy by batch size, one row per case."""
    tables = [_summary(folder) for folder in folders]
    lines = [f"| {first} | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for case in dict.fromkeys(r["case"] for r in tables[0]):
        cells = []
        for rows in tables:
            mine = [
                r for r in rows if r["case"] == case and r["policy"] not in ("no-spec", "oracle")
            ]
            mine.sort(key=lambda r: float(r["workload.concurrency"]))
            cells.append(" ".join(f"{float(r['speedup_vs_no_spec']):.2f}" for r in mine))
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the table of the sweep folder(s) given (module docstring)."""
    import argparse

    parser = argparse.ArgumentParser(description="Markdown tables of sweep folders.")
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--by-batch", action="store_true", help="speedups by batch size")
    parser.add_argument("--labels", default="", help="column labels, comma-separated")
    parser.add_argument("--findings", action="store_true", help="the README's sentences")
    args = parser.parse_args(argv)
    if args.by_batch:
        labels = args.labels.split(",") if args.labels else [str(f) for f in args.folders]
        print(by_batch(args.folders, labels), end="")
    else:
        for folder in args.folders:
            print(findings(folder) if args.findings else table(folder), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
