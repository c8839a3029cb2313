"""The engine presets' overheads, fitted on each engine's published rows.

For every engine with rows in ``validation/cases.toml`` the fixed overheads of its preset
(``simspec/catalog/engines/<engine>.toml``) are fitted by ``scipy.optimize.least_squares`` on
the relative errors of its decode and speculative rows, within physical bounds
(:func:`fit_presets`); ``simspec fidelity --fit-presets`` writes ``validation/preset_fit.json``
and, with ``--catalog DIR``, the presets' TOML files (:func:`preset_toml`).

A term that rows cannot identify but that is measured directly (:data:`MEASURED`) is taken
from its measurements instead: it prices the rows like the others and the fit leaves it where
they put it.

Every fixed overhead adds its value once per pass (or draft step, or collective) and nothing a
fixed-k run decides depends on time, so a run's times are affine in the overheads: each row is
simulated at zero overheads and once per overhead that can touch it, and the fit interpolates
those affine times exactly. Rows the stated rules of :mod:`simspec.validation.consistency` call
inconsistent are predicted and reported, not fitted; test rows (``role = "test"`` in the cases
file) never enter the fit.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from simspec.fit.ranges import fitted_ranges, range_toml
from simspec.validation.cases import (
    RATIO_CATEGORIES,
    Case,
    engine_preset,
    for_fitting,
    target_spec,
)
from simspec.validation.consistency import inconsistent
from simspec.validation.predictions import TIMES, quantity, run_times

#: Engine overheads: (unit of the probe run, lower bound, upper bound, start). Bounds are
#: physical: host time per pass of at most 5 ms (a scheduler step that stalls the GPU longer is
#: not a steady decode), per draft step at most 1 ms, at most 50 µs of software per layer's
#: collectives, at most 2.5 ms of host time a speculative iteration exposes (a quarter above
#: the largest direct measurement of it, :data:`MEASURED`).
BOUNDS = {
    "pass_overhead_s": (1e-3, 0.0, 0.005, 3e-4),
    "draft_step_overhead_s": (1e-3, 0.0, 0.001, 1e-4),
    "verify_overhead_s": (1e-3, 0.0, 0.0025, 1e-3),
    "comm_s_per_layer": (1e-5, 0.0, 5e-5, 5e-6),
    "fp8_moe_s_per_layer": (1e-5, 0.0, 1.5e-4, 3e-5),
}
#: The one place that says what each engine preset fits (at most three engine terms; the
#: GPU's kernel floors and collectives are physics from the catalog, not fitted). No vLLM or
#: TensorRT-LLM row is speculative, so their speculative terms keep the built-in values.
#: TensorRT-LLM's per-layer time is its FP8 MoE path's, not its collectives' (MEANING says why):
#: every fitted TensorRT-LLM row is FP8 at TP8, where the two cannot be told apart, and the NVFP4
#: rows at the same layouts (test rows) show no such time.
FITTED = {
    "sglang": ("pass_overhead_s", "comm_s_per_layer"),
    "vllm": ("pass_overhead_s", "comm_s_per_layer"),
    "trtllm": ("pass_overhead_s", "fp8_moe_s_per_layer"),
}
#: Engine terms taken from direct measurements of them instead of a fit (priced by the same
#: probe runs, never moved by the fit). SGLang's ``verify_overhead_s``, the host time a
#: speculative iteration exposes without its overlap scheduler for speculation (SpecV2), is
#: measured where one setting ran with and without SpecV2: the overlap rows of the cases file
#: (DeepSeek-R1 TP8, sgl-project/sglang PR #12128: 140.52 -> 159.71 tok/s at AL 2.296, 1.96 ms
#: per iteration) and :data:`CITED_HIDDEN_HOST_S`. Each is a lower bound of the exposure
#: (SpecV2 hides at most what it overlaps; PR #11821 says it still does not overlap fully), so
#: the term is the largest of them (:func:`measured_values`). The speculative rows alone cannot
#: identify it: their reporters disagree (fitted on them, it lands at its upper bound with the
#: rows of SpecForge #339 and AngelSlim #163, one reporter's, and at 0.5 ms without them).
MEASURED = {"sglang": ("verify_overhead_s",)}
#: Categories of rows that measure a :data:`MEASURED` term directly: they set it, the least
#: squares do not use them.
MEASUREMENT_CATEGORIES = ("overlap",)
#: Direct measurements per engine that no case row can carry, s: SGLang on Llama-3.1-8B with an
#: EAGLE head the catalog does not hold, (5, 1, 6), 246.80 -> 273.43 tok/s at AL ~3.0 with
#: SpecV2: 1.11 ms per iteration (sgl-project/sglang PR #11398, hnyls2002, another reporter
#: than PR #12128's).
CITED_HIDDEN_HOST_S = {"sglang": (1.11e-3,)}
#: What each fitted term stands for, written into the preset's notes (:func:`preset_toml`).
MEANING = {
    "pass_overhead_s": "host time per target pass the GPU waits for (scheduler step, batch "
    "metadata, sampler launch; plausible 0.1-1 ms for a Python scheduler, 0-1 ms where an "
    "overlap scheduler prepares the next pass while the GPU runs this one)",
    "verify_overhead_s": "host time a speculative iteration exposes without an overlap "
    "scheduler (the scheduler step the baseline hides, accepted tokens copied to the host, the "
    "next draft planned from them), not fitted: the largest of its direct measurements, the "
    "time SGLang's overlap scheduler for speculation hides (1.96 ms, sglang PR #12128; 1.11 ms, "
    "PR #11398; both lower bounds of the exposure: plausible 1-2.5 ms)",
    "comm_s_per_layer": "engine software per layer on top of NCCL's collective latency model "
    "(custom all-reduce or all-to-all launch, barriers, the dispatch's metadata; plausible "
    "0-50 us)",
    "fp8_moe_s_per_layer": "the engine's own time per MoE layer with FP8 routed experts beyond "
    "the fused-MoE kernel form fitted on Triton's tables (its FP8 block-scale MoE path: the "
    "activations' 1x128 quantisation and block-scaled grouped GEMMs at small batch). Physics "
    "alone predicts the engine's FP8 rows too fast (by up to 50 %, most at small batch) and its "
    "NVFP4 rows at the same layouts within -7 to +14 % or too slow, within each of three "
    "reporters (TensorRT-LLM issue #5929: DeepSeek-R1 FP8 on H200 and FP4 on B200 at TP8 "
    "EP1/4/8, one build; SemiAnalysis InferenceX of 2025-12-15: FP8 and FP4 on B200; "
    "TensorRT-LLM's GB200 recipes: GLM-4.7 FP8 and Qwen3-235B FP4), so the time is the FP8 MoE "
    "path's, not the collectives (plausible 0-100 us)",
}
#: The range in which each fitted term is physically plausible, s (MEANING says why); a fitted
#: value outside it is flagged in the preset's notes (:func:`preset_toml`): it then absorbs
#: time the physics misses on its rows rather than measuring the engine.
PLAUSIBLE = {
    "pass_overhead_s": (1e-4, 1e-3),
    "verify_overhead_s": (1e-3, 2.5e-3),
    "comm_s_per_layer": (0.0, 5e-5),
    "fp8_moe_s_per_layer": (0.0, 1e-4),
}


def plausible_range(key: str, engine: str = "") -> tuple[float, float]:
    """:data:`PLAUSIBLE` of ``key`` for ``engine``: an engine whose design overlaps its
    scheduler with the GPU (:data:`DESIGN`, TensorRT-LLM's by default) hides its host time per
    pass behind the pass before, so none of it need be exposed (lower bound 0)."""
    low, high = PLAUSIBLE[key]
    if key == "pass_overhead_s" and DESIGN.get(engine, {}).get("overlap_scheduling"):
        low = 0.0
    return low, high


def implausible(values: Mapping[str, float], engine: str = "") -> list[str]:
    """The fitted terms among ``values`` outside their plausible range for ``engine``
    (:func:`plausible_range`)."""
    outside = []
    for key, value in values.items():
        if key in PLAUSIBLE:
            low, high = plausible_range(key, engine)
            if not low <= value <= high:
                outside.append(key)
    return outside


#: Set by the engine's design, not fitted: EAGLE-3 in SGLang and vLLM runs one draft-extend
#: pass over the accepted tokens after every verify, whose logits give the first draft token
#: (sglang/srt/speculative/eagle_worker.py, forward_draft_extend_after_decode and
#: draft_forward; vllm/v1/spec_decode/eagle.py, propose).
FIXED = {"sglang": {"draft_extend_passes": 1.0}, "vllm": {"draft_extend_passes": 1.0}}
#: The engine's design settings (``[engine]`` keys a preset sets, not fitted): whether it
#: overlaps the next iteration's host work with the GPU during speculative decoding. SGLang's
#: EAGLE worker (the published rows) runs without its overlap scheduler; vLLM's async
#: scheduling is opt-in; TensorRT-LLM's overlap scheduler is on by default
#: (https://nvidia.github.io/TensorRT-LLM/features/overlap-scheduler.html).
DESIGN: dict[str, dict[str, Any]] = {
    "sglang": {"overlap_scheduling": False},
    "vllm": {"overlap_scheduling": False},
    "trtllm": {"overlap_scheduling": True},
}
#: Only these overheads can change a plain-decode row.
DECODE_KEYS = ("pass_overhead_s", "comm_s_per_layer", "fp8_moe_s_per_layer")


def fitted_keys(engine: str, without: Sequence[str] = ()) -> tuple[str, ...]:
    """The overheads fitted for ``engine``: :data:`FITTED` less ``without`` (held at 0)."""
    return tuple(k for k in FITTED[engine] if k not in without)


def priced_keys(engine: str, without: Sequence[str] = ()) -> tuple[str, ...]:
    """The overheads the probe runs price for ``engine``, fitted then measured
    (:data:`FITTED`, :data:`MEASURED`), less ``without`` (held at 0): a fit's theta is in
    this order."""
    return fitted_keys(engine, without) + tuple(
        k for k in MEASURED.get(engine, ()) if k not in without
    )


def measurement_rows(engine: str, cases: Sequence[Case]) -> list[Case]:
    """The rows among ``cases`` that measure ``engine``'s :data:`MEASURED` terms directly: its
    rows of :data:`MEASUREMENT_CATEGORIES` that the fits may use (role "fit")."""
    if not MEASURED.get(engine):
        return []
    return [
        c
        for c in for_fitting(cases)
        if c.category in MEASUREMENT_CATEGORIES and engine_preset(c) == engine
    ]


def measured_values(engine: str, cases: Sequence[Case]) -> dict[str, float]:
    """The :data:`MEASURED` terms of ``engine`` from the direct measurements among ``cases``
    (:func:`measurement_rows`: the hidden host time of its overlap rows,
    :attr:`~simspec.validation.cases.Case.exposed_host_ms`) and the cited ones
    (:data:`CITED_HIDDEN_HOST_S`): the largest, each being a lower bound (three significant
    digits, as the catalog stores them); empty for an engine that measures none. A fold
    passes its training rows alone."""
    if "verify_overhead_s" not in MEASURED.get(engine, ()):
        return {}
    hidden = [c.exposed_host_ms * 1e-3 for c in measurement_rows(engine, cases)]
    hidden += CITED_HIDDEN_HOST_S.get(engine, ())
    return {"verify_overhead_s": float(f"{max(hidden):.3g}")} if hidden else {}


def probe_runs(case: Case, without: Sequence[str] = ()) -> list[tuple[str, dict[str, float]]]:
    """(label, [costs]) of the runs one row needs: all overheads zero, then one unit each."""
    engine = engine_preset(case)
    keys = priced_keys(engine, without)
    if case.category not in RATIO_CATEGORIES:
        keys = tuple(k for k in keys if k in DECODE_KEYS)
    if case.tp == 1 and case.ep <= 1:  # one GPU, no collectives: the slope is exactly 0
        keys = tuple(k for k in keys if k != "comm_s_per_layer")
    if not target_spec(case).shape.fp8_experts:  # no FP8 experts: the same
        keys = tuple(k for k in keys if k != "fp8_moe_s_per_layer")
    base = dict.fromkeys(priced_keys(engine), 0.0) | FIXED.get(engine, {})
    runs = [("base", base)]
    runs += [(key, base | {key: BOUNDS[key][0]}) for key in keys]
    return runs


def probe_times(
    case: Case, costs: dict[str, float] | None, rank_decay: float | None = None
) -> dict[str, float]:
    """One probe run of ``case``: the physics-only preset with ``costs`` set on top (the
    engine's overheads at a probe's values), the engine's design settings (:data:`DESIGN`)
    and the trees' ``rank_decay`` (default: the default scenario's). Every probe of a fit
    goes through here (:mod:`.nested` too)."""
    design = DESIGN.get(engine_preset(case))
    return run_times(case, "ideal", costs, design, rank_decay=rank_decay)


def _run(task: tuple[Case, str, dict[str, float]]) -> tuple[str, str, dict[str, float]]:
    case, label, costs = task
    return case.id, label, probe_times(case, costs)


class AffineRow:
    """One row's times as an affine function of its engine's overheads."""

    def __init__(
        self, case: Case, runs: Mapping[str, Mapping[str, float]], without: Sequence[str] = ()
    ) -> None:
        self.case = case
        self.engine = engine_preset(case)
        self.base = np.array([runs["base"][t] for t in TIMES])
        keys = priced_keys(self.engine, without)
        self.slopes = np.zeros((len(TIMES), len(keys)))
        for j, key in enumerate(keys):
            if key in runs:
                probe = np.array([runs[key][t] for t in TIMES])
                self.slopes[:, j] = (probe - self.base) / BOUNDS[key][0]

    @property
    def measured(self) -> float:
        return self.case.measured

    def predict(self, theta: np.ndarray) -> float:
        times = self.base + self.slopes @ theta
        return quantity(self.case, dict(zip(TIMES, (float(t) for t in times), strict=True)))

    def log_error(self, theta: np.ndarray) -> float:
        return math.log(self.predict(theta) / self.measured)


def reporter_weights(
    rows: Sequence[AffineRow], reporters: Mapping[str, str] | None = None
) -> np.ndarray:
    """Each row's weight in the fit's loss: 1/(rows of its reporter), so every reporter
    carries the same total weight (Σ w = 1 per reporter) and no single reporter's many rows
    set an engine term on their own. ``reporters`` maps a source key to who measured it
    (default: every source its own reporter;
    :meth:`simspec.validation.cases.CaseFile.reporters`)."""
    who = [(reporters or {}).get(r.case.source, r.case.source) for r in rows]
    counts: dict[str, int] = {}
    for name in who:
        counts[name] = counts.get(name, 0) + 1
    return np.array([1.0 / counts[name] for name in who])


#: Scale of the robust loss, in log(predicted / measured): a row off by more than ~10 % pulls
#: the fit by its sign rather than by its size (soft-L1), whichever reporter measured it.
LOSS_SCALE = 0.1


def weighted_soft_l1(log_errors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Residuals whose sum of squares is ``LOSS_SCALE² Σ w ρ((r / LOSS_SCALE)²)``, ρ the
    soft-L1 loss ``2(sqrt(1 + z) − 1)``: the robust loss acts on each row's own error and the
    reporter weight multiplies the loss, so a row's outlier threshold does not depend on how
    many rows its reporter published (weighting the residuals instead would make a reporter
    of one row an outlier at errors where a reporter of many rows is not)."""
    z = (log_errors / LOSS_SCALE) ** 2
    rho = 2.0 * (np.sqrt(1.0 + z) - 1.0)
    return np.sign(log_errors) * LOSS_SCALE * np.sqrt(weights * rho)


