"""A sweep's policies as a Markdown table: TPOT with its 95 % CI, speedup, paired gap to the oracle.

    python -m studies.sweep_table runs/paper-a

Reads the folder's ``summary.csv`` (``simspec sweep``): one row per case and policy, the case
named on its first row, the fixed k with the highest mean speedup marked "(best fixed)". The
paper READMEs quote this table (``tools/docs_numbers.py`` regenerates it).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path


def table(folder: Path) -> str:
    """The Markdown table of ``folder``'s summary.csv (module docstring)."""
    with (folder / "summary.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
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


def main(argv: list[str] | None = None) -> int:
    """Print the table of the sweep folder given as the only argument."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m studies.sweep_table SWEEP_FOLDER", file=sys.stderr)
        return 2
    print(table(Path(args[0])), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
