"""`simspec sweep`: run a grid of scenario variants in parallel, crash-safe and resumable."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from simspec.errors import InputError

NAME = "sweep"
HELP = "Run a grid of scenario variants (x replications) and write results.csv and summary.csv."
EXAMPLE = (
    "simspec sweep scenarios/qwen3-30b-h100-batch32.toml --out runs/b --grid "
    "workload.concurrency=1,4,16 --replications 3 --workers 2"
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec sweep`."""
    parser.add_argument("scenario", help="scenario TOML file (its [sweep] table gives the axes)")
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="an axis: any dotted scenario key and its values (repeatable)",
    )
    parser.add_argument(
        "--replications",
        type=int,
        metavar="R",
        help="replications per point (seeds derived from the scenario seed)",
    )
    parser.add_argument(
        "--oracle",
        action="store_true",
        help="also run the hindsight oracle at every point (slower)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="parallel workers (default: CPU count)",
    )
    parser.add_argument(
        "--executor",
        choices=("process", "dask"),
        default="process",
        help="local processes (default) or a dask.distributed cluster",
    )
    parser.add_argument(
        "--scheduler", metavar="ADDRESS", help="dask scheduler address (default: a LocalCluster)"
    )
    parser.add_argument("--resume", action="store_true", help="skip points already finished")
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override a base-scenario key (repeatable)",
    )


class _Progress:
    """A one-line progress bar with ETA on a terminal; silent otherwise."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.first: int | None = None
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if self.first is None:
            self.first = done
        if not self.tty or total == 0:
            return
        elapsed = time.monotonic() - self.start
        fresh = done - self.first
        eta = elapsed / fresh * (total - done) if fresh else float("nan")
        width = 30
        filled = int(width * done / total)
        eta_text = "--:--" if eta != eta else f"{int(eta // 60):02d}:{int(eta % 60):02d}"
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} ETA {eta_text}"
        )
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def execute(args: argparse.Namespace) -> int:
    """Expand the grid, validate every point, run the unfinished ones, write the tables."""
    from simspec.config.scenario import apply_overrides, read_scenario_data
    from simspec.sweep.run import expand, read_spec, run_sweep

    if args.workers < 1:
        raise InputError("--workers", str(args.workers), "an integer >= 1", str(args.workers))
    if args.replications is not None and args.replications < 1:
        raise InputError(
            "--replications", str(args.replications), "an integer >= 1", str(args.replications)
        )
    data, source = read_scenario_data(args.scenario)
    if args.set:
        data = apply_overrides(data, args.set)
    spec = read_spec(data, source, args.grid, args.replications, True if args.oracle else None)
    points = expand(data, source, spec)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError("--out", args.out, "a folder", "an existing file")
    print(
        f"sweep: {len(points)} points ({len(spec.grid)} axes, {max(len(spec.cases), 1)} cases, "
        f"{spec.replications} replications), {args.workers} workers, {args.executor} executor"
    )
    results, summary = run_sweep(
        points,
        out,
        oracle=spec.oracle,
        workers=args.workers,
        executor=args.executor,
        scheduler=args.scheduler,
        resume=args.resume,
        progress=_Progress(),
    )
    print(f"wrote {results} and {summary}")
    return 0
