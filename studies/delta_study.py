"""When is paper A's Delta-space boundary strict? The falsifiable analysis over a study grid.

For each cell the oracle of the paper-A scenario (scenarios/limits-of-speculation.toml) is
solved and its candidate extensions analysed (simspec.analysis.delta): the best line through the
origin ΔE[cost] = λ·ΔE[a], λ against the oracle's cost per committed token g, the misclassified
fraction (and as a share of the no-line error), the margin, the AUC, the local condition on all
extensions, and the two controls (random cost tables, shuffled labels). Grid:

* batch size 1 (exact oracle) vs 4 (closed loop; marginal-cost attribution DP, analysed only
  when a DP plan beats every fixed k, otherwise the oracle has no per-state plan);
* bursty code-like acceptance (the scenario's) vs i.i.d. at the bursty process's stationary
  mean acceptance (0.615·0.9 + 0.385·0.35 = 0.69);
* short (100) vs long (400) output tokens;
* the MoE target (Qwen3-Coder-30B-A3B + EAGLE-3) vs a dense one (Qwen3-8B + EAGLE-3).

Columns: lambda_ms (best line), g_ms (oracle cost per committed token), miscl% (misclassified),
/trivial (misclassified / the error of labelling every point with the majority class), margin%
(half the gap at the threshold, % of lambda), AUC (of the ratio), AUC(a) (of ΔE[a] alone, no
cost axis), to1st% (states where the oracle drafts exactly up to the first rejected draft,
min(m_i, K)), local% (local condition violated, all extensions); then the random-cost-table
control and the shuffled-label control (p: permutation p-value, 200 shuffles, floor 0.005).

    python -m studies.delta_study [--workers 2]

About 10 s on this project's 2-core machine (3 minutes before the oracle's tables were vectorised).
"""

from __future__ import annotations

import argparse
import itertools
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from simspec import rng
from simspec.analysis import delta, oracle
from simspec.config.load import read_scenario_data, scenario_from_dict
from simspec.sim.setup import build_setup

PAPER_A = Path(__file__).resolve().parents[1] / "scenarios" / "limits-of-speculation.toml"
TARGETS = {
    "MoE": ("qwen3-coder-30b-a3b", "eagle3-qwen3-coder-30b-a3b"),
    "dense": ("qwen3-8b", "eagle3-qwen3-8b"),
}
IID_ALPHA = 0.69


def cell(target: str, batch: int, process: str, output_tokens: int) -> dict[str, Any]:
    """Solve one cell's oracle and analyse its Delta space."""
    data, _ = read_scenario_data(PAPER_A)
    data["model"] = {"target": TARGETS[target][0], "drafter": TARGETS[target][1]}
    if process == "iid":
        conc = data["acceptance"]["confidence_concentration"]
        data["acceptance"] = {
            "process": "iid",
            "alpha": IID_ALPHA,
            "confidence_concentration": conc,
        }
    data["workload"].update(
        concurrency=batch, num_requests=6 if batch == 1 else 8, output_tokens=output_tokens
    )
    data["policies"] = [{"name": "fixed", "draft_tokens": 0}]
    scenario = scenario_from_dict(data, str(PAPER_A))
    start = time.perf_counter()
    found = oracle.oracle_plan(build_setup(scenario, oracle=True))
    summary: dict[str, Any] = {}
    if found.tables:
        _, summary = delta.analyse(found.tables, rng.stream(scenario.seed, "delta_control"))
    return {
        "target": target,
        "batch": batch,
        "process": process,
        "output_tokens": output_tokens,
        "method": found.method.split("chosen: ")[-1] if not found.exact else "exact DP",
        "wall_s": time.perf_counter() - start,
        **summary,
    }


def _fmt(row: dict[str, Any], key: str, scale: float = 1.0, spec: str = ".1f") -> str:
    v = row.get(key)
    return "-" if v is None else format(v * scale, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    grid = list(itertools.product(TARGETS, (1, 4), ("bursty", "iid"), (100, 400)))
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(cell, *zip(*grid, strict=True)))
    header = (
        "target  B  accept  out  points chosen%  lambda_ms  g_ms  lam/g  miscl%  /trivial  "
        "margin%  AUC  AUC(a) to1st%  local%  "
        "| random: miscl% /trivial AUC local% | shuffled miscl% p"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        if "points" not in r:
            print(
                f"{r['target']:<6} {r['batch']:>2}  {r['process']:<6} {r['output_tokens']:>4}  "
                f"no per-state plan: {r['method']} won"
            )
            continue
        print(
            f"{r['target']:<6} {r['batch']:>2}  {r['process']:<6} {r['output_tokens']:>4}  "
            f"{r['points']:>6} {100 * r['chosen'] / r['points']:>6.1f}  "
            f"{_fmt(r, 'fitted_slope_s_per_token', 1e3, '.3f'):>9} "
            f"{_fmt(r, 'oracle_time_per_token_s', 1e3, '.3f'):>6} "
            f"{_fmt(r, 'slope_over_oracle_cost', 1, '.2f'):>5}  "
            f"{_fmt(r, 'misclassified_fraction', 100):>6}  "
            f"{_fmt(r, 'misclassified_over_trivial', 1, '.2f'):>8}  "
            f"{_fmt(r, 'margin_rel', 100, '.3f'):>7}  {_fmt(r, 'auc', 1, '.3f'):>5} "
            f"{_fmt(r, 'auc_progress_only', 1, '.3f'):>6} "
            f"{_fmt(r, 'drafts_to_first_rejection_fraction', 100):>6} "
            f"{_fmt(r, 'local_condition_violation_fraction', 100):>6}  | "
            f"{_fmt(r, 'control_random_tables_misclassified_fraction', 100):>13} "
            f"{_fmt(r, 'control_random_tables_misclassified_over_trivial', 1, '.2f'):>8} "
            f"{_fmt(r, 'control_random_tables_auc', 1, '.3f'):>5} "
            f"{_fmt(r, 'control_random_tables_local_condition_violation_fraction', 100):>6} | "
            f"{_fmt(r, 'control_permutation_misclassified_fraction', 100):>15} "
            f"{_fmt(r, 'control_permutation_p_value', 1, '.3f')}"
        )
    print(
        f"\n{len(rows)} cells in {time.perf_counter() - start:.0f} s wall "
        f"({sum(r['wall_s'] for r in rows):.0f} s of oracle + analysis, {args.workers} workers); "
        "B > 1 cells show which plan won the approximate oracle."
    )
    for r in rows:
        if r["batch"] > 1:
            print(
                f"  {r['target']} B={r['batch']} {r['process']} {r['output_tokens']}: {r['method']}"
            )


if __name__ == "__main__":
    main()
