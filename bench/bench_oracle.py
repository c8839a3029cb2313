"""Benchmark: the hindsight oracle's cost tables and `simspec compare` on the batch-32 scenario.

1. Table rate: every request's DP tables built and solved (B > 1 attribution cost,
   :func:`simspec.analysis.oracle.request_tables_many` with a fixed typical
   :class:`~simspec.analysis.oracle.StepCost`), timed after one warm-up pass that generates the
   routing, with the expert unions computed in the timing and given (as the oracle's rounds
   reuse them); reported as (position × candidate k) entries per CPU second, also divided by
   the raw SimPy event rate measured in the same run. Target: >= 1M entries per second. The
   expert unions alone (every request's table, kept as the oracle keeps them) are timed too.
2. The whole `simspec compare` experiment (five fixed policies, the k = 0 baseline and the
   oracle) in this process, CPU seconds. Target: <= 15 CPU s.

Medians of ``--repeats`` runs (CPU time: ``time.process_time``).

    python bench/bench_oracle.py [--repeats 5] [--compare-repeats 5] [--scenario PATH]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import time

import numpy as np
from simpy_rate import bracketed, simpy_event_rate

import simspec
from simspec.analysis import oracle
from simspec.analysis.experiment import run_experiment
from simspec.sim.setup import build_setup

SCENARIO = "scenarios/qwen3-30b-h100-batch32.toml"


def table_rate(scenario, repeats: int) -> tuple[float, float, float, float, int]:
    """Median CPU seconds to build and solve every request's tables, with and without the
    expert unions (:func:`~simspec.analysis.oracle.unique_experts_table`, which
    :func:`~simspec.analysis.oracle.batched_plan` computes once and reuses every round), of
    the unions alone, the entries per CPU s per SimPy event (run by run, over the event rate
    around each, :func:`simpy_rate.bracketed`) and how many (position x k) entries that is."""
    setup = build_setup(scenario, oracle=True)
    refs, kmax = setup.references, setup.max_draft_tokens
    step = oracle.StepCost(
        setup, 31, 3.0, scenario.workload.prompt_tokens + 128, np.full(refs.num_layers, 100.0)
    )
    requests = range(scenario.workload.num_requests)
    oracle.request_tables_many(setup, requests, kmax, step)  # warm-up: generates the routing
    uniques = {rid: oracle.unique_experts_table(setup, rid, kmax) for rid in requests}
    entries = sum((refs.sequence(r).output_tokens - 1) * (kmax + 1) for r in requests)
    whole, given, unions, per_event = [], [], [], []
    for _ in range(repeats):
        start = time.process_time()
        kept = {rid: oracle.unique_experts_table(setup, rid, kmax) for rid in requests}
        unions.append(time.process_time() - start)
        del kept
        fresh = oracle.StepCost(setup, step.others, 3.0, step.context, step.others_union)
        solve = functools.partial(oracle.request_tables_many, setup, requests, kmax, fresh)
        cpu, rate, _ = bracketed(solve)
        whole.append(cpu)
        per_event.append(entries / cpu / rate)
        fresh = oracle.StepCost(setup, step.others, 3.0, step.context, step.others_union)
        start = time.process_time()
        oracle.request_tables_many(setup, requests, kmax, fresh, uniques)
        given.append(time.process_time() - start)
    return (
        statistics.median(whole),
        statistics.median(given),
        statistics.median(unions),
        statistics.median(per_event),
        entries,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compare-repeats", type=int, default=5)
    parser.add_argument("--scenario", default=SCENARIO)
    args = parser.parse_args()
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, numpy {np.__version__}, "
        f"simspec {simspec.__version__} ({os.path.dirname(simspec.__file__)})"
    )
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    events = simpy_event_rate()
    print(f"raw SimPy event rate: {events:,.0f} events per CPU second")
    scenario = simspec.load_scenario(args.scenario, [])
    cpu, given, unions, per_event, entries = table_rate(scenario, args.repeats)
    for what, seconds in (("incl. expert unions", cpu), ("unions given", given)):
        rate = entries / seconds
        print(
            f"oracle tables ({args.scenario}, B > 1 attribution cost, {what}): {entries} "
            f"(position x k) entries in {seconds:.3f} CPU s (median of {args.repeats}): "
            f"{rate:,.0f} per CPU second ({rate / events:.4f} per SimPy event per CPU second)"
        )
    print(f"  incl. unions, run by run over the SimPy rate around each: {per_event:.4f} per event")
    print(
        f"expert unions alone (unique_experts_table of all {scenario.workload.num_requests} "
        f"requests): {unions:.3f} CPU s (median of {args.repeats})"
    )
    runs = [
        bracketed(lambda: run_experiment(scenario, oracle=True))
        for _ in range(args.compare_repeats)
    ]
    cpus = [cpu for cpu, _, _ in runs]
    equivalents = statistics.median(cpu * rate for cpu, rate, _ in runs) / 1e6
    rates = [rate for _, rate, _ in runs]
    print(
        f"compare experiment (policies + baseline + oracle): median "
        f"{statistics.median(cpus):.2f} CPU s over {args.compare_repeats} runs "
        f"(min {min(cpus):.2f}, max {max(cpus):.2f}); "
        f"{statistics.median(cpus) * events / 1e6:.2f} M SimPy-event equivalents at the start's "
        f"rate; run by run, each times the SimPy rate around it ({min(rates) / 1e6:.2f}-"
        f"{max(rates) / 1e6:.2f}M): median {equivalents:.2f} M"
    )


if __name__ == "__main__":
    main()
