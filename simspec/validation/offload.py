"""Predicting the expert-offloading rows (``validation/offload.toml``, category "offload").

A row becomes the default scenario with the row's model, precision, GPU and lengths
(:func:`simspec.validation.predictions.scenario_data`) plus its ``[offload]`` table:

- ``experts``, ``cache_policy``, ``prefetch`` (``prefetch_accuracy`` when the row states one),
  ``miss`` as written; a cache of ``cache_experts_per_layer`` slots, or ``cache_gb``, or neither
  (what GPU memory is left); a fractional number of slots per layer (Fiddler's 56 of 256
  experts) becomes the same bytes as ``cache_gb``;
- the host link: ``host_link_gb_per_s`` when the source measured it, else, when the machine's
  PCIe generation is below the card's, the bandwidth derived for that generation (the card's
  lanes, :meth:`simspec.physics.hardware.GpuSpec.host_link_bytes_per_s`), else the card's own;
- ``working_set``: the routing's per-request working sets (``[routing] working_set``), for rows
  of a model whose routing statistics give one;
- ``attention_precision`` and the host (``[hardware.host]``: ``host_memory_gb_per_s``, or its
  ``host_memory_channels`` and ``host_memory_mt_per_s``) when stated; ``host_moe_layers`` (the
  layers whose experts live on the host); a row whose layers are split over
  ``layer_split_gpus`` GPUs (run one after the other at batch 1) runs on one such GPU with their
  summed memory;
- a row that states its cache size ran that cache on that GPU: all its memory counts
  (``memory_utilization = 1``), so the scenario's memory check does not refuse the source's own
  configuration (Fiddler's 56 fp16 experts on a 24 GB card);
- ``framework``: the offloading runtime's host time (an offload framework preset,
  :mod:`simspec.params.offload_framework`); :func:`leave_one_reporter_out` fits its
  ``layer_host_s`` on every reporter's rows but one and predicts that one's;
- a row with a ``drafter`` runs ``fixed`` k = ``steps`` with i.i.d. acceptance whose chain has the
  measured acceptance length; otherwise k = 0.

Routing is the analytic mode of every fidelity row (the expected union and the expected hit rate
of :mod:`simspec.costs.offload`), and every row is predicted with the physics-only engine
("ideal"): a serving engine's preset does not describe an offloading runtime; its host time is
the row's offload framework. The fit of ``layer_host_s`` (:func:`fit_layer_host_s`) minimises the
squared log error of the rows' seconds per token; each row's seconds per token is piecewise
linear in the host time (copies hide behind it or not), so two runs per row
(:data:`FIT_TRIALS_S`, :func:`trial_lines`) give its line and the fit is a grid search on the
lines, then every fold's rows are run with the fold's value. The shipped value
(``hf-eager.toml``) is this fit on the framework rows of role "fit". The quantity:
``tokens_per_s`` is the run's output throughput, ``hit_rate`` the fraction of the decode passes'
needed experts found on the GPU (Σ needed − missed over Σ needed).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import simspec
from simspec import catalog
from simspec.config.load import scenario_from_dict
from simspec.errors import InputError
from simspec.physics.hardware import PCIE_LANE_BYTES_PER_S

from .cases import OFFLOAD, Case, CaseFile, target_spec
from .predictions import ALPHA_MAX, Outcome, scenario_data, tree_alpha

#: Mixtral-offloading's configurations in the order the paper measured them (fastest first).
CONFIGURATION_ORDER = ("full", "no_prefetch", "no_lru", "naive")


def link_gb_per_s(case: Case) -> float | None:
    """The host link a row's copies cross, GB/s, when it differs from the card's (module doc)."""
    if case.host_link_gb_per_s:
        return case.host_link_gb_per_s
    gpu = catalog.get_gpu(case.gpu)
    if not case.pcie_generation or case.pcie_generation >= gpu.pcie_generation:
        return None
    machine = dataclasses.replace(
        gpu,
        pcie_generation=case.pcie_generation,
        host_link_pinned_bytes_per_s=0.0,
        host_link_pageable_bytes_per_s=0.0,
    )
    assert case.pcie_generation in PCIE_LANE_BYTES_PER_S
    return machine.host_link_bytes_per_s(pinned=case.experts == "host_pinned") / 1e9


def offload_table(case: Case, layer_host_s: float | None = None) -> dict[str, Any]:
    """The row's ``[offload]`` table (module docstring); ``layer_host_s`` overrides the
    framework preset's (a fit's trial value)."""
    table: dict[str, Any] = {
        "experts": case.experts,
        "cache_policy": case.cache_policy,
        "prefetch": case.prefetch,
        "miss": case.miss,
    }
    if case.framework:
        table["framework"] = case.framework
        if layer_host_s is not None:
            table["layer_host_s"] = layer_host_s
    if case.prefetch_accuracy:
        table["prefetch_accuracy"] = case.prefetch_accuracy
    slots = case.cache_experts_per_layer
    if case.cache_policy == "none":
        pass
    elif slots and float(slots).is_integer():
        table["cache_experts_per_layer"] = int(slots)
    elif slots:  # a fractional slot count: the same bytes over all MoE layers
        shape = target_spec(case).shape
        table["cache_gb"] = slots * shape.num_moe_layers * shape.expert_bytes / 1e9
    elif case.cache_gb:
        table["cache_gb"] = case.cache_gb
    if case.host_moe_layers:
        table["host_moe_layers"] = case.host_moe_layers
    link = link_gb_per_s(case)
    if link is not None:
        table["link_gb_per_s"] = link
    return table


def offload_scenario_data(case: Case, layer_host_s: float | None = None) -> dict[str, Any]:
    """The scenario data of an offload row (module docstring)."""
    data = scenario_data(case, "ideal")
    data["offload"] = offload_table(case, layer_host_s)
    if case.cache_experts_per_layer or case.cache_gb:  # the source ran this cache on this GPU
        data["hardware"]["memory_utilization"] = 1.0
    if case.attention_precision:
        data["model"]["attention_precision"] = case.attention_precision
    if case.working_set:
        data["routing"]["working_set"] = case.working_set
    host: dict[str, Any] = {}
    if case.host_memory_gb_per_s:
        host["memory_bytes_per_s"] = case.host_memory_gb_per_s * 1e9
    if case.host_memory_channels and case.host_memory_mt_per_s:
        host |= {
            "memory_channels": case.host_memory_channels,
            "memory_mt_per_s": case.host_memory_mt_per_s,
        }
    if host:
        data["hardware"]["host"] = host
    if case.layer_split_gpus > 1:  # one GPU of the split's summed memory stands in
        gpu = catalog.get_gpu(case.gpu)
        data["hardware"]["custom"] = {
            **dataclasses.asdict(gpu),
            "memory_bytes": gpu.memory_bytes * case.layer_split_gpus,
        }
    if case.drafter:
        data["model"]["drafter"] = case.drafter
        data["policies"] = [{"name": "fixed", "draft_tokens": case.steps}]
        alpha = min(tree_alpha(case), ALPHA_MAX)
        data["acceptance"] = {**data.get("acceptance", {}), "process": "iid", "alpha": alpha}
    return data


def predict_offload(case: Case, layer_host_s: float | None = None) -> Outcome:
    """One offload row's prediction (or why there is none); ``layer_host_s`` overrides the
    row's framework preset (rows without a framework ignore it)."""
    try:
        data = offload_scenario_data(case, layer_host_s)
        scenario = scenario_from_dict(data, f"validation case {case.id}")
        result = simspec.run(scenario, keep_logs=case.quantity == "hit_rate")
    except InputError as exc:
        return Outcome(case, case.value, None, str(exc))
    row = result.policies[-1]
    if case.quantity == "tokens_per_s":
        value = float(row.tokens_per_s)
    else:
        assert result.logs is not None
        log = result.logs[row.label].offload
        if log is None:
            return Outcome(case, case.value, None, "the run recorded no offloaded passes")
        needed = sum(n for n, d in zip(log.needed, log.decode, strict=True) if d)
        missed = sum(m for m, d in zip(log.missed, log.decode, strict=True) if d)
        value = 1.0 - missed / needed if needed else 1.0
    return Outcome(case, case.value, value, ideal=value)


