"""The sentences paper B's README draws from its sweeps, printed so they are regenerated.

    python -m studies.paper_b findings runs/prior runs/full
    python -m studies.paper_b ablation

``findings`` reads the two sweep folders of ``scenarios/papers/why-sd-works-better`` (prior-work
variant, full model) and prints one bullet per statement the README makes about them: the
prior variant's speedup range for the fine-grained models (>= 128 experts) at batch <= 8, the
full model's batch-1 speedups from largest to smallest, and which fine-grained curves dip (batch
1 above batch 8). ``ablation`` runs two models at batch 1 (16 requests) with each difference
between the two variants switched on alone on top of the prior variant, and prints their
speedups. ``tools/docs_numbers.py`` runs both, so the README's numbers are what the code prints.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "scenarios/papers/why-sd-works-better"
#: Experts at or above which a model counts as fine-grained.
FINE_EXPERTS = 128
#: The models of the ablation (a fine-grained and a coarse one) and its batch.
ABLATION_CASES = ("Qwen3-30B-A3B (128)", "Mixtral-8x7B (8 experts)")
ABLATION_REQUESTS = 16


def _speedups(folder: Path) -> dict[str, dict[int, float]]:
    """case -> concurrency -> speedup of the folder's one speculative policy."""
    out: dict[str, dict[int, float]] = {}
    with (folder / "summary.csv").open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row["policy"] in ("no-spec", "oracle"):
                continue
            batch = int(float(row["workload.concurrency"]))
            out.setdefault(row["case"], {})[batch] = float(row["speedup_vs_no_spec"])
    return out


def _experts(case: str) -> int:
    """The expert count a case label states: "Qwen3-30B-A3B (128)" -> 128."""
    inside = case.rsplit("(", 1)[-1].split()[0].rstrip(")")
    return int(inside)


def _gpus() -> dict[str, int]:
    """case label -> the GPUs it runs on (the study's cases)."""
    from simspec.config.load import read_scenario_data

    data, _ = read_scenario_data(STUDY / "full.toml")
    return {c["label"]: int(c.get("hardware.num_gpus", 1)) for c in data["sweep"]["cases"]}


def findings(prior: Path, full: Path) -> str:
    """The README's statements about the two sweeps (module docstring)."""
    a, b = _speedups(prior), _speedups(full)
    gpus = _gpus()
    fine = [case for case in a if _experts(case) >= FINE_EXPERTS]

    def low_batch(cases: list[str]) -> str:
        values = [s for case in cases for batch, s in a[case].items() if batch <= 8]
        return f"{min(values):.2f}-{max(values):.2f}x"

    one = [case for case in fine if gpus[case] == 1]
    many = [case for case in fine if gpus[case] > 1]
    ranked = sorted(b, key=lambda case: b[case][1], reverse=True)
    dips = [case for case in fine if b[case][1] > b[case][8]]
    lines = [
        f"- prior-work variant, fine-grained models (>= {FINE_EXPERTS} experts) at batch <= 8: "
        f"on one GPU {low_batch(one)}, on {min(gpus[c] for c in many)}-"
        f"{max(gpus[c] for c in many)} GPUs {low_batch(many)}",
        "- full model at batch 1, largest first: "
        + ", ".join(f"{case} {b[case][1]:.2f}x" for case in ranked),
        f"- full model, fine-grained curves with batch 1 above batch 8: {len(dips)} of {len(fine)}",
    ]
    return "\n".join(lines) + "\n"


def _ablation_speedup(case: dict[str, Any], terms: dict[str, Any]) -> float:
    """Batch-1 speedup of one case of the prior variant with ``terms`` (scenario tables that
    replace the prior variant's) switched on."""
    import simspec
    from simspec.config.load import read_scenario_data, scenario_from_dict

    data, _ = read_scenario_data(STUDY / "prior.toml")
    data = {k: v for k, v in data.items() if k != "sweep"}
    for table, values in terms.items():
        data[table] = {**data.get(table, {}), **values} if table != "hardware" else values
    scenario = scenario_from_dict(data, str(STUDY / "prior.toml"), base_dir=STUDY)
    overrides = {k: v for k, v in case.items() if k != "label"}
    overrides |= {"workload.concurrency": 1, "workload.num_requests": ABLATION_REQUESTS}
    result = simspec.run(simspec.with_overrides(scenario, overrides))
    return next(r for r in result.policies if not r.is_baseline).speedup_vs_no_spec


def ablation() -> str:
    """Batch-1 speedups with each difference of the full model alone (module docstring)."""
    from simspec.config.load import read_scenario_data

    full, _ = read_scenario_data(STUDY / "full.toml")
    cases = {c["label"]: c for c in full["sweep"]["cases"]}
    overlap = {"routing": {"overlaps": full["routing"]["overlaps"]}}
    kernel = {"costs": {"moe_kernel": "launch"}}
    floors = {"hardware": full["hardware"]}  # the catalog GPU, its kernel floors on
    terms = {
        "prior": {},
        "+ overlap": overlap,
        "+ launch MoE kernel": kernel,
        "+ kernel floors": floors,
        "all three (the full model)": overlap | kernel | floors,
    }
    lines = []
    for label in ABLATION_CASES:
        cells = [f"{name} {_ablation_speedup(cases[label], t):.2f}x" for name, t in terms.items()]
        lines.append(f"- {label}, batch 1: " + "; ".join(cells))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the findings or the ablation (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    found = sub.add_parser("findings")
    found.add_argument("prior", type=Path)
    found.add_argument("full", type=Path)
    sub.add_parser("ablation")
    args = parser.parse_args(argv)
    print(findings(args.prior, args.full) if args.what == "findings" else ablation(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
