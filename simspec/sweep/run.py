"""Running a sweep: every point in parallel, each saved atomically, resumable after a kill.

Each point is :func:`simspec.analysis.experiment.run_experiment` of its resolved scenario, on
local worker processes (forked on Linux, so they start with the parent's imports; a worker also
serialises its point's JSON) or on a ``dask.distributed`` cluster. The parent saves each finished
point at once (:mod:`simspec.sweep.points`), so a kill loses only the points in flight and
``resume`` skips the saved ones; when every point is done it writes the tables and
``sweep.json``. Rows follow the grid, never completion order, so a resumed sweep writes the same
bytes as an uninterrupted one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from simspec.analysis.experiment import run_experiment, work_tokens
from simspec.analysis.results import RunResult
from simspec.config.scenario import Scenario
from simspec.errors import InputError, describe
from simspec.sweep.lock import FolderLock
from simspec.sweep.points import (
    SUBFOLDERS,
    PointFiles,
    PointResult,
    adopt_digest,
    check_folder,
    parse_point,
    point_files,
    prepare_folder,
    read_points,
    unfinished,
    write_manifest,
    write_point,
)
from simspec.sweep.spec import Point
from simspec.sweep.tables import write_tables
from simspec.sweep.workers import frozen_heap, worker_context, worker_start

#: The executors :func:`run_sweep` knows.
EXECUTORS = ("process", "dask")

#: ``progress(done, total)``, called once at the start and after each finished point.
Progress = Callable[[int, int], None]
Finished = Callable[[Point, RunResult | PointFiles], None]


def run_point(scenario: Scenario, oracle: bool) -> RunResult:
    """Simulate one point (runs in a worker; the scenario and the result pickle)."""
    return run_experiment(scenario, oracle=oracle)


def run_point_files(point: Point, oracle: bool) -> PointFiles:
    """Simulate one point and serialise it as :func:`~simspec.sweep.points.write_point` would
    (runs in a local worker: the parent then only writes the text and arrays)."""
    return point_files(point, run_point(point.scenario, oracle))


def heaviest_first(todo: Sequence[Point], oracle: bool) -> list[Point]:
    """The points by decreasing :func:`~simspec.analysis.experiment.work_tokens` (ties in grid
    order): started first, the long points do not finish last on one worker while others idle."""
    return sorted(todo, key=lambda p: -work_tokens(p.scenario, oracle))


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
    report: Callable[[str], None] | None = None,
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
    report : callable, optional
        ``report(line)``: each saved point that is simulated again, and why (unreadable, or
        its digest does not match).

    Returns
    -------
    list of PointResult
        Every point's results, read back from its file, in the order of ``points``.

    Raises
    ------
    InputError
        ``sweep.out`` is a file, holds files no sweep wrote, is in use by another running
        sweep, or holds finished points and ``resume`` is false;
        ``sweep.executor`` or ``sweep.workers`` is invalid; dask is not installed.
    """
    out = Path(out)
    if executor not in EXECUTORS:
        raise InputError("", "sweep.executor", "one of " + ", ".join(EXECUTORS), describe(executor))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError("", "sweep.workers", "an integer >= 1", describe(workers))
    if executor == "dask" and scheduler:
        check_scheduler(scheduler)
    check_folder(out, points, resume)
    lock = FolderLock.acquire(out)  # a second sweep into ``out`` is refused meanwhile
    try:
        results = _run_locked(points, out, oracle, workers, executor, scheduler, progress, report)
    except BaseException:
        lock.release(undo=True)  # a folder this sweep created and wrote nothing into goes
        raise
    lock.release()
    return results


def _run_locked(
    points: Sequence[Point],
    out: Path,
    oracle: bool,
    workers: int,
    executor: str,
    scheduler: str | None,
    progress: Progress | None,
    report: Callable[[str], None] | None,
) -> list[PointResult]:
    """:func:`run_sweep` once the folder is checked and locked."""
    for line in prepare_folder(out, points):
        if report is not None:
            report(f"simulating again: {line}")
    todo = unfinished(out, points)
    done = len(points) - len(todo)
    todo = heaviest_first(todo, oracle)  # the files and tables follow the grid regardless
    if progress:
        progress(done, len(points))

    parsed: dict[str, RunResult] = {}

    def finished(point: Point, result: RunResult | PointFiles) -> None:
        nonlocal done
        files = point_files(point, result) if isinstance(result, RunResult) else result
        # Parsed now, while the workers still run, rather than read back after the last point.
        read_back = parse_point(files[0])
        adopt_digest(point, read_back)
        write_point(out, point, files)
        parsed[point.digest] = read_back
        done += 1
        if progress:
            progress(done, len(points))

    with contextlib.ExitStack() as pools:  # local workers exit while the tables are written
        try:
            if executor == "dask":
                _run_dask(todo, finished, oracle, workers, scheduler)
            else:
                _run_processes(todo, finished, oracle, workers, pools)
        except BaseException:
            _remove_empty(out)
            raise
        results = read_points(out, points, parsed)
        write_tables(results, out)
        write_manifest(out, points)  # last: its presence says the tables are complete
    return results


def _remove_empty(out: Path) -> None:
    """Remove the sub-folders of ``out`` nothing was written into (the folder itself goes with
    its lock, :meth:`~simspec.sweep.lock.FolderLock.release`)."""
    for folder in [out / name for name in SUBFOLDERS]:
        with contextlib.suppress(OSError):  # missing, or not empty: keep it
            folder.rmdir()


