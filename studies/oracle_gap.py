"""Benchmark: the approximate batched oracle against the exact joint optimum (tiny batches).

    python -m studies.oracle_gap [--instances 12] [--tokens 14]

For closed batches of B = 2 requests (the exact joint DP of tests/reference/joint_oracle.py is
exponential in B), i.i.d. and bursty acceptance, and several seeds, prints the approximate
oracle's mean-TPOT gap to the exact optimum, and the best fixed k's gap, then their
distribution (min / median / max).
"""

from __future__ import annotations

import argparse
import statistics
import time

from simspec.analysis import oracle
from simspec.config.load import load_scenario
from simspec.policies import FixedPolicy
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup
from tests.reference.joint_oracle import exact_joint_plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=14)
    args = parser.parse_args()
    approx_gaps, fixed_gaps = [], []
    print("seed  acceptance  exact TPOT ms  approx gap %  best fixed gap %  seconds")
    for n in range(args.instances):
        process = "iid" if n % 2 == 0 else "bursty"
        scenario = load_scenario(
            None,
            {
                "seed": n // 2,
                "workload.concurrency": 2,
                "workload.num_requests": 2,
                "workload.prompt_tokens": 64,
                "workload.output_tokens": args.tokens,
                "acceptance.process": process,
                "policies": [{"name": "fixed", "draft_tokens": 0}],
            },
        )
        setup = build_setup(scenario, oracle=True)
        start = time.perf_counter()
        opt = exact_joint_plan(setup).mean_tpot_s
        approx = oracle.oracle_plan(setup).log.mean_tpot_s()
        fixed = min(
            run_policy(setup, FixedPolicy(draft_tokens=k)).mean_tpot_s()
            for k in range(setup.max_draft_tokens + 1)
        )
        approx_gaps.append(100 * (approx / opt - 1))
        fixed_gaps.append(100 * (fixed / opt - 1))
        print(
            f"{n // 2:>4}  {process:>10}  {opt * 1e3:>13.4f}  {approx_gaps[-1]:>12.2f}  "
            f"{fixed_gaps[-1]:>16.2f}  {time.perf_counter() - start:>7.1f}"
        )
    for name, gaps in (("approximate oracle", approx_gaps), ("best fixed k", fixed_gaps)):
        print(
            f"{name}: gap to the exact optimum min {min(gaps):.2f} %, median "
            f"{statistics.median(gaps):.2f} %, max {max(gaps):.2f} % over {len(gaps)} instances"
        )


if __name__ == "__main__":
    main()
