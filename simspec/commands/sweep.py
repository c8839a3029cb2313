"""`simspec sweep`: run a grid of scenario variants in parallel, crash-safe and resumable."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from simspec.commands import (
    add_allow_large_option,
    add_set_option,
    check_folder,
    check_range,
    check_work,
)
from simspec.commands._hints import analytic_routing_hint
from simspec.commands._words import count
from simspec.errors import InputError

if TYPE_CHECKING:
    from simspec.sweep.points import PointResult

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
    from simspec.analysis.guardrails import print_warnings
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
    check_work_before_points(args)
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
        f"sweep: {count(len(points), 'point')} ({count(len(spec.grid), 'axis')}, "
        f"{count(max(len(spec.cases), 1), 'case')}, {count(spec.replications, 'replication')}), "
        f"{count(args.workers, 'worker')}, {args.executor} executor"
    )
    hint = analytic_routing_hint([p.scenario for p in points], spec.oracle)
    if hint:
        print(hint, file=sys.stderr, flush=True)
    out = Path(args.out)
    try:
        with Progress("sweep") as progress:
            results = run_sweep(
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
    print_warnings(sweep_warnings(results))
    print(f"wrote {out / 'results.csv'} and {out / 'summary.csv'}")
    return 0


#: A grid axis that searches a fixed policy's draft length.
_K_AXIS = re.compile(r"policies\[\d+\]\.draft_tokens")


def sweep_warnings(results: Sequence[PointResult]) -> list[str]:
    """Each guardrail warning of the sweep's points once, with how many points gave it (a
    point file lists its own under ``warnings``). When a grid axis sets a fixed policy's
    ``draft_tokens``, the sweep itself searches k: the points of each case and other grid
    values are one search (:func:`~simspec.analysis.guardrails.search_warnings`), and a
    point's own k-at-edge (its k against k = 0 alone) is left out."""
    from simspec.analysis.guardrails import K_AT_EDGE, search_warnings

    k_axes = [
        key for key in dict.fromkeys(k for p in results for k in p.values) if _K_AXIS.fullmatch(key)
    ]
    counts: dict[str, int] = {}
    for point in results:
        for warning in point.result.warnings:
            if not (k_axes and warning.startswith(K_AT_EDGE)):
                counts[warning] = counts.get(warning, 0) + 1
    lines = [f"{w} ({n} of {count(len(results), 'point')})" for w, n in counts.items()]
    for axis in k_axes:
        searched = []
        for point in results:
            if axis not in point.values:
                continue
            k = int(point.values[axis])
            others = {key: v for key, v in point.values.items() if key != axis}
            group = f"case {point.case!r} " if point.case else ""
            group += f"at {others}" if others else ""
            where = (group or "the sweep").strip() + f", {axis}"
            searched += [
                (where, int(p.params["draft_tokens"]), p.speedup_vs_no_spec)
                for p in point.result.policies
                if p.name == "fixed"
                and not p.is_oracle
                and (p.is_baseline or p.params.get("draft_tokens") == k)
            ]
        lines += search_warnings(searched)
    return lines + _delta_control_warnings(results)


def _delta_control_warnings(results: Sequence[PointResult]) -> list[str]:
    """One line when the Delta-space analysis of some points with the oracle failed its
    control (the figure of ``simspec plot`` shows only one point)."""
    from simspec.analysis.delta import control_failure

    with_oracle = [p.result.oracle for p in results if p.result.oracle is not None]
    failed = sum(1 for oracle in with_oracle if control_failure(dict(oracle.delta)))
    if not failed:
        return []
    return [
        "delta-control: the Delta-space line misclassifies no fewer of the oracle's decisions "
        "than with random cost tables, so it is no boundary there "
        f"({failed} of {count(len(with_oracle), 'point')} with the oracle)"
    ]


#: Top-level scenario keys that change how much a point simulates (requests, tokens, runs,
#: tree width, the drafter's depth): an axis over any other key leaves each point's work that
#: of the base scenario.
WORK_KEYS = frozenset({"workload", "policies", "speculation", "model"})


def check_work_before_points(args: argparse.Namespace) -> None:
    """Refuse a sweep above the work limit before validating its points, when no grid axis or
    case changes a point's work (each point then simulates what the base scenario does):
    validating 100,000 points takes about half a minute, only to be refused afterwards. Other
    sweeps are checked after their points are built (:func:`check_work` on every point)."""
    import math

    from simspec.config.aliases import expand_aliases
    from simspec.config.load import read_with_overrides, scenario_from_dict
    from simspec.sweep.spec import check_size, read_spec

    if args.allow_large:
        return
    data, source, base = read_with_overrides(args.scenario, args.set)
    spec = read_spec(data, source, args.grid, args.replications, True if args.oracle else None)
    check_size(spec, source)
    keys = [*spec.grid, *(k for case in spec.cases for k in case if k != "label")]
    names = [name for key in keys for name, _ in expand_aliases([(key, 0)])]
    if any(name.split(".")[0].split("[")[0] in WORK_KEYS for name in names):
        return
    try:
        scenario = scenario_from_dict(
            {k: v for k, v in data.items() if k != "sweep"}, source, base_dir=base
        )
    except InputError:  # the base alone may be invalid where every point is valid
        return
    count = max(len(spec.cases), 1) * spec.replications
    count *= math.prod(len(values) for values in spec.grid.values())
    check_work([scenario] * count, spec.oracle, args.allow_large)


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
