"""Nested leave-one-group-out: out-of-sample errors with every fitted or chosen quantity refit.

Rows are grouped by :func:`~simspec.validation.consistency.fold_key` (the row's reporter where
the cases file names one, else its source). Each group in turn is held out; on the remaining
rows, and on those alone, the fold

1. labels inconsistent rows (:func:`simspec.validation.consistency.inconsistent`: stated rules
   on the measurements, never on predictions); labelled rows and test rows
   (:func:`~simspec.validation.consistency.is_test_row`) are not fitted;
2. fits the draft trees' rank decay (:func:`rank_decay`: the chain and tree rows of one setting;
   :data:`RANK_DECAY_PRIOR` when no training row identifies it);
3. chooses the output-length spread of the benchmark rows whose spread is assumed
   (:data:`JITTER_GRID`: the value whose preset fit has the lowest median error over the
   training benchmark rows; the cases file's stated spread when no training row has one);
4. fits each engine preset's keys (:func:`simspec.fit.presets.fitted_keys`, the presets'
   declaration) on that engine's training rows, its measured keys taken from the direct
   measurements among them (:func:`simspec.fit.presets.measured_values`); an engine with no
   training row is *not identifiable out of sample* and its held-out rows get no prediction;
5. chooses the MoE kernel form (lowest inner leave-one-group-out error) and fits its
   constants on the training fit series (:mod:`simspec.fit.kernels`).

The held-out rows are then predicted with the fold's quantities: their errors are the
out-of-sample errors. Kernel constants reach decode rows only through the default costs, which
are fitted on every kernel row: exact for a group without kernel rows, and a group holding both
is named under ``caveats`` (:func:`nested_folds`).
Simulations are probe runs (:mod:`simspec.fit.presets`: times affine in the overheads), one
set per row and per rank decay / spread the row depends on, shared by every fold. A test row,
which no fold fits on, is simulated for its own fold alone, at that fold's rank decay and the
spread the fold chooses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

import simspec
from simspec.params import RooflineParams
from simspec.text.tree import fit_alpha, fit_rank_decay
from simspec.validation.cases import RATIO_CATEGORIES, Case, CaseFile, engine_preset
from simspec.validation.consistency import fold_key, inconsistent, is_test_row, source_reporters
from simspec.validation.predictions import is_tree_row, predict_kernel_us, quantity

from . import kernels, presets

#: Candidate output-length spreads for benchmark rows whose spread is not published.
JITTER_GRID = (0.0, 0.4, 0.8)
#: The rank decay a fold uses when none of its training rows identifies one: the middle of
#: [0, 1] (0 = only the top candidate can hit, 1 = geometric ranks), no data behind it.
RANK_DECAY_PRIOR = 0.5


def _variant_jitter(case: Case) -> bool:
    """A benchmark row whose assumed output spread is a protocol choice (batch 1 runs none)."""
    return case.num_requests > 0 and case.length_jitter > 0 and case.batch > 1


def _grid(train: Sequence[Case]) -> tuple[float | None, ...]:
    """The spreads a fold tries: :data:`JITTER_GRID` when a training row depends on it, else
    None (a held-out benchmark row keeps the spread the cases file states)."""
    if any(_variant_jitter(c) and not is_test_row(c) for c in train):
        return JITTER_GRID
    return (None,)


def _chain(case: Case) -> bool:
    return case.category == "speculative" and not is_tree_row(case)


def _setting(case: Case) -> tuple[Any, ...]:
    return (fold_key(case), case.model, case.gpu, case.tp, case.ep, case.batch, case.engine)


def rank_decay(rows: Sequence[Case]) -> tuple[float | None, list[float]]:
    """Median rank decay of the tree rows that share a setting with a chain row, and each one.

    A chain row's AL fixes the per-depth alpha (Leviathan et al.); each tree row of the same
    group, model, GPU, parallelism, batch and engine then has one rho reproducing its measured
    AL (:func:`simspec.text.tree.fit_rank_decay`). None when no tree row has such a chain.
    """
    rows = [c for c in rows if not is_test_row(c)]
    chains = {_setting(c): c for c in rows if _chain(c)}
    found = []
    for c in rows:
        chain = chains.get(_setting(c))
        if c.category != "speculative" or not is_tree_row(c) or chain is None:
            continue
        try:
            alpha = fit_alpha(chain.acceptance_length, chain.steps, 1, chain.steps + 1, 0.0)
            rho = fit_rank_decay(c.acceptance_length, alpha, c.steps, c.topk, c.draft_tokens)
        except ValueError:  # a tree AL the chain's alpha cannot reach at any rho
            continue
        found.append(round(rho, 4))
    return (round(statistics.median(found), 4) if found else None), found


def _variant(case: Case, rho: float, jitter: float | None) -> tuple[Case, float | None, str]:
    """The row as a fold runs it, the rank decay it needs (None: not a tree) and its key."""
    tree = case.category in RATIO_CATEGORIES and is_tree_row(case)
    if jitter is not None and _variant_jitter(case):
        case = dataclasses.replace(case, length_jitter=jitter)
        key = f"{case.id}|j{jitter:g}"
    else:
        key = case.id
    return case, (rho if tree else None), (f"{key}|r{rho:g}" if tree else key)


Task = tuple[str, Case, str, dict[str, float] | None, float | None]


def _run(task: Task) -> tuple[str, str, dict[str, float]]:
    key, case, label, costs, rho = task
    return key, label, presets.probe_times(case, costs, rho)


class Probes:
    """Probe runs by row variant (:func:`_variant`) and label, simulated on demand."""

    def __init__(self, cache: dict[str, dict[str, dict[str, float]]] | None = None) -> None:
        self.runs = cache if cache is not None else {}

    def tasks(self, case: Case, rho: float, jitter: float | None) -> list[Task]:
        variant, tree_rho, key = _variant(case, rho, jitter)
        have = self.runs.get(key, {})
        wanted: list[tuple[str, dict[str, float] | None]] = [("ideal", None)]
        if engine_preset(case) in presets.FITTED:
            wanted = [(label, costs) for label, costs in presets.probe_runs(variant)]
        return [(key, variant, lb, costs, tree_rho) for lb, costs in wanted if lb not in have]

    def simulate(
        self, tasks: list[Task], workers: int, progress: Callable[[int, int], None] | None
    ) -> None:
        unique = list({(t[0], t[2]): t for t in tasks}.values())
        unique.sort(key=lambda t: -(t[1].batch * t[1].output_tokens))
        pool = ProcessPoolExecutor(max_workers=workers) if workers > 1 else None
        with pool or contextlib.nullcontext():
            done = pool.map(_run, unique) if pool is not None else map(_run, unique)
            for n, (key, label, times) in enumerate(done, 1):
                self.runs.setdefault(key, {})[label] = times
                if progress is not None:
                    progress(n, len(unique))

    def row(self, case: Case, rho: float, jitter: float | None) -> presets.AffineRow | None:
        """The fitted-engine row as an affine function of its overheads (None: ``ideal``)."""
        variant, _, key = _variant(case, rho, jitter)
        if engine_preset(case) not in presets.FITTED:
            return None
        return presets.AffineRow(variant, self.runs[key])

    def ideal(self, case: Case, rho: float, jitter: float | None) -> float:
        """A row without an engine preset, physics only."""
        variant, _, key = _variant(case, rho, jitter)
        return quantity(variant, self.runs[key]["ideal"])


def _measured(case: Case) -> float:
    return case.measured


def _fit_engines(
    rows: list[presets.AffineRow], labels: dict[str, str], train: list[Case]
) -> dict[str, np.ndarray | None]:
    """Each engine's overheads on ``rows`` less the labelled (None: no row), every reporter
    weighing the same (:func:`simspec.fit.presets.reporter_weights`); its measured terms from
    the direct measurements among the fold's ``train`` rows
    (:func:`simspec.fit.presets.measured_values`)."""
    reporters = source_reporters([r.case for r in rows])
    out: dict[str, np.ndarray | None] = {}
    for engine in presets.FITTED:
        keys = presets.priced_keys(engine)
        used = [
            r
            for r in rows
            if r.engine == engine and r.case.id not in labels and not is_test_row(r.case)
        ]
        pinned = presets.measured_values(engine, train)
        theta = presets.fit(used, keys, reporters, pinned) if used else None
        out[engine] = None if theta is None else presets.round_values(theta, keys)
    return out


Fit = tuple[float | None, dict[str, np.ndarray | None]]


def _fold_fit(train: list[Case], probes: Probes, rho: float, labels: dict[str, str]) -> Fit:
    """The fold's spread and its presets, from its training rows alone."""
    jittered = [c for c in train if _variant_jitter(c) and not is_test_row(c)]
    grid = _grid(train)
    best: tuple[float, float | None, dict[str, np.ndarray | None]] | None = None
    scored = [c for c in jittered if c.id not in labels]
    fitted = [
        c for c in train if not is_test_row(c) and c.category not in presets.MEASUREMENT_CATEGORIES
    ]
    for jitter in grid:
        rows = [r for c in fitted if (r := probes.row(c, rho, jitter)) is not None]
        thetas = _fit_engines(rows, labels, train)
        errors = []
        for c in scored:  # the rows the spread changes, as the file has them (not the variant)
            if engine_preset(c) not in presets.FITTED:
                errors.append(abs(probes.ideal(c, rho, jitter) / _measured(c) - 1))
            elif (theta := thetas[engine_preset(c)]) is not None:
                row = probes.row(c, rho, jitter)
                assert row is not None
                errors.append(abs(presets.rel(row, theta)))
        score = statistics.median(errors) if errors else 0.0
        if best is None or score < best[0] - 1e-12:
            best = (score, jitter, thetas)
    assert best is not None
    return best[1], best[2]