def order_right(outcomes: list[Outcome]) -> dict[str, bool | None]:
    """Per Mixtral-offloading series (id before "["): are the predictions of its configurations
    in the measured order (full > no_prefetch > no_lru > naive)? None without predictions."""
    series: dict[str, list[Outcome]] = {}
    for o in outcomes:
        if o.case.configuration in CONFIGURATION_ORDER:
            series.setdefault(o.case.id.split("[")[0], []).append(o)
    result: dict[str, bool | None] = {}
    for name, rows in series.items():
        rows = sorted(rows, key=lambda o: CONFIGURATION_ORDER.index(o.case.configuration))
        predicted = [o.predicted for o in rows if o.predicted is not None]
        if len(predicted) < len(rows):
            result[name] = None
            continue
        result[name] = all(a > b for a, b in itertools.pairwise(predicted))
    return result


def offload_summary(
    outcomes: list[Outcome],
    loro: tuple[list[Outcome], dict[str, float | None]] | None = None,
) -> dict[str, Any]:
    """Median and max |relative error| of the held-out (test) and fit rows, the hit-rate rows'
    errors in points, and the configurations' order per Mixtral-offloading series; with
    ``loro`` (:func:`leave_one_reporter_out`) first the out-of-sample errors of the framework
    rows, the value each fold fitted, and the order of the out-of-sample predictions."""

    def errors(rows: list[Outcome]) -> dict[str, Any]:
        errs = [abs(o.relative_error) for o in rows if o.relative_error is not None]
        return {
            "rows": len(rows),
            "predicted_rows": len(errs),
            "median_abs_relative_error": statistics.median(errs) if errs else None,
            "max_abs_relative_error": max(errs) if errs else None,
        }

    speed = [o for o in outcomes if o.case.quantity == "tokens_per_s"]
    hits = [o for o in outcomes if o.case.quantity == "hit_rate" and o.predicted is not None]
    order = order_right(outcomes)
    first: dict[str, Any] = {}
    if loro is not None:
        held, fitted = loro
        first = {
            "out_of_sample": errors(held)
            | {
                "layer_host_s_by_left_out_reporter": fitted,
                "order_right": order_right(held),
            }
        }
    return first | {
        "category": OFFLOAD,
        "held_out": errors([o for o in speed if o.case.role == "test"]),
        "fit": errors([o for o in speed if o.case.role == "fit"]),
        "hit_rate_max_abs_points": (
            max(abs(o.predicted - o.measured) * 100 for o in hits)  # type: ignore[operator]
            if hits
            else None
        ),
        "hit_rate_max_abs_points_by_reporter": {
            r: max(abs(o.predicted - o.measured) * 100 for o in hits if o.case.reporter == r)  # type: ignore[operator]
            for r in sorted({o.case.reporter for o in hits})
        },
        "order_right": order,
        "targets": {"held_out_median": 0.20, "hit_rate_points": 10.0},
    }


