"""Resolving a sweep's points: overrides, seeds, validation and digests, here or in workers.

:func:`resolve_combos` turns every grid point of every case (a *combo*) into its resolved,
validated replications for :func:`simspec.sweep.spec.expand`. One process is the reference: it
fixes the order in which errors are found. Forked workers give the same points and the same
first error; they take the sweeps whose start-up would otherwise keep a core idle.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from simspec.config.load import apply_overrides, check_seed, scenario_from_dict
from simspec.config.scenario import Scenario
from simspec.rng import replication_seed
from simspec.routing.memo import absorb_fits, fit_marks, fit_seconds, fits_since
from simspec.sweep.workers import frozen_heap, worker_context

#: Points per worker below which :func:`expand` resolves the points in this process.
MIN_PARALLEL = 64

#: Wall seconds a pool of workers costs (start, forks, results back): fits in workers must
#: save more than this.
POOL_COST_S = 0.03

#: One grid point of a case, before replications: (label, values, overrides, where).
Combo = tuple[str, dict[str, Any], list[str], str]
#: A resolved replication: the scenario and, when a worker computed it, its digest.
Resolved = tuple[Scenario, str | None]


def _seeded(base: dict[str, Any], combo: Combo, replications: int) -> list[dict[str, Any]]:
    """The scenario data of every replication of ``combo``: the base with the combo's overrides
    and, for replication r, the seed :func:`~simspec.rng.replication_seed` derives."""
    where = combo[3]
    point = apply_overrides(base, combo[2], where)
    # A seed set by the case or a grid axis is the base seed of this point's replications
    # (checked like a scenario's seed before it is derived from).
    seed = check_seed(point.get("seed", 0), where)
    return [
        apply_overrides(point, {"seed": replication_seed(seed, r)}, where)
        for r in range(replications)
    ]


def _resolve_combo(
    combo: Combo, base: dict[str, Any], replications: int, base_dir: str
) -> list[Resolved] | None:
    """Every replication of one combo, resolved, with its digest; None if any step fails (in
    a worker: the parent then resolves the sweep in the reference order to raise the error)."""
    try:
        return [
            (scenario, scenario.digest())
            for scenario in (
                scenario_from_dict(data, combo[3], base_dir=base_dir)
                for data in _seeded(base, combo, replications)
            )
        ]
    except Exception:
        return None


#: What a worker hands back for a group of combos: their resolved replications (None if one
#: failed) and the routing fits it computed for them (:func:`simspec.routing.memo.fits_since`).
GroupResult = tuple[list[list[Resolved]] | None, dict[str, Any]]


def _resolve_group(
    group: list[Combo], base: dict[str, Any], replications: int, base_dir: str
) -> GroupResult:
    """:func:`_resolve_combo` of each combo of ``group``, and the fits they needed."""
    marks = fit_marks()
    done = [_resolve_combo(combo, base, replications, base_dir) for combo in group]
    if any(d is None for d in done):
        return None, {}
    return [d for d in done if d is not None], fits_since(marks)


def _case_groups(combos: list[Combo]) -> list[list[Combo]]:
    """The combos in runs of one case each (a case is usually one model: one routing fit)."""
    return [list(run) for _, run in itertools.groupby(combos, key=lambda combo: combo[0])]


def resolve_combos(
    base: dict[str, Any], combos: list[Combo], replications: int, base_dir: str, workers: int
) -> list[list[Resolved]]:
    """The resolved replications of every combo, in order.

    One process (the reference, and the order of errors): every combo's overrides applied and
    seeds checked first, then every scenario resolved, so the first failing step raises. With
    ``workers`` > 1 on Linux, forked processes take groups of combos (overrides, seeds,
    resolution and digest: all of a sweep's start-up that is not reading the file, which would
    otherwise stay serial before every parallel sweep); if any fails, the reference path runs
    and raises. Two kinds of sweep go to the workers:

    * many points (>= ``MIN_PARALLEL`` per worker): in large contiguous chunks;
    * several cases whose models need routing fits (temporal overlaps: far longer per model
      than a point takes): one case per task. This process resolves the first combo
      alone; when its fits took long enough that the other cases' would outweigh a pool
      (``POOL_COST_S``; the path depends on that timing, the points do not), the workers
      take the rest and this process takes their fits back (:mod:`simspec.routing.memo`),
      so the workers that run the points inherit all of them.
    """
    context = worker_context()
    forked = workers > 1 and len(combos) > 1 and context.get_start_method() == "fork"
    first: list[list[Resolved]] = []
    groups: list[list[Combo]] = []
    # A pool and every process's first point cost tens of points each: below MIN_PARALLEL
    # points per worker, one process is as fast (bench/RESULTS.md has the measurements).
    if forked and len(combos) * replications >= MIN_PARALLEL * workers:
        # Large contiguous chunks (two per worker): a process pays extra the first time it
        # meets a case's model (and on its first point), so a worker that sees only some of
        # the cases does less; the second chunk evens out the end.
        size = max(1, -(-len(combos) // (2 * workers)))
        groups = [combos[i : i + size] for i in range(0, len(combos), size)]
    elif forked and len(cases := _case_groups(combos)) > 1:
        spent = fit_seconds()
        probe = _resolve_combo(combos[0], base, replications, base_dir)
        fitting = fit_seconds() - spent  # the first case's fits (the others': alike)
        if probe is not None and (len(cases) - 1) * fitting / workers > POOL_COST_S:
            first = [probe]
            groups = _case_groups(combos[1:])
    if groups:
        done = _resolve_groups(groups, base, replications, base_dir, workers, context)
        if done is not None:
            return first + done
    seeded = [(_seeded(base, combo, replications), combo[3]) for combo in combos]
    return [
        [(scenario_from_dict(data, where, base_dir=base_dir), None) for data in datas]
        for datas, where in seeded
    ]


def _resolve_groups(
    groups: list[list[Combo]],
    base: dict[str, Any],
    replications: int,
    base_dir: str,
    workers: int,
    context: Any,
) -> list[list[Resolved]] | None:
    """Each group resolved in a forked worker, in order, the workers' fits absorbed here; None
    if any combo failed."""
    import concurrent.futures as cf

    work = functools.partial(
        _resolve_group, base=base, replications=replications, base_dir=base_dir
    )
    with cf.ProcessPoolExecutor(max_workers=min(workers, len(groups)), mp_context=context) as pool:
        with frozen_heap():  # map submits every group at once; the first submit forks
            results = pool.map(work, groups)
        done: list[GroupResult] = list(results)
    if any(resolved is None for resolved, _ in done):
        return None
    for _, fits in done:
        absorb_fits(fits)
    return [reps for resolved, _ in done if resolved is not None for reps in resolved]
