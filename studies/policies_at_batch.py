"""Benchmark: every budget policy against the best fixed k and the oracle at batch 1 to 128.

    python -m studies.policies_at_batch [--workers 2] [--batches 1 8 32 128] [--alphas 0.6 0.7 0.8]

The default scenario (Qwen3-30B-A3B + EAGLE-3 on one H100, closed loop) with i.i.d. acceptance
alpha, concurrency B and enough requests to keep the batch full. For each (B, alpha) it prints the
speedup over k = 0 of fixed k = 1..8, the online policies and the oracle, and each policy's
capture of the oracle's gain over the best fixed k: (policy − best fixed)/(oracle − best fixed)
(speedups; 0 = no better than the best fixed k, 1 = the oracle; negative = worse than it). The
oracle is exact at B = 1 and an approximation above (:mod:`simspec.analysis.oracle`); it runs
where ``--oracle-max-batch`` allows. Target (issue 11): cost_aware within 2 % of the best fixed
k everywhere; the whole script under about 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import simspec
from simspec.config.load import scenario_from_dict

FIXED = tuple(range(9))
ONLINE: tuple[dict[str, Any], ...] = (
    {"name": "cost_aware"},
    {"name": "threshold", "tau": 0.6},
    {"name": "threshold", "tau": 0.4, "mode": "cumulative"},
    {"name": "adaptive_ema"},
    {"name": "batch_table"},
)
#: (requests, output tokens) per batch size: stable means within the time target. At B = 1 the
#: oracle is exact and cheap; above, it runs the engine about a dozen times, so batches run once.
SIZES = {1: (12, 256), 8: (16, 256), 32: (32, 160), 128: (128, 96)}


def case(batch: int, alpha: float, with_oracle: bool) -> dict[str, Any]:
    """Speedups of every policy (and the oracle) for one batch size and alpha."""
    data = simspec.load_scenario().to_dict()
    data["acceptance"] = {"process": "iid", "alpha": alpha}
    requests, output_tokens = SIZES.get(batch, (batch, 128))
    data["workload"].update(concurrency=batch, num_requests=requests, output_tokens=output_tokens)
    data["policies"] = [{"name": "fixed", "draft_tokens": k} for k in FIXED] + list(ONLINE)
    start = time.perf_counter()
    result = simspec.run_experiment(scenario_from_dict(data), oracle=with_oracle)
    rows = {r.label: (r.speedup_vs_no_spec, r.mean_k) for r in result.policies}
    return {"batch": batch, "alpha": alpha, "rows": rows, "wall_s": time.perf_counter() - start}


def report(out: dict[str, Any]) -> None:
    """Print one (B, alpha) block."""
    rows = out["rows"]
    fixed = {label: v for label, v in rows.items() if label.startswith("fixed-")}
    best_label = max(fixed, key=lambda label: fixed[label][0])
    best = fixed[best_label][0]
    oracle = rows.get("oracle", (None, None))[0]
    print(
        f"\nB={out['batch']} alpha={out['alpha']}: best fixed {best_label} {best:.3f}x, "
        f"oracle {f'{oracle:.3f}x' if oracle else 'not run'} ({out['wall_s']:.0f} s)"
    )
    print(f"  {'policy':<36} {'speedup':>8} {'mean k':>7} {'vs best':>8} {'capture':>8}")
    for label, (speedup, mean_k) in rows.items():
        if label.startswith("fixed-") and label not in (best_label, "fixed-0"):
            continue
        vs = 100 * (speedup / best - 1)
        capture = (speedup - best) / (oracle - best) if oracle and oracle > best else None
        cap = f"{capture:8.2f}" if capture is not None else f"{'-':>8}"
        print(f"  {label:<36} {speedup:8.3f} {mean_k:7.2f} {vs:+7.1f}% {cap}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.6, 0.7, 0.8])
    parser.add_argument("--oracle-max-batch", type=int, default=128)
    args = parser.parse_args()
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    jobs = [(b, a, b <= args.oracle_max_batch) for b in args.batches for a in args.alphas]
    start = time.perf_counter()
    jobs.sort(key=lambda job: -job[0])  # largest first: the pool finishes together
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        outs = list(pool.map(case, *zip(*jobs, strict=True)))
    for out in sorted(outs, key=lambda out: (out["batch"], out["alpha"])):
        report(out)
    print(f"\ntotal {time.perf_counter() - start:.0f} s with {args.workers} workers")


if __name__ == "__main__":
    main()