#: The trial values of ``layer_host_s`` the fit interpolates between, s (module docstring).
FIT_TRIALS_S = (0.005, 0.015)
#: The fit's search range and step for ``layer_host_s``, s.
FIT_RANGE_S = (0.0, 0.03)
FIT_STEP_S = 1e-5


def _rows_fit(rows: list[Case]) -> list[Case]:
    """The rows a framework fit may use: decode rates of rows that name a framework."""
    return [c for c in rows if c.framework and c.quantity == "tokens_per_s"]


def _seconds(outcome: Outcome) -> float | None:
    """Seconds per output token of a tok/s prediction (None without one)."""
    return None if not outcome.predicted else 1.0 / outcome.predicted


def trial_lines(rows: list[Case], *, workers: int = 1) -> dict[str, tuple[float, float]]:
    """Per row id, its predicted seconds per token as a line in ``layer_host_s``: (intercept,
    slope) through the predictions at :data:`FIT_TRIALS_S`. A row's time is piecewise linear
    in the host time (copies hide behind it or not), nearly straight over the fitted range."""
    a, b = FIT_TRIALS_S
    low = _predict_with(rows, a, workers)
    high = _predict_with(rows, b, workers)
    lines = {}
    for lo, hi in zip(low, high, strict=True):
        t_lo, t_hi = _seconds(lo), _seconds(hi)
        if t_lo is not None and t_hi is not None:
            slope = (t_hi - t_lo) / (b - a)
            lines[lo.case.id] = (t_lo - slope * a, slope)
    return lines