def fit(
    rows: list[AffineRow],
    keys: tuple[str, ...],
    reporters: Mapping[str, str] | None = None,
    pinned: Mapping[str, float] | None = None,
) -> np.ndarray:
    """Minimum of the reporter-weighted soft-L1 loss of log(predicted / measured) over
    ``rows`` (:func:`reporter_weights`, :func:`weighted_soft_l1`), each term within its
    physical bounds (:data:`BOUNDS`, at most the top of its :data:`PLAUSIBLE` range). ``keys``
    is the rows' theta order; the terms in ``pinned`` keep its values (measured terms,
    :func:`measured_values`) and the others are fitted."""
    from scipy.optimize import least_squares

    pinned = pinned or {}
    theta = np.array([pinned.get(k, 0.0) for k in keys])
    free = [i for i, k in enumerate(keys) if k not in pinned]
    if not free:
        return theta
    lower = np.array([BOUNDS[keys[i]][1] for i in free])
    upper = np.array(
        [min(BOUNDS[keys[i]][2], PLAUSIBLE.get(keys[i], BOUNDS[keys[i]][1:3])[1]) for i in free]
    )
    start = np.minimum(np.array([BOUNDS[keys[i]][3] for i in free]), upper)
    weights = reporter_weights(rows, reporters)

    def full(x: np.ndarray) -> np.ndarray:
        out = theta.copy()
        out[free] = x
        return out

    result = least_squares(
        lambda x: weighted_soft_l1(np.array([r.log_error(full(x)) for r in rows]), weights),
        start,
        bounds=(lower, upper),
        x_scale=np.array([BOUNDS[keys[i]][0] for i in free]),
    )
    return full(np.asarray(result.x))


