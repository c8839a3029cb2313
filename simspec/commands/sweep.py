"""`simspec sweep`: run a grid of scenario variants in parallel, crash-safe and resumable."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from simspec.commands import (
    add_allow_large_option,
    add_set_option,
    check_folder,
    check_range,
    check_work,
)
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
    add_set_option(parser)
    add_allow_large_option(parser)


def execute(args: argparse.Namespace) -> int:
    """Expand the grid, validate every point, run the unfinished ones, write the tables."""
    from simspec.io.progress import Progress
    from simspec.sweep.run import run_sweep
    from simspec.sweep.spec import load_sweep

    check_range("--workers", args.workers, 1, 4096)
    if args.replications is not None:
        check_range("--replications", args.replications, 1, 10_000)
    check_folder(args.out, "--out")
    check_grid_options(args.grid)
    if args.scheduler is not None:
        from simspec.sweep.run import check_scheduler

        if args.executor != "dask":
            raise InputError(
                "--scheduler",
                args.scheduler,
                "--executor dask with it (a scheduler serves dask workers only)",
                f"--executor {args.executor}",
            )
        check_scheduler(args.scheduler)
    spec, points = load_sweep(
        args.scenario,
        grid=args.grid,
        overrides=args.set,
        replications=args.replications,
        oracle=True if args.oracle else None,
        workers=args.workers,
    )
    check_work([p.scenario for p in points], spec.oracle, args.allow_large)
    print(
        f"sweep: {len(points)} points ({len(spec.grid)} axes, {max(len(spec.cases), 1)} cases, "
        f"{spec.replications} replications), {args.workers} workers, {args.executor} executor"
    )
    out = Path(args.out)
    try:
        with Progress("sweep") as progress:
            run_sweep(
                points,
                out,
                oracle=spec.oracle,
                workers=args.workers,
                executor=args.executor,
                scheduler=args.scheduler,
                resume=args.resume,
                progress=progress,
                report=lambda line: print(f"sweep: {line}", file=sys.stderr),
            )
    except InputError as err:  # name the flag, not the library's argument
        if err.key_path != "sweep.out":
            raise
        resumable = err.expected.startswith("an empty folder") and not args.resume
        hint = "Pass --resume to continue the sweep saved there." if resumable else err.hint
        expected = "an empty folder" if resumable else err.expected
        raise InputError("--out", args.out, expected, err.found, hint) from None
    print(f"wrote {out / 'results.csv'} and {out / 'summary.csv'}")
    return 0


def check_grid_options(items: list[str]) -> None:
    """Each ``--grid`` is ``key=v1,v2,...`` with at least one value, each key in one ``--grid``
    (a second would silently replace the first's values)."""
    seen: set[str] = set()
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise InputError("--grid", item, "an axis key=v1,v2,...", repr(item))
        if not any(v.strip() for v in text.split(",")):
            raise InputError("--grid", key, "at least one value (key=v1,v2,...)", "none")
        if key in seen:
            raise InputError(
                "--grid",
                key,
                "each key in one --grid (list all its values there: key=v1,v2,v3)",
                "the key in two --grid options",
            )
        seen.add(key)
