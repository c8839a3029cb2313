"""Parallel sweeps write what one worker writes; the t quantiles need no scipy import."""

from __future__ import annotations

import math
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from simspec.analysis.replications import Interval
from simspec.errors import ScenarioError
from simspec.sweep.points import parse_point, point_files, point_path, read_points, write_point
from simspec.sweep.run import run_point, run_sweep
from simspec.sweep.spec import expand, read_spec
from simspec.sweep.workers import worker_context

BASE = """
name = "par"
seed = 5
[routing]
overlap = 0.3
[acceptance]
alpha = 0.7
[workload]
concurrency = 1
num_requests = 2
prompt_tokens = 32
output_tokens = 20
[[policies]]
name = "fixed"
draft_tokens = 2
[sweep]
replications = 3
oracle = true
grid = { "workload.num_requests" = [1, 3], "acceptance.alpha" = [0.5, 0.8] }
"""


#: Fixtures of the tests that must run where this process forks its workers (Linux's path).
FORKING = ("forking", "pool_always")


@pytest.fixture(scope="module")
def fresh_outcomes(request, tmp_path_factory):
    """Where this process cannot fork its workers: every test of this module that uses
    :func:`forking`, run together in one fresh interpreter; their outcomes by name (each
    test's report with them). None where this process forks."""
    import os
    import subprocess
    import xml.etree.ElementTree as ET

    if worker_context().get_start_method() == "fork" or os.environ.get("SIMSPEC_TEST_FRESH"):
        return None
    here = Path(request.node.path)
    ids = [
        item.nodeid
        for item in request.session.items
        if Path(item.path) == here and set(FORKING) & set(getattr(item, "fixturenames", ()))
    ]
    report = tmp_path_factory.mktemp("fresh") / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *ids, "-p", "no:cacheprovider", f"--junitxml={report}"],
        cwd=request.config.rootpath,
        env={**os.environ, "SIMSPEC_TEST_FRESH": "1"},
        capture_output=True,
        text=True,
    )
    cases = list(ET.parse(report).getroot().iter("testcase"))
    log = done.stdout[-4000:] + done.stderr[-2000:]
    bad = ("failure", "error", "skipped")
    return {c.get("name"): (all(c.find(b) is None for b in bad), log) for c in cases}


@pytest.fixture
def forking(request, fresh_outcomes):
    """Workers forked, as a sweep on Linux starts them.

    Only a single-threaded process forks its workers, and earlier tests leave threads behind
    in this one (dask's IO loops, tqdm's monitor): then the tests using this fixture run in one
    fresh interpreter (:func:`fresh_outcomes`), and the fixture returns True once the test
    has passed there (its body returns at once).
    """
    if fresh_outcomes is None:
        return False
    passed, log = fresh_outcomes.get(request.node.name, (False, "not run"))
    assert passed, log
    return True


@pytest.fixture
def pool_always(monkeypatch, forking):
    """Resolve even these few points in worker processes (the path a large sweep takes),
    forked (:func:`forking`)."""
    import simspec.sweep.resolve as resolve_module

    monkeypatch.setattr(resolve_module, "MIN_PARALLEL", 1)
    return forking


def _points():
    data = tomllib.loads(BASE)
    spec = read_spec(data, "par.toml")
    return spec, expand(data, "par.toml", spec)


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("n", [2, 3, 5, 12, 31, 40])
def test_half_width_is_the_student_t_interval(n):
    from scipy.stats import t

    values = np.random.default_rng(n).normal(size=n)
    expected = float(t.ppf(0.975, n - 1)) * float(values.std(ddof=1)) / math.sqrt(n)
    assert Interval.of(values).half_width == expected
    assert math.isnan(Interval.of(values[:1]).half_width)


def test_two_workers_write_the_same_bytes_as_one(tmp_path, forking):
    if forking:
        return
    spec, points = _points()
    run_sweep(points, tmp_path / "one", oracle=spec.oracle, workers=1)
    run_sweep(points, tmp_path / "two", oracle=spec.oracle, workers=2)
    one, two = _files(tmp_path / "one"), _files(tmp_path / "two")
    assert one.keys() == two.keys() and len(one) == 4 * 3 * 2 + 4  # points, deltas, files
    for name in one:
        assert one[name] == two[name], name


def test_a_workers_prepared_files_are_what_write_point_writes(tmp_path):
    spec, points = _points()
    point = points[0]
    result = run_point(point.scenario, spec.oracle)
    write_point(tmp_path / "a", point, result)
    write_point(tmp_path / "b", point, point_files(point, result))
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    assert point_path(tmp_path / "a", point.digest).exists()
    assert point.digest == point.scenario.digest()


def test_one_replication_sweep_tables_do_not_import_scipy_stats(tmp_path):
    """The prior study has one replication per point: no interval, no scipy.stats import."""
    import subprocess

    code = f"""
import sys, tomllib
from simspec.sweep.run import run_sweep
from simspec.sweep.spec import expand, read_spec
data = tomllib.loads({BASE.replace("replications = 3", "replications = 1")!r})
spec = read_spec(data, "par.toml")
run_sweep(expand(data, "par.toml", spec), sys.argv[1], workers=1)
print("scipy.stats" in sys.modules)
"""
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "o")], capture_output=True, text=True
    )
    assert out.stdout.strip() == "False", out.stderr