def _run_processes(
    todo: list[Point], finished: Finished, oracle: bool, workers: int, pools: contextlib.ExitStack
) -> None:
    """Run ``todo`` here (one worker) or on forked workers; ``pools`` shuts the pool down (and
    waits for its processes) on exit, after the caller has written the tables."""
    if workers <= 1 or len(todo) <= 1:
        for point in todo:
            finished(point, run_point(point.scenario, oracle))
        return
    import concurrent.futures as cf
    import multiprocessing

    # Forked workers inherit the imported modules (and the parent's caches, which never change
    # a result: one worker runs every point in the parent).
    context = worker_context()
    ours = set(multiprocessing.active_children())
    pool = pools.enter_context(
        cf.ProcessPoolExecutor(
            max_workers=min(workers, len(todo)),
            mp_context=context,
            initializer=worker_start,
            initargs=(os.getpid(),),
        )
    )
    # The first submit forks every worker; they inherit an ignored SIGINT, so a Ctrl-C (sent to
    # the terminal's whole process group) reaches only this process, which stops them below.
    with frozen_heap(), _children_ignore_sigint():
        futures = {pool.submit(run_point_files, p, oracle): p for p in todo}
    saved: set[cf.Future[PointFiles]] = set()
    try:
        for future in cf.as_completed(futures):
            finished(futures[future], future.result())
            saved.add(future)
    except KeyboardInterrupt:
        _stop_processes(pool, set(multiprocessing.active_children()) - ours)
        # keep the points that finished while the interrupt was on its way
        for future, point in futures.items():
            if future in saved or not future.done() or future.cancelled():
                continue
            if future.exception() is None:
                finished(point, future.result())
        raise
    except BaseException:  # stopped otherwise (a signal, an error): queued points must not run
        _stop_processes(pool, set(multiprocessing.active_children()) - ours)
        raise
    pool.shutdown(wait=False)  # every point is done: let the workers exit meanwhile


def _stop_processes(pool: Any, workers: set[Any]) -> None:
    """Cancel the queued points and kill the workers (they ignore SIGINT): an interrupted sweep
    ends at once instead of after the points in flight."""
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        with contextlib.suppress(OSError):
            process.kill()
    for process in workers:
        process.join(timeout=2)


#: Seconds to wait for a dask scheduler at ``--scheduler`` before giving up.
CONNECT_TIMEOUT_S = 5
_ADDRESS = re.compile(
    r"(?:(?:tcp|tls|ucx|ws|wss)://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)(?::\d{1,5})?/?"
    r"|inproc://\S+"
)


def check_scheduler(address: str) -> None:
    """Refuse a dask scheduler address that is no address (before connecting to anything)."""
    if not _ADDRESS.fullmatch(address):
        raise InputError(
            "--scheduler",
            address,
            "a dask scheduler address such as tcp://10.0.0.5:8786",
            describe(address),
        )


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
    import logging
    import multiprocessing

    cluster: Any = None
    client: Any = None
    ours = set(multiprocessing.active_children())  # processes started before the cluster
    try:
        if scheduler:
            client = _connect(Client, scheduler)
        else:
            with _children_ignore_sigint():
                cluster = LocalCluster(
                    n_workers=max(workers, 1),
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.CRITICAL,
                    preload=["simspec.sweep.dask_worker"],  # workers (even restarted) ignore it
                )
            client = Client(cluster)
        futures = {client.submit(run_point, p.scenario, oracle, pure=False): p for p in todo}
        for future in as_completed(futures):
            finished(futures[future], future.result())
    except asyncio.CancelledError:  # the scheduler went away mid-sweep
        raise InputError(
            "--scheduler",
            scheduler or "the local cluster",
            "a dask scheduler that stays up until the sweep ends",
            "the connection lost mid-sweep (the points saved so far are kept: --resume goes on)",
        ) from None
    except KeyboardInterrupt:
        # dask's loggers would report the connections these kills close (now and then with a
        # traceback from its comm thread, after our one line): the cluster is gone, mute them.
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        # The workers ignore SIGINT and would finish their points first: stop them now.
        for process in set(multiprocessing.active_children()) - ours:
            process.kill()
        with contextlib.suppress(Exception):
            if client is not None:
                client.close(timeout=2)
            if cluster is not None:
                cluster.close(timeout=2)
        raise
    if client is not None:
        client.close()
    if cluster is not None:
        cluster.close()


def _connect(client_type: Any, scheduler: str) -> Any:
    """A client of the scheduler at ``scheduler``, or an InputError after a short timeout."""
    check_scheduler(scheduler)
    try:
        return client_type(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
    except Exception as err:  # refused, timed out, a protocol without its setup (tls, ucx)
        raise InputError(
            "--scheduler",
            scheduler,
            "the address of a running dask scheduler",
            f"no connection within {CONNECT_TIMEOUT_S} s ({type(err).__name__})",
        ) from None


@contextlib.contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """Processes started inside inherit an ignored SIGINT (so does this one, meanwhile).

    Ctrl-C reaches every process of the terminal's group; a worker that took it would print a
    KeyboardInterrupt traceback. A Ctrl-C during the cluster's start (a few seconds) is lost.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