def _fold_predict(held: list[Case], probes: Probes, rho: float, fit: Fit) -> list[dict[str, Any]]:
    """The held-out decode / speculative rows predicted with the fold's spread and presets."""
    jitter, thetas = fit
    out = []
    for c in held:
        engine = engine_preset(c)
        item: dict[str, Any] = {"id": c.id, "category": c.category, "engine": engine}
        item["measured"] = _measured(c)
        if engine not in presets.FITTED:
            item["predicted"] = probes.ideal(c, rho, jitter)
        elif (theta := thetas[engine]) is None:
            item["predicted"] = None
            item["note"] = f"not identifiable out of sample: no {engine} row outside this group"
        else:
            row = probes.row(c, rho, jitter)
            assert row is not None
            item["predicted"] = row.predict(theta)
        out.append(item)
    return out


def _kernel_form(rows: list[kernels.Row], groups: list[str]) -> tuple[kernels.Form, str]:
    """The form with the lowest leave-one-group-out median over ``rows`` (the fold's)."""
    names = sorted(set(groups))
    if len(names) < 2:
        default = RooflineParams().moe_kernel
        form = next((f for f in kernels.FORMS if f.name == default), kernels.FORMS[0])
        return form, "one training group: the default form"
    scores = {}
    for form in kernels.FORMS:
        medians = []
        for g in names:
            fit_rows = [r for r, h in zip(rows, groups, strict=True) if h != g]
            test = [r for r, h in zip(rows, groups, strict=True) if h == g]
            params = kernels.fit(form, fit_rows).params
            medians.append(float(np.median(np.abs(kernels.relative_errors(params, test)))))
        scores[form.name] = statistics.median(medians)
    name = min(scores, key=lambda n: scores[n])
    form = next(f for f in kernels.FORMS if f.name == name)
    return form, "inner leave-one-group-out: " + ", ".join(
        f"{n} {v:.1%}" for n, v in scores.items()
    )


