"""Benchmark: simulated committed tokens per wall-clock second.

Runs the embedded default scenario at batch 32 (closed loop, fixed k = 0..4) several times in
this process and reports the median wall time and simulated tokens per wall second, counting
every policy's tokens (the reference sequences are built once per scenario, inside the timing).
Also times `simspec run` with no argument as a fresh process (target: < 30 s).

    python bench/bench_engine.py [--repeats 5] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

import simspec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=64)
    args = parser.parse_args()

    overrides = [
        f"workload.concurrency={args.concurrency}",
        f"workload.num_requests={args.requests}",
    ]
    scenario = simspec.load_scenario(None, overrides)
    walls, tokens = [], 0
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = simspec.run(scenario)
        walls.append(time.perf_counter() - start)
        tokens = sum(p.tokens for p in result.policies)
    wall = statistics.median(walls)

    cli = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "simspec", "run"], check=True, capture_output=True)
        cli.append(time.perf_counter() - start)

    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, "
        f"numpy {np.__version__}, simspec {simspec.__version__}"
    )
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"scenario: default with {' '.join(overrides)} ({len(scenario.policies)} policies)")
    print(
        f"simspec.run(): median {wall:.3f} s over {args.repeats} runs "
        f"(min {min(walls):.3f}, max {max(walls):.3f})"
    )
    print(f"simulated committed tokens (all policies): {tokens}")
    print(f"simulated tokens per wall second: {tokens / wall:,.0f}")
    print(
        f"`simspec run` (default scenario, fresh process): median {statistics.median(cli):.2f} s "
        f"over 3 runs"
    )


if __name__ == "__main__":
    main()
