"""How far simspec's answers land from published measurements it was not fitted on, per engine
preset: the table behind a run's ``within-error`` guardrail (``simspec/catalog/accuracy.json``).

For a fitted engine preset (sglang, vllm, trtllm) the numbers are out of sample: each of the
preset's rows predicted with everything fitted or chosen without the row's reporter (the nested
fold table, :mod:`simspec.fit.nested`); rows not identifiable out of sample (no row of the
engine outside the held-out reporter) are left out. The physics-only preset ``ideal`` fits no
engine term on the rows, so its numbers are its own predictions of every decode and speculative
row. ``all`` pools the fitted presets' out-of-sample rows: what a preset with no held-out row
of a category falls back on.

The relative error is predicted / measured − 1, so a prediction ``p`` with a typical
|error| ``e`` (the median) stands for a measurement between p / (1 + e) and p / (1 − e).
Each entry also gives the signed median (``median_relative_error``: which way the predictions
lean), and a speculative entry its batch-1 rows summarised apart (``batch_one``): at one
request per pass a verify pass's extra experts and an iteration's fixed costs weigh most, and
the published batch-1 speedups lean one way where the others do not, so a run at batch 1 is
told by those rows (:func:`~simspec.analysis.guardrails.within_error_warning`).

``published`` holds the same errors per target model, GPU and tensor-parallel degree
(:func:`~simspec.analysis.guardrails.published_key`) and engine preset: for a fitted preset,
its engine's rows, each predicted out of sample (its nested fold's prediction, else, for a row
the shipped numbers were not fitted on, :func:`~.fitted.fitted_on`, the shipped one, out of
sample as it stands); for ``ideal``, the physics-only prediction of every row of that model,
GPU and degree; rows the stated rules call inconsistent (:mod:`.consistency`) are left out;
with how many rows the prediction is faster than the measurement (a shorter time, a higher
throughput or speedup). The same rows are also pooled per GPU maker
(:func:`~simspec.analysis.guardrails.maker_key`, every model and degree on that maker's GPUs).
A run of that model on that GPU at that degree under that preset reads it, and a run with
fewer such rows its maker's (the ``published-miss`` guardrail,
:mod:`simspec.analysis.guardrails`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from simspec import catalog
from simspec.analysis.guardrails import maker_key, published_key

from ._sections import RATES, ttft_summary
from .cases import engine_preset
from .consistency import inconsistent
from .fitted import fitted_on
from .predictions import Outcome, speedup_sign_right

#: The categories whose errors a run's answer carries (a decode step, a speculative speedup).
CATEGORIES = ("decode", "speculative")
#: The pooled entry's name in :func:`accuracy_table`.
POOLED = "all"


def _entry(category: str, rows: Iterable[tuple[float, float, str]]) -> dict[str, Any] | None:
    """Rows (predicted, measured, reporter) of one category summarised; None without rows.
    ``median_relative_error`` is the signed median (above 0: predicted faster or larger)."""
    rows = list(rows)
    if not rows:
        return None
    errors = [p / m - 1.0 for p, m, _ in rows]
    signs = [speedup_sign_right(category, p, m) for p, m, _ in rows]
    checked = [s for s in signs if s is not None]
    return {
        "rows": len(rows),
        "reporters": len({r for _, _, r in rows}),
        "median_abs_relative_error": round(statistics.median(abs(e) for e in errors), 4),
        "median_relative_error": round(statistics.median(errors), 4),
        "wrong_signs": sum(1 for s in checked if not s),
        "signs_checked": len(checked),
    }


#: The sub-entry of a speculative entry that holds its batch-1 rows alone: one request per
#: pass, where a verify pass's extra experts and every fixed cost of an iteration weigh most,
#: and the published rows lean one way (``within-error`` reads it for a run at batch 1).
BATCH_ONE = "batch_one"


def _entries(
    rows: list[tuple[float, float, str, str, str]], batch: dict[str, int]
) -> dict[str, Any]:
    """Rows (predicted, measured, reporter, category, id) summarised per category
    (:data:`CATEGORIES`); a speculative entry also holds its batch-1 rows' (:data:`BATCH_ONE`)."""
    out: dict[str, Any] = {}
    for c in CATEGORIES:
        mine = [(p, m, who, i) for p, m, who, category, i in rows if category == c]
        entry = _entry(c, ((p, m, who) for p, m, who, _ in mine))
        if entry is None:
            continue
        if c == "speculative":
            one = _entry(c, ((p, m, who) for p, m, who, i in mine if batch.get(i) == 1))
            if one is not None:
                entry[BATCH_ONE] = one
        out[c] = entry
    return out


