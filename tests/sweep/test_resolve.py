"""Resolving a sweep's points in workers: the same points and errors as one process, and the
workers' routing fits handed back to the parent.

Each check runs in a fresh interpreter: workers are forked only by a single-threaded process,
and earlier tests leave threads behind in this one (dask's IO loops, tqdm's monitor).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CASES = """
name = "fits"
seed = 3
[routing]
mode = "analytic"
overlaps = [0.4, 0.3]
[workload]
concurrency = 1
num_requests = 1
prompt_tokens = 16
output_tokens = 8
[[policies]]
name = "fixed"
draft_tokens = 2
[sweep]
cases = [
  { label = "A", "model.target" = "mixtral-8x7b", "hardware.num_gpus" = 2 },
  { label = "B", "model.target" = "qwen3-30b-a3b" },
  { label = "C", "model.target" = "olmoe-1b-7b-0924" },
]
grid = { "workload.concurrency" = [1, 2] }
"""

_PRELUDE = """
import json, sys, tomllib
import simspec.sweep.resolve as resolve_module
from simspec.config.checks import _routing_problem
from simspec.errors import ScenarioError
from simspec.routing.memo import FIT_MEMOS
from simspec.sweep.spec import expand, read_spec
from simspec.sweep.workers import worker_context

data = tomllib.loads(sys.argv[1])
spec = read_spec(data, "fits.toml")
resolve_module.POOL_COST_S = float(sys.argv[2])
out = {"fork": worker_context().get_start_method() == "fork"}

def fresh():
    _routing_problem.cache_clear()
    for memo in FIT_MEMOS.values():
        memo.cache_clear()
    return {name: memo.computed for name, memo in FIT_MEMOS.items()}

def summary(points):
    return [[p.index, p.case, p.values, p.replication, p.digest] for p in points]
"""


def _run(code: str, cases: str = CASES, pool_cost_s: float = 0.0) -> dict:
    script = _PRELUDE + textwrap.dedent(code) + "\nprint(json.dumps(out))\n"
    done = subprocess.run(
        [sys.executable, "-c", script, cases, str(pool_cost_s)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if not out["fork"]:
        pytest.skip("workers resolve points only where processes fork (Linux)")
    return out


def test_cases_with_routing_fits_are_resolved_in_workers_and_their_fits_come_back():
    out = _run(
        """
        start = fresh()
        one = expand(data, "fits.toml", spec, workers=1)
        out["alone"] = {n: m.computed - start[n] for n, m in FIT_MEMOS.items()}
        out["sizes"] = {n: len(m) for n, m in FIT_MEMOS.items()}
        start = fresh()
        two = expand(data, "fits.toml", spec, workers=2)
        out["here"] = {n: m.computed - start[n] for n, m in FIT_MEMOS.items()}
        out["held"] = {n: len(m) for n, m in FIT_MEMOS.items()}
        out["same"] = summary(one) == summary(two)
        out["same_scenarios"] = [p.scenario for p in one] == [p.scenario for p in two]
        """
    )
    assert out["same"] and out["same_scenarios"]
    assert out["sizes"]["routing.predictor.node_log_silent"] == 3  # one fit per case (model)
    for name, size in out["sizes"].items():
        if size:
            # Every case's fit is held here, but this process computed only the first case's.
            assert out["held"][name] == size, name
            assert 0 < out["here"][name] < out["alone"][name], (name, out)


def test_cheap_fits_keep_the_resolution_in_this_process():
    out = _run(
        """
        start = fresh()
        expand(data, "fits.toml", spec, workers=2)
        out["here"] = {n: m.computed - start[n] for n, m in FIT_MEMOS.items()}
        """,
        pool_cost_s=1e9,
    )
    assert out["here"]["routing.predictor.node_log_silent"] == 3


@pytest.mark.parametrize(
    ("bad", "key"),
    [
        (
            '{ label = "C", "model.target" = "olmoe-1b-7b-0924", "workload.prompt_tokens" = -1 }',
            "workload.prompt_tokens",
        ),
        ('{ label = "C", "model.target" = "no-such-model" }', "model.target"),
    ],
)
def test_a_bad_point_in_a_later_case_is_the_serial_error(bad, key):
    good = '{ label = "C", "model.target" = "olmoe-1b-7b-0924" }'
    out = _run(
        """
        out["errors"] = []
        for workers in (1, 2):
            fresh()
            try:
                expand(data, "fits.toml", spec, workers=workers)
                out["errors"].append(None)
            except ScenarioError as err:
                out["errors"].append([str(err), err.key_path])
        """,
        cases=CASES.replace(good, bad),
    )
    one, two = out["errors"]
    assert one is not None and one == two
    assert one[1] == key
