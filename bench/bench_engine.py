"""Benchmark: simulated committed tokens per wall-clock second and per CPU second.

Runs the embedded default scenario at batch 32 (closed loop, fixed k = 0..4) several times in
this process, in Monte-Carlo routing and in analytic routing, and reports median wall and CPU
time (``time.process_time``) and simulated committed tokens per CPU second, counting every
policy's tokens (the reference sequences are built once per scenario, inside the timing). Each
rate is also divided by the raw SimPy event rate measured in the same run
(:mod:`simpy_rate`): tokens per CPU second per (SimPy events per CPU second).

Targets (issue 12): analytic >= 300k tokens per CPU second and >= 300x real time (simulated
seconds of every policy per CPU second), Monte-Carlo >= 60k. Also times `simspec run` with no
argument as a fresh process (target: < 30 s).

``--engine-only`` also times the engine alone: the analytic runs (setup built once, outside the
timing) with the cost model replaced by a constant stub, so what is left is the scheduler loop,
the policies and the routing queries; the step count is printed (the stub's times change the
batching slightly, so it is not the scenario's own count).

    python bench/bench_engine.py [--repeats 5] [--concurrency 32] [--skip-cli]
                                 [--modes analytic monte_carlo]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
from simpy_rate import bracketed, simpy_event_rate

import simspec
from simspec.params import PassCost
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup


def _walled(fn, *args):
    """(wall seconds of ``fn(*args)``, its value): the run alone, without the yardstick."""
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def _time_runs(scenario, repeats: int) -> tuple[list[float], list[float], list[float], int, float]:
    """Wall and CPU seconds of ``repeats`` runs, the SimPy event rate around each
    (:func:`simpy_rate.bracketed`), the committed tokens of one run and the simulated seconds
    they took (each policy's tokens over its simulated tokens per second, summed)."""
    walls, cpus, rates, tokens, simulated = [], [], [], 0, 0.0
    for _ in range(repeats):
        cpu, rate, (wall, result) = bracketed(lambda: _walled(simspec.run, scenario))
        walls.append(wall)
        cpus.append(cpu)
        rates.append(rate)
        tokens = sum(p.tokens for p in result.policies)
        simulated = sum(p.tokens / p.tokens_per_s for p in result.policies)
    return walls, cpus, rates, tokens, simulated


class _ConstantCosts:
    """A cost model that answers constants (``--engine-only``): no cost arithmetic at all."""

    def verify_pass(self, tokens, contexts, unique):
        return PassCost(overhead_s=1e-3, moe_s=len(tokens) * 1e-5, attention_s=0.0, other_s=0.0)

    def draft_step(self, contexts):
        return 1e-4

    def prefill(self, prompts):
        return PassCost(overhead_s=1e-2, moe_s=0.0, attention_s=0.0, other_s=0.0)

    def speculation_overhead_s(self, accepted, contexts):
        return 0.0


def _engine_only(scenario, repeats: int) -> tuple[list[float], int]:
    setup = dataclasses.replace(build_setup(scenario), cost_model=_ConstantCosts())
    policies = [p.policy for p in scenario.policies]
    for policy in policies:  # warm: reference sequences and predictor caches
        run_policy(setup, policy)
    cpus, steps = [], 0
    for _ in range(repeats):
        cpu = time.process_time()
        logs = [run_policy(setup, policy) for policy in policies]
        cpus.append(time.process_time() - cpu)
        steps = sum(len(log.steps) for log in logs)
    return cpus, steps


#: The policies these figures have always been measured on (the default scenario's before it ran
#: every k up to the drafter's maximum), pinned so that RESULTS.md's rows stay comparable.
FIXED_K_0_TO_4 = (
    "policies=[" + ", ".join(f'{{name = "fixed", draft_tokens = {k}}}' for k in range(5)) + "]"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--skip-cli", action="store_true", help="skip the fresh-process timing")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["monte_carlo", "analytic"],
        choices=["monte_carlo", "analytic"],
        help="routing modes to time (default: both)",
    )
    parser.add_argument(
        "--engine-only", action="store_true", help="also time the engine with a stub cost model"
    )
    args = parser.parse_args()

    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, "
        f"numpy {np.__version__}, simspec {simspec.__version__} "
        f"({os.path.dirname(simspec.__file__)})"
    )
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    overrides = [
        f"workload.concurrency={args.concurrency}",
        f"workload.num_requests={args.requests}",
        FIXED_K_0_TO_4,
    ]
    events = simpy_event_rate()
    print(f"raw SimPy event rate: {events:,.0f} events per CPU second")
    for mode in args.modes:
        scenario = simspec.load_scenario(None, [*overrides, f'routing.mode="{mode}"'])
        walls, cpus, rates, tokens, simulated = _time_runs(scenario, args.repeats)
        cpu = statistics.median(cpus)
        print(
            f"{mode}: default with {' '.join(overrides)} ({len(scenario.policies)} policies), "
            f"{tokens} simulated committed tokens"
        )
        print(
            f"  simspec.run(): median {statistics.median(walls):.3f} s wall, {cpu:.3f} s CPU "
            f"over {args.repeats} runs (CPU min {min(cpus):.3f}, max {max(cpus):.3f})"
        )
        rate = tokens / cpu
        per_event = statistics.median(tokens / c / r for c, r in zip(cpus, rates, strict=True))
        print(
            f"  simulated tokens per CPU second: {rate:,.0f} "
            f"({rate / events:.4f} per SimPy event per CPU second at the start's rate); "
            f"run by run, each over the SimPy rate around it ({min(rates) / 1e6:.2f}-"
            f"{max(rates) / 1e6:.2f}M): median {per_event:.4f} per event"
        )
        print(
            f"  simulated seconds per CPU second: {simulated / cpu:,.0f}x real time "
            f"({simulated:.2f} simulated s of {len(scenario.policies)} policies)"
        )
    if args.engine_only:
        scenario = simspec.load_scenario(None, [*overrides, 'routing.mode="analytic"'])
        cpus, steps = _engine_only(scenario, args.repeats)
        cpu = statistics.median(cpus)
        print(
            f"engine only (analytic, constant cost stub): median {cpu:.3f} s CPU over "
            f"{args.repeats} runs (min {min(cpus):.3f}), {steps} steps, {cpu / steps * 1e6:.1f} us "
            f"per step ({steps / cpu / events:.4f} steps per CPU s per SimPy event per CPU s)"
        )
    if args.skip_cli:
        return
    cli = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "simspec", "run"], check=True, capture_output=True)
        cli.append(time.perf_counter() - start)
    print(
        f"`simspec run` (default scenario, fresh process): median {statistics.median(cli):.2f} s "
        f"over 3 runs"
    )


if __name__ == "__main__":
    main()
