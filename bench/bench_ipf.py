"""Benchmark: analytic-mode unique-expert queries (simspec.routing.predictor), ms per query.

For each model (48 MoE layers x 128 experts; 48 x 512) and overlap profile, with Zipf(0.8)
popularity drawn per layer, times:

* the first query: fitting the odds ratios and the IPF tables for T = 1..9 (K_max + 1);
* repeated single-request queries (what the oracle asks, cached);
* new batch compositions: 32 requests with random T in 1..9 (tables fitted, answer not cached);
* ``ReferenceSet.pass_unique_experts`` in ``routing.mode = "analytic"`` for a batch of 32
  requests at random states (includes the per-request match-length lookups).

Target: < 1 ms per query after the first.

With ``--predict N`` it times ``simspec routing predict`` instead (issue 12 target: <= 2 s for
deepseek-v3, T = 15, 12 lags): each of N runs is a fresh process that reports the CPU seconds
(``time.process_time``) of its imports and of the command itself; the process's CPU seconds
(user + sys) and wall time are measured from outside. Medians over the N runs, the cases
interleaved. Run it with ``PYTHONPATH=<other tree>`` to time another copy of simspec.

    python bench/bench_ipf.py [--repeats 2000]
    python bench/bench_ipf.py --predict 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

import simspec
from simspec.commands import table
from simspec.routing.config import RoutingConfig
from simspec.routing.popularity import draw_inclusion_probabilities
from simspec.routing.predictor import UniqueExpertPredictor
from simspec.sim.setup import build_setup

PROFILES = {
    "Markov 0.38": (0.38,),
    "slow, 4 lags": (0.38, 0.32, 0.29, 0.27),
    "slow, 8 lags": (0.38, 0.32, 0.29, 0.27, 0.26, 0.25, 0.245, 0.24),
}


LAGS_12 = "0.38 0.32 0.29 0.27 0.26 0.25 0.245 0.24 0.235 0.23 0.225 0.22"
PREDICT_CASES = {
    "deepseek-v3, T = 15, 12 lags": f"--model deepseek-v3 --tokens 15 --overlap {LAGS_12}",
    "qwen3-30b-a3b, T = 8, 4 lags": "--model qwen3-30b-a3b --tokens 8 "
    "--overlap 0.38 0.32 0.29 0.27",
    "qwen3-30b-a3b zipf, T = 12, B = 2, 6 lags": "--model qwen3-30b-a3b --popularity zipf "
    "--tokens 12 --batch 2 --overlap 0.38 0.32 0.29 0.27 0.26 0.25",
}
# Runs in a fresh process: CPU seconds of the imports and of the command, as JSON on stderr.
_CHILD = """
import contextlib, io, json, sys, time
start = time.process_time()
from simspec.cli import main
imported = time.process_time()
with contextlib.redirect_stdout(io.StringIO()):
    main(["routing", "predict", *sys.argv[1:]])
done = time.process_time()
print(json.dumps({"imports": imported - start, "command": done - imported}), file=sys.stderr)
"""


def time_predict(args: str) -> dict[str, float]:
    """One fresh-process run of ``simspec routing predict ARGS``: CPU and wall seconds."""
    # The child imports the same simspec as this process (-P: not the one in the cwd).
    root = os.path.dirname(os.path.dirname(simspec.__file__))
    env = {**os.environ, "PYTHONPATH": root}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-P", "-c", _CHILD, *args.split()],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    inside = json.loads(proc.stderr.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**inside, "process cpu": cpu, "process wall": wall}


def predict_main(repeats: int) -> None:
    """Median CPU and wall seconds of ``simspec routing predict`` over ``repeats`` runs."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in PREDICT_CASES}
    for _ in range(repeats):
        for name, case in PREDICT_CASES.items():
            runs[name].append(time_predict(case))
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, numpy {np.__version__}; simspec from "
        f"{os.path.dirname(simspec.__file__)}; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    keys = ("command", "imports", "process cpu", "process wall")
    rows = []
    for name, results in runs.items():
        medians = [statistics.median(r[key] for r in results) for key in keys]
        rows.append((name, *(f"{v:.3f}" for v in medians)))
        print(f"{name}: command CPU s " + " ".join(f"{r['command']:.3f}" for r in results))
    print()
    headers = ("simspec routing predict", "command CPU s", "imports CPU s", "process CPU s")
    print(table((*headers, "process wall s"), rows))


def per_query_ms(fn, items) -> float:
    start = time.perf_counter()
    for item in items:
        fn(item)
    return 1e3 * (time.perf_counter() - start) / len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--predict", type=int, default=0, metavar="N", help="time routing predict")
    args = parser.parse_args()
    if args.predict:
        predict_main(args.predict)
        return
    rng = np.random.default_rng(0)
    rows = []
    for layers, experts, k in ((48, 128, 8), (48, 512, 10)):
        for name, profile in PROFILES.items():
            config = RoutingConfig(popularity="zipf", overlaps=profile)
            p = draw_inclusion_probabilities(config, layers, experts, k, np.random.default_rng(1))
            start = time.perf_counter()
            pred = UniqueExpertPredictor(p, profile)
            pred.expected_unique(list(range(1, 10)))
            first = 1e3 * (time.perf_counter() - start)
            single = per_query_ms(pred.expected_unique, [[4]] * args.repeats)
            batches = [[int(t) for t in rng.integers(1, 10, size=32)] for _ in range(args.repeats)]
            fresh = per_query_ms(pred.expected_unique, batches)
            rows.append(
                (
                    f"{layers} x {experts}, top-{k}",
                    name,
                    f"{first:.0f}",
                    f"{single:.4f}",
                    f"{fresh:.3f}",
                )
            )
    # Through the simulator's seam, on the default scenario (Qwen3-30B-A3B, 48 x 128).
    scenario = simspec.load_scenario(
        None, ['routing.mode="analytic"', "routing.overlaps=[0.38, 0.32, 0.29, 0.27]"]
    )
    refs = build_setup(scenario).references
    states = []
    for _ in range(args.repeats):
        fed = []
        for r in range(32):
            seq = refs.sequence(r)
            fed.append((r, int(rng.integers(1, seq.output_tokens - 9)), int(rng.integers(0, 9))))
        states.append(fed)
    refs.pass_unique_experts([(0, 1, 3)])  # first query: fits the tables
    fresh_seam = per_query_ms(refs.pass_unique_experts, states)  # new batch compositions
    cached_seam = per_query_ms(refs.pass_unique_experts, states)  # the same ones again

    print(
        f"machine: {platform.platform()}, Python {platform.python_version()}, "
        f"numpy {np.__version__}, simspec {simspec.__version__}"
    )
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print()
    print(
        table(
            (
                "model shape",
                "overlaps",
                "first query ms",
                "cached single ms",
                "new batch of 32 ms",
            ),
            rows,
        )
    )
    print()
    print(
        "ReferenceSet.pass_unique_experts (analytic, default scenario + slow 4-lag overlaps, "
        f"batches of 32 at random states): {fresh_seam:.3f} ms per new batch, "
        f"{cached_seam:.3f} ms per repeated batch"
    )


if __name__ == "__main__":
    main()
