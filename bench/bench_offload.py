"""Benchmark: the CPU cost of simulating expert offloading (issue 29).

Runs one scenario twice per repeat in this process, in analytic routing: with every expert
resident, and with the experts in pinned host memory behind an LRU expert cache
(``[offload]``, next-layer prefetch), and reports the median CPU time
(``time.process_time``) of each and their ratio. Target: offloading costs at most 3x the CPU
time of the same run without it. The offloaded run prices each pass's expected loads
(memoised per union and batch composition) and cannot use the deferred schedule (an expert
cache's state follows the passes in time order), so the ratio covers both.

    python bench/bench_offload.py [--repeats 5] [--concurrency 8] [--requests 64]
                                  [--framework hf-eager]

``--framework`` prices the offloaded run with an offload framework's host time (each pass then
goes through the general pipeline instead of its closed form).
"""

from __future__ import annotations

import argparse
import statistics
import time

import simspec


def _cpu(overrides: list[str]) -> tuple[float, int]:
    """CPU seconds of one ``simspec.run`` (scenario loaded inside) and its committed tokens."""
    start = time.process_time()
    result = simspec.run(None, overrides)
    return time.process_time() - start, sum(p.tokens for p in result.policies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--framework", default="none", help="offload framework preset")
    args = parser.parse_args()
    base = [
        'routing.mode="analytic"',
        f"workload.concurrency={args.concurrency}",
        f"workload.num_requests={args.requests}",
        "workload.output_tokens=128",
    ]  # the default scenario's policies: fixed k = 0..4
    offload = [
        *base,
        'offload.experts="host_pinned"',
        "offload.cache_experts_per_layer=64",
        'offload.prefetch="next_layer"',
        f'offload.framework="{args.framework}"',
    ]
    _cpu(base), _cpu(offload)  # warm imports and caches
    plain, loaded = [], []
    tokens = 0
    for _ in range(args.repeats):
        cpu, tokens = _cpu(base)
        plain.append(cpu)
        loaded.append(_cpu(offload)[0])
    a, b = statistics.median(plain), statistics.median(loaded)
    print(
        f"analytic routing, concurrency {args.concurrency}, {tokens} tokens per run, "
        f"offload framework {args.framework}"
    )
    print(f"without offloading: {a:.3f} CPU s (median of {args.repeats})")
    print(f"with offloading:    {b:.3f} CPU s")
    print(f"ratio: {b / a:.2f}x (target <= 3x)")


if __name__ == "__main__":
    main()
