"""Benchmark: peak resident memory of `simspec run` for about 10^6 simulated tokens.

Runs the embedded default scenario (five fixed-k policies, 256-token outputs on average) with
``--requests`` requests in a fresh process per routing mode and reads the child's peak RSS
(``os.wait4``). 800 requests x 256 tokens x 5 policies = 1.02 M simulated committed tokens.
Target (issue 12): <= 500 MB.

    python bench/bench_memory.py [--requests 800] [--modes analytic monte_carlo]
                                 [--concurrency B]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time


def peak_rss_mb(command: list[str]) -> tuple[float, float]:
    """Peak RSS (MB) and CPU seconds of ``command`` run as a child process."""
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"failed: {' '.join(command)}")
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


#: The five fixed-k policies these figures have always been measured on (the default scenario's
#: before it ran every k up to the drafter's maximum), pinned so RESULTS.md's rows stay comparable.
FIXED_K_0_TO_4 = (
    "policies=[" + ", ".join(f'{{name = "fixed", draft_tokens = {k}}}' for k in range(5)) + "]"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--modes", nargs="+", default=["analytic", "monte_carlo"])
    parser.add_argument("--concurrency", type=int, help="batch size (default: the scenario's)")
    args = parser.parse_args()
    machine = f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    print(f"machine: {machine}")
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import simspec, os; print(os.path.dirname(simspec.__file__))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    location = where.stdout.strip()
    print(f"simspec: {location} (set PYTHONPATH to measure another checkout)")
    for mode in args.modes:
        command = [
            sys.executable,
            "-m",
            "simspec",
            "run",
            "--set",
            f"workload.num_requests={args.requests}",
            "--set",
            f'routing.mode="{mode}"',
            "--set",
            FIXED_K_0_TO_4,
        ]
        if args.concurrency is not None:
            command += ["--set", f"workload.concurrency={args.concurrency}"]
        start = time.perf_counter()
        rss, cpu = peak_rss_mb(command)
        print(
            f"{mode}, concurrency {args.concurrency or 'default'}: {args.requests} requests "
            f"(~{args.requests * 256 * 5 / 1e6:.2f} M simulated tokens): "
            f"peak RSS {rss:.0f} MB, {cpu:.1f} CPU s, "
            f"{time.perf_counter() - start:.1f} s wall"
        )


if __name__ == "__main__":
    main()
