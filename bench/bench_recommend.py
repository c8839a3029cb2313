"""Benchmark: `simspec recommend` in SGLang's flags on the default scenario.

The issue-28 target: the default scenario with analytic routing names SGLang flags (steps,
topk, num_draft_tokens) in under 30 CPU seconds, at the command's defaults (batch sizes 1, 8,
32, 128; 3 replications; steps 1..max_draft_tokens, topk 1, 2, 4, 8, the default tree sizes).
``--routing monte_carlo`` times the scenario's own Monte-Carlo routing instead (no target);
``--batch`` and ``--replications`` pass on to the command. Each repeat runs the whole command
in a fresh process (imports included) and reports its CPU seconds (user + system of the child,
``resource.getrusage``); the median and the range follow.

    python bench/bench_recommend.py [--repeats 3] [--routing analytic|monte_carlo]
                                    [--batch 1,8] [--replications R] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_CPU_S = 30.0


def _cpu_seconds(argv: list[str]) -> float:
    """CPU seconds (user + system) of one `simspec` child process running ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "simspec", *argv],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--routing", choices=("analytic", "monte_carlo"), default="analytic")
    parser.add_argument("--batch", help="batch sizes (default: the command's)")
    parser.add_argument("--replications", help="seeds per batch size (default: the command's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    argv = ["recommend", "--engine-flags", "sglang", "--set", f'routing.mode="{args.routing}"']
    if args.batch:
        argv += ["--batch", args.batch]
    if args.replications:
        argv += ["--replications", args.replications]
    for item in args.set:
        argv += ["--set", item]
    times = [_cpu_seconds(argv) for _ in range(args.repeats)]
    median = statistics.median(times)
    print(f"simspec {' '.join(argv)}")
    spread = f"range {min(times):.2f}-{max(times):.2f}, {args.repeats} runs"
    line = f"CPU s: median {median:.2f} ({spread})"
    if args.routing == "analytic" and not (args.batch or args.replications):
        line += f"; target < {TARGET_CPU_S:.0f}: {'met' if median < TARGET_CPU_S else 'NOT met'}"
    print(line)


if __name__ == "__main__":
    main()