def test_parallel_validation_gives_the_same_points_and_errors(pool_always):
    if pool_always:
        return
    data = tomllib.loads(BASE)
    spec = read_spec(data, "par.toml")
    one = expand(data, "par.toml", spec, workers=1)
    two = expand(data, "par.toml", spec, workers=2)
    assert [(p.index, p.case, p.values, p.replication, p.digest) for p in one] == [
        (p.index, p.case, p.values, p.replication, p.digest) for p in two
    ]
    assert [p.scenario for p in one] == [p.scenario for p in two]
    bad = tomllib.loads(BASE.replace("[0.5, 0.8]", "[0.5, 0.8, 7.0, -1.0]"))
    spec = read_spec(bad, "par.toml")
    errors = []
    for workers in (1, 2):
        with pytest.raises(ScenarioError) as info:
            expand(bad, "par.toml", spec, workers=workers)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "7" in errors[0]


def test_few_points_are_resolved_in_this_process():
    spec, _ = _points()
    two = expand(tomllib.loads(BASE), "par.toml", spec, workers=2)  # 12 points: no pool
    assert not any("digest" in p.__dict__ for p in two)


def test_workers_compute_the_digests_the_scenarios_give(pool_always):
    """Validation workers also derive each point's digest; it is the scenario's own digest."""
    if pool_always:
        return
    spec, points = _points()
    two = expand(tomllib.loads(BASE), "par.toml", spec, workers=2)
    # Precomputed by the workers, not derived again (where processes fork: Linux).
    forked = worker_context().get_start_method() == "fork"
    assert all(("digest" in p.__dict__) == forked for p in two)
    assert [p.digest for p in two] == [p.scenario.digest() for p in two]
    assert [p.digest for p in two] == [p.digest for p in points]


@pytest.mark.parametrize(
    "grid, key",
    [
        # One process applies every point's overrides (and checks its seed) before it validates
        # any point, so an override that cannot apply (a key inside a number) or a bad seed in
        # a later point is the error, not the refused alpha = 7 of an earlier one; workers
        # resolve whole points, and must still raise exactly that error.
        (
            '{ acc = [{ "acceptance.alpha" = 0.5 }, { "acceptance.alpha" = 7.0 }, '
            '{ "acceptance.alpha" = 0.6, "acceptance.alpha.x" = 1 }], seed = [1, 2] }',
            "acceptance.alpha.x",
        ),
        ('{ "acceptance.alpha" = [0.5, 7.0, 0.6], seed = [1, -3] }', "seed"),
        ('{ "acceptance.alpha" = [0.5, 0.6, 7.0, 0.8], seed = [1, 2] }', "acceptance.alpha"),
    ],
)
def test_parallel_expansion_raises_the_serial_error(grid, key, pool_always):
    if pool_always:
        return
    data = tomllib.loads(BASE[: BASE.index("grid = ")] + f"grid = {grid}\n")
    spec = read_spec(data, "par.toml")
    errors = []
    for workers in (1, 2):
        with pytest.raises(ScenarioError) as info:
            expand(data, "par.toml", spec, workers=workers)
        errors.append((type(info.value), str(info.value), info.value.key_path))
    assert errors[0] == errors[1]
    assert errors[0][2] == key, errors[0]


@pytest.mark.parametrize("workers", [1, 2])
def test_results_parsed_as_points_finish_are_the_files_read_back(tmp_path, workers, forking):
    """run_sweep parses each point's text as it finishes; that is what reading the file gives."""
    if forking:
        return
    spec, points = _points()
    returned = run_sweep(points, tmp_path / "o", oracle=spec.oracle, workers=workers)
    again = read_points(tmp_path / "o", points)
    assert [p.result for p in returned] == [p.result for p in again]
    assert [(p.case, p.values, p.replication) for p in returned] == [
        (p.case, p.values, p.replication) for p in again
    ]
    text = point_path(tmp_path / "o", points[0].digest).read_text()
    assert parse_point(text) == again[0].result


def test_points_without_traces_draw_no_request_lengths(monkeypatch):
    """Request lengths are drawn (a stream per request) only to check a replayed trace's
    coverage: a sweep that replays nothing skips them (most of its validation time)."""
    import simspec.config.traces as traces

    spec, points = _points()
    calls = []
    real = traces.request_lengths
    monkeypatch.setattr(traces, "request_lengths", lambda *a: calls.append(a) or real(*a))
    again = expand(tomllib.loads(BASE), "par.toml", spec, workers=1)
    assert calls == []
    assert [p.scenario for p in again] == [p.scenario for p in points]


def test_frozen_heap_freezes_the_collector_only_inside():
    import gc

    from simspec.sweep.workers import frozen_heap

    assert gc.get_freeze_count() == 0
    with frozen_heap():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), frozen_heap():
        raise RuntimeError("a failed fork")
    assert gc.get_freeze_count() == 0