def fit_layer_host_s(rows: list[Case], lines: dict[str, tuple[float, float]]) -> float | None:
    """The ``layer_host_s`` that minimises Σ log²(predicted / measured seconds per token) over
    ``rows`` (their :func:`trial_lines`), on a grid of :data:`FIT_STEP_S` over
    :data:`FIT_RANGE_S`; None when no row has a line."""
    used = [c for c in rows if c.id in lines]
    if not used:
        return None
    lo, hi = FIT_RANGE_S
    grid = [lo + i * FIT_STEP_S for i in range(round((hi - lo) / FIT_STEP_S) + 1)]
    best, best_cost = None, math.inf
    for theta in grid:
        cost = 0.0
        for c in used:
            intercept, slope = lines[c.id]
            t = intercept + slope * theta
            cost += math.log(t * c.value) ** 2 if t > 0 else math.inf
        if cost < best_cost:
            best, best_cost = theta, cost
    return best


def _predict_with(rows: list[Case], layer_host_s: float, workers: int) -> list[Outcome]:
    """Every row predicted with ``layer_host_s`` for its framework."""
    trials = [(c, layer_host_s) for c in rows]
    if workers <= 1:
        return [predict_offload(c, t) for c, t in trials]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(predict_offload, *zip(*trials, strict=True)))


def leave_one_reporter_out(
    cases: list[Case], *, workers: int = 1
) -> tuple[list[Outcome], dict[str, float | None]]:
    """Out-of-sample predictions of the framework rows: each reporter's rows predicted with
    ``layer_host_s`` fitted on every other reporter's framework rows (:func:`fit_layer_host_s`),
    and the value each fold fitted, by left-out reporter."""
    rows = _rows_fit(cases)
    lines = trial_lines(rows, workers=workers)
    out: list[Outcome] = []
    fitted: dict[str, float | None] = {}
    for reporter in sorted({c.reporter for c in rows}):
        mine = [c for c in rows if c.reporter == reporter]
        theta = fit_layer_host_s([c for c in rows if c.reporter != reporter], lines)
        fitted[reporter] = theta
        if theta is not None:
            out += _predict_with(mine, theta, workers)
    order = {c.id: i for i, c in enumerate(cases)}
    return sorted(out, key=lambda o: order[o.case.id]), fitted


