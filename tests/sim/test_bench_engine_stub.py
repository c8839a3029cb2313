"""``bench/bench_engine.py --engine-only`` runs the engine with a constant cost stub.

The stub must answer everything the engine asks of a cost model; a run with it commits every
request's output tokens, and each step costs at least the stub's fixed pass overhead.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import simspec

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench_engine():
    sys.path.insert(0, str(BENCH))  # the script imports its sibling simpy_rate
    try:
        spec = importlib.util.spec_from_file_location("bench_engine", BENCH / "bench_engine.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


def test_the_engine_only_benchmark_runs_every_policy_with_the_stub():
    bench = _bench_engine()
    scenario = simspec.load_scenario(
        None, ["workload.concurrency=4", "workload.num_requests=4", "workload.output_tokens=16"]
    )
    cpus, steps = bench._engine_only(scenario, 1)
    assert len(cpus) == 1 and cpus[0] >= 0.0
    # every policy needs at least output_tokens / (k + 1) steps for its longest request
    assert steps >= len(scenario.policies) * 16 // 5