def round_values(theta: np.ndarray, keys: tuple[str, ...]) -> np.ndarray:
    """Three significant digits (what the catalog file stores); below 0.1 % of a unit, 0."""
    units = [BOUNDS[k][0] for k in keys]
    pairs = zip(theta, units, strict=True)
    return np.array([0.0 if v < 1e-3 * u else float(f"{v:.3g}") for v, u in pairs])


def rel(row: AffineRow, theta: np.ndarray) -> float:
    return row.predict(theta) / row.measured - 1.0


def engine_fit(
    engine: str,
    rows: list[AffineRow],
    without: Sequence[str] = (),
    reporters: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    measured: Mapping[str, float] | None = None,
    measured_on: Sequence[Case] = (),
) -> dict[str, Any]:
    """Values, per-row residuals and leave-one-source-out errors of one engine.

    ``reporters`` weighs the rows (:func:`reporter_weights`); ``labels`` (row id -> why) are
    the rows called inconsistent: predicted, not fitted (default:
    :func:`simspec.validation.consistency.inconsistent` of ``rows``); ``measured`` holds the
    :data:`MEASURED` terms' values (default: :func:`measured_values` of ``rows``) and
    ``measured_on`` the rows that measure them (:func:`measurement_rows`), whose range the
    result states beside the fitted terms' (``"measured": true``).
    """
    keys = priced_keys(engine, without)
    if labels is None:
        labels = inconsistent([r.case for r in rows])
    if measured is None:
        measured = measured_values(engine, [r.case for r in rows])
    pinned = {k: v for k, v in measured.items() if k in keys}
    used = [r for r in rows if r.case.id not in labels]
    theta = round_values(fit(used, keys, reporters, pinned), keys)
    table = [
        {
            "id": r.case.id,
            "source": r.case.source,
            "category": r.case.category,
            "measured": r.measured,
            "predicted": r.predict(theta),
            "relative_error": rel(r, theta),
            "fitted": r.case.id not in labels,
            "inconsistent": labels.get(r.case.id, ""),
        }
        for r in rows
    ]
    loso = []
    for source in sorted({r.case.source for r in used}):
        rest = [r for r in used if r.case.source != source]
        held = [r for r in used if r.case.source == source]
        if not rest:
            loso.append({"source": source, "rows": len(held), "note": "the engine's only source"})
            continue
        theta_without = round_values(fit(rest, keys, reporters, pinned), keys)
        errors = [abs(rel(r, theta_without)) for r in held]
        loso.append(
            {
                "source": source,
                "rows": len(held),
                "values": dict(zip(keys, theta_without.tolist(), strict=True)),
                "median_abs_relative_error": statistics.median(errors),
                "max_abs_relative_error": max(errors),
            }
        )
    fitted_errors = [abs(rel(r, theta)) for r in used]
    return {
        "values": dict(zip(keys, theta.tolist(), strict=True)) | FIXED.get(engine, {}),
        "measured_terms": sorted(pinned),
        "fitted_rows": len(used),
        "median_abs_relative_error": statistics.median(fitted_errors),
        "rows": table,
        "leave_one_source_out": loso,
        "fitted_range": fitted_ranges(
            [r.case for r in used],
            lambda c: [key for key, _ in probe_runs(c, without)[1:] if key not in pinned],
        )
        + fitted_ranges(measured_on, lambda c: sorted(pinned), measured=True),
    }