def predict_offload_all(cases: list[Case], *, workers: int = 1) -> list[Outcome]:
    """Every offload row's :class:`Outcome`, in order, on ``workers`` processes."""
    if workers <= 1:
        return [predict_offload(c) for c in cases]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(predict_offload, cases))


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def offload_lines(outcomes: list[Outcome], cases: CaseFile, summary: dict[str, Any]) -> list[str]:
    """REPORT.md's section on expert offloading (``validation/offload.toml``)."""
    held, fit = summary["held_out"], summary["fit"]
    hits = summary["hit_rate_max_abs_points"]
    lines = [
        "",
        "## Expert offloading (validation/offload.toml)",
        "",
        "Experts in host memory behind a GPU expert cache (`[offload]`; method:",
        "`simspec/validation/offload.py`). Engine `ideal`: the catalog's host link (PCIe x 0.8",
        "pinned, a third of that pageable) and the routing's expected hit rates; rows run by an",
        "eager Hugging Face transformers runtime (Mixtral-offloading and its re-implementations,",
        '`framework = "hf-eager"`) add that runtime\'s host time per decoder layer, one fitted',
        "term (`layer_host_s`, simspec/catalog/offload_frameworks/hf-eager.toml: fitted on",
        "Mixtral-offloading's first-hand PCIe 4 rows, role fit); a miss is one transfer. Rows",
        "that ran Mixtral-offloading's released repository (SP-MoE's MO + SD baseline,",
        '`framework = "mixtral-offloading-release"`: the same host time) also swap: a miss into',
        "its full LRU cache copies the evicted expert back out on the same stream, two transfers",
        "(its ExpertCache, a design fact). Second-hand rows and Mixtral-offloading's PCIe 3",
        "machines (RTX 3060, T4) are held out (role test).",
        "",
    ]
    oos = summary.get("out_of_sample")
    if oos is not None:
        fitted = ", ".join(
            f"{k}: {'—' if v is None else f'{v * 1e3:.2f} ms'}"
            for k, v in oos["layer_host_s_by_left_out_reporter"].items()
        )
        wrong = [k for k, v in oos["order_right"].items() if v is False]
        lines += [
            "Out of sample first (leave one reporter out): each reporter's framework rows",
            "predicted with `layer_host_s` fitted on the other reporters' framework rows",
            f"(fitted, by left-out reporter: {fitted}).",
            "",
            "| rows | predicted | median abs rel. error | target | max |",
            "|---|---|---|---|---|",
            f"| framework rows, leave one reporter out, tok/s | {oos['predicted_rows']} of "
            f"{oos['rows']} | {_pct(oos['median_abs_relative_error'])} | ≤ 20% | "
            f"{_pct(oos['max_abs_relative_error'])} |",
            "",
            "Mixtral-offloading's configurations out of sample in the measured order: "
            + ("every series" if not wrong else "wrong in " + ", ".join(f"`{w}`" for w in wrong))
            + ".",
            "",
            "With the shipped presets:",
            "",
        ]
    lines += [
        "| rows | predicted | median abs rel. error | target | max |",
        "|---|---|---|---|---|",
        f"| held out (test), tok/s | {held['predicted_rows']} of {held['rows']} | "
        f"{_pct(held['median_abs_relative_error'])} | ≤ 20% | "
        f"{_pct(held['max_abs_relative_error'])} |",
        f"| fit rows, tok/s | {fit['predicted_rows']} of {fit['rows']} | "
        f"{_pct(fit['median_abs_relative_error'])} | — | {_pct(fit['max_abs_relative_error'])} |",
        "",
        "Hit-rate rows: largest |predicted − measured| "
        + ("—" if hits is None else f"{hits:.0f} points")
        + " (target ≤ 10 points); by reporter: "
        + ", ".join(
            f"{k} {v:.0f}"
            for k, v in summary.get("hit_rate_max_abs_points_by_reporter", {}).items()
        )
        + " points.",
        "",
        "Mixtral-offloading's configurations in the measured order (full > no prefetch > no",
        "LRU > naive), per GPU and expert precision:",
        "",
        "| series | order predicted |",
        "|---|---|",
    ]
    for name, right in summary["order_right"].items():
        lines.append(f"| {name} | {'—' if right is None else 'right' if right else '**wrong**'} |")
    lines += [
        "",
        "| case | configuration | GPU | experts | cache | prefetch | miss | role | quantity | "
        "measured | predicted | rel. error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        c = o.case
        size = (
            f"{c.cache_experts_per_layer:g}/layer"
            if c.cache_experts_per_layer
            else f"{c.cache_gb:g} GB"
            if c.cache_gb
            else "auto"
        )
        cache = "none" if c.cache_policy == "none" else f"{c.cache_policy} {size}"
        err = "—" if o.relative_error is None else f"{o.relative_error:+.0%}"
        predicted = "—" if o.predicted is None else f"{o.predicted:.4g}"
        lines.append(
            f"| {c.id} | {c.configuration} | {c.gpu} | {c.experts} | {cache} | {c.prefetch} | "
            f"{c.miss} | {c.role} | {c.quantity} | {c.value:.4g} | {predicted} | {err} |"
        )
    for o in outcomes:
        if o.error:
            lines.append(f"\n- `{o.case.id}` not predicted: {o.error}")
    lines += ["", "Offload rows not expressed yet:", ""]
    lines += [f"- {u.row}: {u.reason}." for u in cases.unexpressed]
    lines += ["", "Offload sources:", ""]
    lines += [
        f"- `{key}`: {src.get('title', '')} — {src['url']}"
        for key, src in sorted(cases.sources.items())
    ]
    return lines
