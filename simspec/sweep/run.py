"""Running a sweep: every point in parallel, each saved atomically, resumable after a kill.

:func:`run_sweep` simulates each point with :func:`simspec.analysis.experiment.run_experiment`
(its policies, the k = 0 baseline and, with ``oracle``, the hindsight oracle, all on the point's
reference sequences) on one of two executors:

* ``process`` — local worker processes (``spawn``, so workers share nothing with the parent);
* ``dask`` — a ``dask.distributed`` cluster: a local one, or the scheduler at ``scheduler``.

Workers receive the resolved :class:`~simspec.config.scenario.Scenario` (it pickles; nothing is
validated twice) and return the :class:`~simspec.analysis.results.RunResult`. The parent saves
each finished point at once, atomically (:mod:`simspec.sweep.points` describes the folder), so a
sweep killed at any moment loses only the points in flight, and ``resume`` skips the points
whose file exists. When every point is done, the parent reads the point files back and writes
the tables (:mod:`simspec.sweep.tables`) and ``sweep.json``: a resumed sweep writes the same
bytes as an uninterrupted one, because rows follow the grid, never completion order.

Example (the Python form of ``simspec sweep FILE --out DIR --grid ... --workers 2``):

>>> from simspec.sweep.spec import load_sweep
>>> spec, points = load_sweep("scenarios/qwen3-30b-h100-batch32.toml",
...                           grid={"workload.concurrency": [1, 4]})  # doctest: +SKIP
>>> finished = run_sweep(points, "runs/b", oracle=spec.oracle, workers=2)  # doctest: +SKIP
>>> finished[0].result.baseline.tpot_ms  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from simspec.analysis.experiment import run_experiment
from simspec.analysis.results import RunResult
from simspec.config.scenario import Scenario
from simspec.errors import InputError, describe
from simspec.sweep.points import (
    PointResult,
    point_path,
    read_points,
    write_manifest,
    write_point,
)
from simspec.sweep.spec import Point
from simspec.sweep.tables import write_tables

#: The executors :func:`run_sweep` knows.
EXECUTORS = ("process", "dask")

#: ``progress(done, total)``, called once at the start and after each finished point.
Progress = Callable[[int, int], None]
Finished = Callable[[Point, RunResult], None]


def run_point(scenario: Scenario, oracle: bool) -> RunResult:
    """Simulate one point (runs in a worker; the scenario and the result pickle)."""
    return run_experiment(scenario, oracle=oracle)


def run_sweep(
    points: Sequence[Point],
    out: str | Path,
    *,
    oracle: bool = False,
    workers: int = 1,
    executor: str = "process",
    scheduler: str | None = None,
    resume: bool = False,
    progress: Progress | None = None,
) -> list[PointResult]:
    """Run every unfinished point, then write ``results.csv``, ``summary.csv`` and ``sweep.json``.

    Parameters
    ----------
    points : sequence of Point
        From :func:`simspec.sweep.spec.expand` (or :func:`~simspec.sweep.spec.load_sweep`).
    out : str or Path
        The sweep folder; created if missing.
    oracle : bool
        Also run the hindsight oracle at every point (``sweep.oracle``).
    workers : int
        Parallel workers; 1 runs every point in this process.
    executor : {"process", "dask"}
        Local processes, or a ``dask.distributed`` cluster (``pip install 'simspec[cluster]'``).
    scheduler : str, optional
        Address of a running dask scheduler (default: a local cluster of ``workers`` processes).
    resume : bool
        Continue a sweep in ``out``: skip the points already saved there.
    progress : callable, optional
        ``progress(done, total)``.

    Returns
    -------
    list of PointResult
        Every point's results, read back from its file, in the order of ``points``.

    Raises
    ------
    InputError
        ``sweep.out`` is a file, or holds finished points and ``resume`` is false;
        ``sweep.executor`` or ``sweep.workers`` is invalid; dask is not installed.
    """
    out = Path(out)
    if executor not in EXECUTORS:
        raise InputError("", "sweep.executor", "one of " + ", ".join(EXECUTORS), describe(executor))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError("", "sweep.workers", "an integer >= 1", describe(workers))
    if out.exists() and not out.is_dir():
        raise InputError("", "sweep.out", "a folder", f"{out}, an existing file")
    existing = list((out / "points").glob("*.json")) if (out / "points").is_dir() else []
    if existing and not resume:
        raise InputError(
            "",
            "sweep.out",
            "an empty folder, or resuming the sweep saved there",
            f"{out} with {len(existing)} finished points",
        )
    out.mkdir(parents=True, exist_ok=True)
    todo = [p for p in points if not point_path(out, p.digest).exists()]
    done = len(points) - len(todo)
    if progress:
        progress(done, len(points))

    def finished(point: Point, result: RunResult) -> None:
        nonlocal done
        write_point(out, point, result)
        done += 1
        if progress:
            progress(done, len(points))

    if executor == "dask":
        _run_dask(todo, finished, oracle, workers, scheduler)
    else:
        _run_processes(todo, finished, oracle, workers)
    results = read_points(out, points)
    write_tables(results, out)
    write_manifest(out, points)  # last: its presence says the tables are complete
    return results


def _run_processes(todo: list[Point], finished: Finished, oracle: bool, workers: int) -> None:
    if workers <= 1 or len(todo) <= 1:
        for point in todo:
            finished(point, run_point(point.scenario, oracle))
        return
    import concurrent.futures as cf
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(run_point, p.scenario, oracle): p for p in todo}
        for future in cf.as_completed(futures):
            finished(futures[future], future.result())


def _run_dask(
    todo: list[Point], finished: Finished, oracle: bool, workers: int, scheduler: str | None
) -> None:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise InputError(
            "",
            "sweep.executor",
            "dask.distributed installed (pip install 'simspec[cluster]')",
            "'dask', which is not installed",
        ) from None
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(
            n_workers=max(workers, 1), threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = Client(cluster)
    try:
        futures = {client.submit(run_point, p.scenario, oracle, pure=False): p for p in todo}
        for future in as_completed(futures):
            finished(futures[future], future.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
