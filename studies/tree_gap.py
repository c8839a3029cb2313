"""How much of the oracle's gain a fixed tree leaves, beside what a fixed chain leaves (paper A).

For each paper-A scenario (Qwen3-Coder 30B-A3B on one H100 and 480B-A35B on 16, EAGLE-3, batch
size 1, bursty code-like acceptance) and each replication seed, on the same reference sequences:

* chains: the best fixed k (k = 0..K_max) and the chain oracle (:mod:`simspec.analysis.oracle`);
* trees: the best fixed shape of the tree oracle's family and the tree oracle
  (:mod:`simspec.analysis.tree_oracle`, exact at B = 1; the family: chains of 1..K_max drafts
  and SGLang-style trees of topk 2 and 4 with 4, 8 and 16 verified tokens), and SGLang's
  default shapes (5, 4, 8) and (3, 1, 4), and the online ``tree_cost_aware`` rule;
* the gap of a best fixed plan: (its TPOT − the oracle's) / its TPOT.

    python -m studies.tree_gap [--seeds 2609 2610 2611]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from simspec import load_scenario
from simspec.analysis.oracle import oracle_plan
from simspec.analysis.tree_oracle import tree_oracle_plan
from simspec.policies.fixed import FixedPolicy
from simspec.policies.fixed_tree import FixedTreePolicy
from simspec.policies.tree_cost_aware import TreeCostAwarePolicy
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup

SCENARIOS = {
    "Qwen3-Coder-30B-A3B, 1x H100": "scenarios/limits-of-speculation.toml",
    "Qwen3-Coder-480B-A35B, 16x H100": "scenarios/limits-of-speculation-480b.toml",
}


def one(path: str, seed: int) -> dict[str, float | str]:
    """Every TPOT (ms) of one scenario at one seed."""
    scenario = load_scenario(path, [f"seed={seed}"])
    setup = build_setup(scenario, oracle=True)
    kmax = setup.max_draft_tokens
    chains = {
        k: run_policy(setup, FixedPolicy(draft_tokens=k)).mean_tpot_s() for k in range(kmax + 1)
    }
    best_k = min(chains, key=lambda k: chains[k])
    chain_oracle = oracle_plan(setup).log.mean_tpot_s()
    tree = tree_oracle_plan(setup)
    best_shape = min(tree.fixed_tpot_s, key=lambda s: tree.fixed_tpot_s[s])
    presets = {
        name: run_policy(setup, FixedTreePolicy(preset=name)).mean_tpot_s()
        for name in ("sglang_eagle", "sglang_mtp")
    }
    return {
        "best_k": str(best_k),
        "best_chain": 1e3 * chains[best_k],
        "chain_oracle": 1e3 * chain_oracle,
        "best_shape": best_shape.label(),
        "best_tree": 1e3 * tree.fixed_tpot_s[best_shape],
        "tree_oracle": 1e3 * tree.log.mean_tpot_s(),
        **{name: 1e3 * v for name, v in presets.items()},
        "tree_cost_aware": 1e3 * run_policy(setup, TreeCostAwarePolicy()).mean_tpot_s(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[2609, 2610, 2611])
    args = parser.parse_args()
    start = time.perf_counter()
    print(
        "| model | best fixed k | its TPOT ms | chain oracle ms | chain gap | best fixed shape "
        "| its TPOT ms | tree oracle ms | tree gap | SGLang (5, 4, 8) ms | SGLang (3, 1, 4) ms "
        "| tree_cost_aware ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, path in SCENARIOS.items():
        rows = [one(path, seed) for seed in args.seeds]

        def mean(key: str, rows: list = rows) -> float:
            return float(np.mean([r[key] for r in rows]))

        def gap(fixed: str, oracle: str, rows: list = rows) -> str:
            gaps = [100 * (r[fixed] - r[oracle]) / r[fixed] for r in rows]
            return f"{np.mean(gaps):.1f} % ({min(gaps):.1f}-{max(gaps):.1f})"

        ks = "/".join(str(r["best_k"]) for r in rows)
        shapes = " / ".join(str(r["best_shape"]) for r in rows)
        print(
            f"| {label} | {ks} | {mean('best_chain'):.3f} | {mean('chain_oracle'):.3f} | "
            f"{gap('best_chain', 'chain_oracle')} | {shapes} | {mean('best_tree'):.3f} | "
            f"{mean('tree_oracle'):.3f} | {gap('best_tree', 'tree_oracle')} | "
            f"{mean('sglang_eagle'):.3f} | {mean('sglang_mtp'):.3f} | "
            f"{mean('tree_cost_aware'):.3f} |"
        )
    print(f"\n{len(args.seeds)} seeds, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