def preset_toml(engine: str, result: dict[str, Any]) -> str:
    """The catalog file of a fitted preset, its comment citing the rows it was fitted on."""
    names = {
        "sglang": "SGLang",
        "vllm": "vLLM",
        "trtllm": "TensorRT-LLM",
    }
    sources = sorted({row["source"] for row in result["rows"] if row["fitted"]})
    lines = [
        f"# Fitted by `simspec fidelity --fit-presets` on {result['fitted_rows']} published "
        f"{names[engine]} rows of validation/cases.toml, sources:",
        *(f"#   {source}" for source in sources),
        f"# Median |relative error| of those rows: {result['median_abs_relative_error']:.1%}.",
        "# Rows, residuals and leave-one-source-out errors: validation/REPORT.md,",
        "# validation/preset_fit.json. Keys left out keep the built-in defaults.",
        f'name = "{engine}"',
        f'display_name = "{names[engine]}"',
        'source = "fitted on published rows: validation/preset_fit.json"',
        'notes = "Engine terms fitted by least squares within physical bounds, or taken from '
        "their direct measurements where so stated (kernel floors and collectives are the GPU "
        "catalog's physics): "
        + "; ".join(f"{key}: {MEANING[key]}" for key in result["values"] if key in MEANING)
        + "."
        + "".join(
            f" {key} = {result['values'][key]:.3g} s is OUTSIDE its plausible range: it absorbs "
            "time the physics misses on these rows."
            for key in implausible(result["values"], engine)
        )
        + '"',
    ]
    for key, value in result["values"].items():
        lines.append(f"{key} = {value!r}")
    for key, setting in DESIGN.get(engine, {}).items():
        lines.append(f"{key} = {str(setting).lower()}")
    lines += range_toml(result["fitted_range"])  # tables last: keys after them would join them
    return "\n".join(lines) + "\n"