def accuracy_table(
    outcomes: list[Outcome], folds: dict[str, Any], inputs_hash: str
) -> dict[str, Any]:
    """Per engine preset and category (:data:`CATEGORIES`): rows, reporters, median
    |relative error|, wrong signs of speedup − 1 (module docstring for what is out of sample).

    ``outcomes`` are every row's in-sample predictions (with the physics-only ``ideal`` one),
    ``folds`` the nested fold table, ``inputs_hash`` the hash both were made from.
    """
    engines: dict[str, dict[str, Any]] = {}
    batch = {o.case.id: o.case.batch for o in outcomes}
    held = [r for r in folds["rows"] if r["predicted"] is not None and r["engine"] != "ideal"]
    for engine in [*sorted({r["engine"] for r in held}), POOLED]:
        mine = [r for r in held if engine in (POOLED, r["engine"])]
        engines[engine] = _entries(
            [(r["predicted"], r["measured"], r["group"], r["category"], r["id"]) for r in mine],
            batch,
        )
    engines["ideal"] = _entries(
        [
            (o.ideal, o.measured, o.case.reporter, o.case.category, o.case.id)
            for o in outcomes
            if o.ideal is not None
        ],
        batch,
    )
    return {
        "inputs_hash": inputs_hash,
        "method": "fitted presets: nested leave-one-reporter-out (validation/folds.json); "
        "ideal: the physics-only prediction of every row; all: the fitted presets' "
        "out-of-sample rows pooled; published: per model@gpu/tp (and per maker:<GPU maker>) and "
        "preset, a fitted preset's rows "
        "each predicted out of sample (its fold's prediction, else the shipped one where the "
        "shipped numbers were not fitted on the row), ideal's physics-only predictions",
        "engines": {name: engines[name] for name in sorted(engines)},
        "published": published_table(outcomes, folds),
        "ttft": ttft_summary(outcomes),
    }


def published_table(outcomes: list[Outcome], folds: dict[str, Any]) -> dict[str, Any]:
    """Per model, GPU and tensor-parallel degree (:func:`~simspec.analysis.guardrails.
    published_key`), engine preset and category (:data:`CATEGORIES`): the :func:`_entry`
    of the rows' out-of-sample predictions (module docstring) and ``faster``, how many of them
    predict faster than measured. A fitted preset's entry holds the rows of its engine;
    ``ideal``'s the physics-only prediction of every row of that model, GPU and degree. Each
    row also counts under its GPU's maker (:func:`~simspec.analysis.guardrails.maker_key`)."""
    held = {r["id"]: r["predicted"] for r in folds["rows"]}
    doubtful = inconsistent([o.case for o in outcomes])
    found: dict[tuple[str, str, str], list[tuple[float, float, str, bool]]] = {}
    for o in outcomes:
        c = o.case
        if c.category not in CATEGORIES or c.id in doubtful:
            continue
        rate = c.category == "speculative" or c.quantity in RATES
        keys = (
            published_key(c.model, c.gpu, c.tp),
            maker_key(catalog.get_gpu(c.gpu).display_name),
        )
        preset = engine_preset(c)
        predicted = held.get(c.id)
        if predicted is None and not fitted_on(c):
            predicted = o.predicted
        for key in keys:
            if predicted is not None and preset != "ideal":
                found.setdefault((key, preset, c.category), []).append(
                    (predicted, o.measured, c.reporter, rate)
                )
            if o.ideal is not None:
                found.setdefault((key, "ideal", c.category), []).append(
                    (o.ideal, o.measured, c.reporter, rate)
                )
    table: dict[str, Any] = {}
    for (key, preset, category), rows in sorted(found.items()):
        entry = _entry(category, ((p, m, r) for p, m, r, _ in rows))
        assert entry is not None
        entry["faster"] = sum(1 for p, m, _, rate in rows if (p > m if rate else p < m))
        table.setdefault(key, {}).setdefault(preset, {})[category] = entry
    return table