def _fold_kernel(
    kernel_cases: list[Case], held: set[str], default: simspec.Scenario
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Choose and fit the kernel form without the held-out group; predict its kernel rows."""
    fittable = [c for c in kernel_cases if not is_test_row(c)]
    rows = kernels.load_rows(CaseFile(sources={}, cases=fittable))  # fit rows only, in order
    pairs = [
        (r, fold_key(c))
        for r, c in zip(rows, fittable, strict=True)
        if r.series in kernels.FIT_SERIES and r.tokens <= kernels.M_MAX and c.id not in held
    ]
    if not pairs:
        return {"note": "no kernel fit series outside this group"}, [
            {"id": c.id, "category": "kernel", "engine": "ideal", "measured": c.value,
             "predicted": None, "note": "not identifiable out of sample: no kernel fit row "
             "outside this group"}
            for c in kernel_cases if c.id in held
        ]  # fmt: skip
    train = [r for r, _ in pairs]
    form, why = _kernel_form(train, [g for _, g in pairs])
    fitted = kernels.fit(form, train)
    values = {k: float(v) * s for k, v, s in zip(form.keys, fitted.x, form.scales, strict=True)}
    changes: dict[str, Any] = {"moe_kernel": form.name, **values}
    params = dataclasses.replace(default.roofline, **changes)
    out = [
        {"id": c.id, "category": "kernel", "engine": "ideal", "measured": c.value,
         "predicted": predict_kernel_us(c, default, params)}
        for c in kernel_cases if c.id in held
    ]  # fmt: skip
    return {"form": form.name, "why": why, "constants": values}, out


def nested_folds(
    cases: Sequence[Case],
    *,
    workers: int = 1,
    probes: dict[str, dict[str, dict[str, float]]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Every group held out in turn (module docstring): the fold table.

    Returns
    -------
    dict
        ``full`` (the choices on all rows: labels, rank decay), ``folds`` (per group: held-out
        rows, labels, rank decay, spread, preset values, kernel form), ``rows`` (every held-out
        row's measured and out-of-sample predicted value, or why none) and ``caveats``.
    """
    cases = list(cases)
    store = Probes(probes)
    plan = []  # (group, training rows, rank decay, from the prior?); None: every row, no fold
    for g in [*sorted({fold_key(c) for c in cases}), None]:
        train = [c for c in cases if fold_key(c) != g]
        rho, _ = rank_decay(train)
        plan.append((g, train, rho if rho is not None else RANK_DECAY_PRIOR, rho is None))
    tasks = []
    for _g, train, rho, _prior in plan:
        grid = _grid(train)
        for c in cases:  # the rows a fold may fit on, at every spread it may choose
            if c.category != "kernel" and not is_test_row(c):
                for jitter in grid if _variant_jitter(c) else (None,):
                    tasks += store.tasks(c, rho, jitter)
    store.simulate(tasks, workers, progress)
    fits: dict[str | None, Fit] = {}  # each fold's, made once
    tasks = []  # a test row informs no fit: only its own fold predicts it, at the fold's spread
    for g, train, rho, _prior in plan:  # g None: every row trains, none is held out
        held = [c for c in cases if fold_key(c) == g and c.category != "kernel"]
        if held or g is None:
            fits[g] = _fold_fit(train, store, rho, inconsistent(train))
        for c in held:
            if is_test_row(c):
                tasks += store.tasks(c, rho, fits[g][0])
    store.simulate(tasks, workers, progress)
    default = simspec.load_scenario()
    kernel_cases = [c for c in cases if c.category == "kernel"]
    folds, rows, caveats = [], [], []
    for g, train, rho, prior in plan[:-1]:
        held = [c for c in cases if fold_key(c) == g]
        labels = inconsistent(train)
        decode_held = [c for c in held if c.category != "kernel"]
        fold: dict[str, Any] = {"group": g, "held_out": len(held), "labels": sorted(labels)}
        if decode_held:
            jitter, thetas = fits[g]
            out = _fold_predict(decode_held, store, rho, fits[g])
            fold |= {"rank_decay": rho, "rank_decay_prior": prior, "length_jitter": jitter}
            fold["presets"] = {
                e: None if t is None else dict(zip(presets.priced_keys(e), t.tolist(), strict=True))
                for e, t in thetas.items()
            }
            rows += [item | {"group": g} for item in out]
        if any(c.category == "kernel" for c in held):
            kernel, out = _fold_kernel(kernel_cases, {c.id for c in held}, default)
            fold["kernel"] = kernel
            rows += [item | {"group": g} for item in out]
            if decode_held:
                caveats.append(
                    f"{g} holds kernel and decode rows: its decode rows are priced with the "
                    "kernel constants fitted on every kernel row"
                )
        folds.append(fold)
    _, _, full_rho, full_prior = plan[-1]
    full_labels = inconsistent(cases)
    full_jitter = fits[None][0]
    full = {
        "labels": full_labels,
        "rank_decay": full_rho,
        "rank_decay_prior": full_prior,
        "rank_decay_per_tree_row": rank_decay(cases)[1],
        "length_jitter": full_jitter,
    }
    return {
        "full": full,
        "jitter_grid": list(JITTER_GRID),
        "folds": folds,
        "rows": rows,
        "caveats": caveats,
    }