def fit_presets(
    cases: Sequence[Case],
    *,
    workers: int = 1,
    probes: dict[str, dict[str, dict[str, float]]] | None = None,
    without: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
    reporters: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Fit every engine preset with rows among ``cases`` (module docstring).

    Parameters
    ----------
    cases : sequence of Case
        The published rows (:func:`simspec.validation.cases.load_cases`); test rows
        (:func:`~simspec.validation.cases.for_fitting`) and rows of engines without a fitted
        preset are skipped.
    workers : int
        Processes that simulate the probe runs.
    probes : dict, optional
        Probe runs already simulated (case id -> label -> :data:`TIMES`), updated in place
        with the runs simulated here: a cache across calls.
    without : sequence of str
        Overheads held at 0 (not fitted).
    progress : callable, optional
        Called as ``progress(done, total)`` after each probe run.
    reporters : mapping, optional
        Who measured each source (:meth:`~simspec.validation.cases.CaseFile.reporters`): every
        reporter weighs the same in the fit.

    Returns
    -------
    dict
        Per engine: ``values``, ``measured_terms`` (the keys of ``values`` taken from direct
        measurements, :data:`MEASURED`), ``fitted_rows``, ``median_abs_relative_error``,
        ``rows`` (every row's prediction and error) and ``leave_one_source_out``.
    """
    mine = [
        c
        for c in for_fitting(cases)
        if engine_preset(c) in FITTED and c.category not in MEASUREMENT_CATEGORIES
    ]
    runs = probes if probes is not None else {}
    tasks = [
        (c, label, costs)
        for c in mine
        for label, costs in probe_runs(c, without)
        if label not in runs.get(c.id, {})
    ]
    tasks.sort(key=lambda t: -(t[0].batch * t[0].output_tokens))
    pool = ProcessPoolExecutor(max_workers=workers) if workers > 1 else None
    with pool or contextlib.nullcontext():
        done = pool.map(_run, tasks) if pool is not None else map(_run, tasks)
        for n, (case_id, label, times) in enumerate(done, 1):
            runs.setdefault(case_id, {})[label] = times
            if progress is not None:
                progress(n, len(tasks))
    rows = [AffineRow(c, runs[c.id], without) for c in mine]
    labels = inconsistent(list(cases))
    return {
        engine: engine_fit(
            engine,
            [r for r in rows if r.engine == engine],
            without,
            reporters,
            labels,
            measured_values(engine, cases),
            measurement_rows(engine, cases),
        )
        for engine in FITTED
    }
