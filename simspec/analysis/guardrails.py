"""Run-time guardrails: warnings when an answer rests on an extrapolation or on a search's edge.

Two things make a prediction less trustworthy than its digits suggest, and a user cannot see
either in the numbers:

* ``preset-range``: the run uses an engine preset's fitted term (a nonzero value the scenario
  does not override) outside the published rows it was fitted on: another GPU, model family,
  tensor- or expert-parallel degree, or a batch size beyond the fitted ones
  (:class:`~simspec.params.ranges.FittedRange`); likewise a term measured directly, outside
  the rows that measured it. A term fitted or measured on speculative rows alone counts only
  when the run speculates.
* ``k-at-edge``: the best fixed draft length of the runs is the largest one searched, so the
  optimum may lie beyond the range (or at the drafter's limit, where the search cannot go on):
  within one run (its fixed policies), a recommendation, or a sweep over k
  (:func:`search_warnings`); for a recommendation in an engine's flags, the best draft shape's
  steps, topk or tree size is the largest searched (:func:`best_shape_at_edge`), with the flag
  that extends the range.
* ``acceptance-extrapolated``: the best draft depth lies beyond the setting at which the
  acceptance was measured, and that acceptance is the drafter's documented default, not a
  number the scenario gave: one acceptance length fixes one alpha, and its i.i.d. extension
  to deeper chains is an assumption (a module chained past its training depth, as MTP modules
  are, accepts less per step: see the drafter's notes), so the depth of the answer rests on
  it (:func:`acceptance_warning`).
* ``within-error``: the best drafting policy's predicted speedup is closer to 1 than the
  typical error of simspec's speculative speedups on published rows it was not fitted on
  (the median |relative error| of the run's engine preset, out of sample:
  ``simspec/catalog/accuracy.json``, :mod:`simspec.validation.accuracy`), so a measurement
  could as well show speculation losing as winning (:func:`within_error_warning`); a
  recommendation checks its best drafting k's mean speedup. At batch 1 the rows measured at
  batch 1 stand instead, where there are enough of them, and the warning says which way they
  lean (published batch-1 speedups come out too high more often than not). A run priced from
  a calibration profile is not covered by those numbers and gets no such warning.
* ``collectives-unpriced``: the run splits the model over GPUs (tensor or expert parallelism)
  on a GPU whose catalog entry states neither a collective latency nor the engines' custom
  all-reduce, so every all-reduce and all-to-all costs its bytes over the link at most, and
  nothing at all without a stated link (:func:`gpu_warnings`).
* ``kernels-unpriced``: the run's GPU states no kernel floor for its launch path (CUDA graph or
  eager), so every kernel of a pass costs its bytes and FLOPs alone and small-batch steps come
  out too fast (:func:`gpu_warnings`).
* ``multi-node``: the run's tensor- or expert-parallel group spans more GPUs than one node's
  GPU-to-GPU fabric joins (the GPU's ``node_gpus``: 8 on an HGX board, 72 in a GB200 NVL72
  rack; data-parallel replicas, which simspec does not model, do not count), so its
  all-reduces or all-to-alls cross nodes over NICs (InfiniBand, RoCE) far slower than NVLink,
  which simspec does not model: it prices them as if one node held every GPU, and the run's
  times are a lower bound (:func:`gpu_warnings`).
* ``published-miss``: with the run's engine preset, simspec misses the published measurements
  of the run's target model on the run's GPU at the run's tensor-parallel degree (where those
  are fewer than :data:`PUBLISHED_MIN_ROWS`: of every model on GPUs of the same maker, whose
  software stack is the run's too) that it was not fitted on by a median of at least
  :data:`PUBLISHED_MISS_ERROR` (decode times, and
  speculative speedups when the run speculates; the catalog's accuracy table, ``published``:
  :mod:`simspec.validation.accuracy`), so something those rows measure is missing from the
  model and the run's numbers can be off by as much (:func:`published_miss_warnings`). Not
  for a run priced from a calibration profile.
* ``ttft-lower-bound``: the scenario sets a TTFT objective (``[slo] ttft_ms``), but a
  simulated TTFT is a prefill's roofline with no client, tokenizer or scheduler time; on the
  published serving runs that state their TTFT it falls below every measurement (the
  catalog's accuracy table, ``ttft``), so the TTFT attainment is an upper bound
  (:func:`ttft_warnings`).

Each warning is one line, ``"<code>: <text>"``, a pure function of the scenario and the run's
rows (same scenario, same warnings, in the same order); the results JSON lists them under
``warnings`` and the commands print them on standard error (:func:`print_warnings`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO, TypeGuard

from simspec import catalog
from simspec.analysis.results import PolicyResult
from simspec.config.scenario import Scenario
from simspec.costs.parallel import Parallelism
from simspec.params.ranges import FittedRange

PRESET_RANGE = "preset-range"
K_AT_EDGE = "k-at-edge"
ACCEPTANCE_EXTRAPOLATED = "acceptance-extrapolated"
WITHIN_ERROR = "within-error"
COLLECTIVES_UNPRICED = "collectives-unpriced"
KERNELS_UNPRICED = "kernels-unpriced"
PUBLISHED_MISS = "published-miss"
TTFT_LOWER_BOUND = "ttft-lower-bound"
MULTI_NODE = "multi-node"
#: A run warns of published rows of its model, GPU and TP degree that simspec misses by a
#: median of at least this, over at least PUBLISHED_MIN_ROWS rows: twice issue 27's decode and
#: speculative targets (15 %), beyond what the validated rows show elsewhere, not a
#: benchmark's noise.
PUBLISHED_MISS_ERROR, PUBLISHED_MIN_ROWS = 0.30, 3
#: An engine preset's own out-of-sample errors stand for it from this many rows and reporters
#: on; with fewer, the fitted presets' pooled errors do (``all`` in the accuracy table).
ACCURACY_MIN_ROWS, ACCURACY_MIN_REPORTERS = 5, 2
#: A signed median error of the batch-1 rows at least this large is named in ``within-error``
#: (which way simspec's batch-1 speedups lean); smaller is within a benchmark's noise.
LEAN_NOTED = 0.02
#: What :func:`speculative_accuracy` appends to its scope when batch-1 rows stand.
BATCH_ONE_SCOPE = ", rows at batch 1"


def _span(low_high: Sequence[int]) -> str:
    low, high = low_high
    return str(low) if low == high else f"{low}-{high}"


def _outside(entry: FittedRange, gpu: str, family: str, tp: int, ep: int, batch: int) -> list[str]:
    """What of the run lies outside ``entry``'s rows (empty: inside); experts beyond the
    tensor-parallel group (ep > tp) run data-parallel attention, which the rows must have run
    too (:attr:`~simspec.params.ranges.FittedRange.attention_dp`)."""
    out = []
    if ep > tp and not entry.attention_dp:
        out.append("data-parallel attention")
    if gpu not in entry.gpus:
        out.append(f"GPU {gpu}")
    if family not in entry.families:
        out.append(f"model family {family}")
    for name, value, low_high in (("TP", tp, entry.tp), ("EP", ep, entry.ep)):
        if not low_high[0] <= value <= low_high[1]:
            out.append(f"{name} {value}")
    if not entry.batch[0] <= batch <= entry.batch[1]:
        out.append(f"batch {batch}")
    return out


def preset_range_warnings(scenario: Scenario, batch: int, speculates: bool) -> list[str]:
    """``preset-range`` warnings of a run of ``scenario`` whose largest batch was ``batch``
    (``speculates``: some policy drafted); see the module docstring."""
    preset = catalog.get_engine(scenario.engine.preset)
    values = preset.overrides()
    explicit = scenario.costs.explicit()
    hw = scenario.hardware
    tp = hw.tensor_parallel or hw.num_gpus
    target = scenario.target
    family = target.family or target.name
    warnings = []
    for entry in preset.fitted_range:
        if entry.speculative and not speculates:
            continue
        # A per-rank term adds x·(t − 1): nothing on one tensor-parallel rank.
        used = [
            term
            for term in entry.terms
            if values.get(term) and term not in explicit
            if not (term.endswith("_per_tp_s") and tp == 1)
            # The FP8 MoE term prices FP8 routed experts only.
            if not (term == "fp8_moe_s_per_layer" and not target.shape.fp8_experts)
        ]
        outside = _outside(entry, hw.gpu, family, tp, hw.expert_parallel, batch)
        if not used or not outside:
            continue
        rows = (
            f"{entry.rows} {'speculative ' if entry.speculative else ''}"
            f"row{'' if entry.rows == 1 else 's'}"
        )
        fitted = (
            f"GPUs {', '.join(entry.gpus)}; families {', '.join(entry.families)}; "
            f"TP {_span(entry.tp)}; EP {_span(entry.ep)}; batch {_span(entry.batch)}"
        )
        warnings.append(
            f"{PRESET_RANGE}: the {preset.name} preset's {', '.join(used)} "
            f"{'was' if len(used) == 1 else 'were'} {'measured' if entry.measured else 'fitted'} "
            f"on {rows} ({fitted}); this run "
            f"extrapolates to {', '.join(outside)}"
        )
    return warnings


def planned_warnings(scenario: Scenario) -> list[str]:
    """The ``preset-range`` warnings a run of ``scenario`` can be told before it runs: at the
    largest batch the scenario allows (closed loop: its concurrency; open loop: its batch
    limit; at most its requests), speculating when some policy drafts."""
    from simspec.policies.fixed import is_plain_decoding

    w = scenario.workload
    limit = w.concurrency if w.loop == "closed" else w.max_batch_size
    speculates = any(not is_plain_decoding(spec.policy) for spec in scenario.policies)
    warnings = preset_range_warnings(scenario, min(limit, w.num_requests), speculates)
    warnings += gpu_warnings(scenario) + published_miss_warnings(scenario, speculates)
    return warnings + ttft_warnings(scenario)


def ttft_warnings(scenario: Scenario) -> list[str]:
    """The ``ttft-lower-bound`` warning of a scenario with a TTFT objective, with the median
    error of simspec's TTFT on the published rows that state one (none without such rows)."""
    target = scenario.slo.ttft_ms
    ttft = catalog.accuracy().get("ttft") or {}
    if target is None or not ttft.get("predicted_rows"):
        return []
    return [
        f"{TTFT_LOWER_BOUND}: slo.ttft_ms = {target:g} is scored against a simulated TTFT, "
        "a prefill's roofline with no client, tokenizer or scheduler time: on "
        f"{ttft['predicted_rows']} published serving runs it was a median "
        f"{ttft['median_abs_relative_error']:.0%} off, {ttft['predicted_below_measured']} of "
        "them below the measurement, so read the TTFT attainment as an upper bound"
    ]


def gpu_warnings(scenario: Scenario) -> list[str]:
    """The ``kernels-unpriced`` warning of a run whose GPU states no kernel floor for the run's
    launch path, the ``collectives-unpriced`` one of a run over several GPUs whose GPU states
    no collective cost (:attr:`~simspec.physics.hardware.GpuSpec.collectives_stated`; a
    catalog GPU states both), and the ``multi-node`` one of a run whose tensor- or
    expert-parallel group spans more GPUs than one node's fabric joins
    (:attr:`~simspec.physics.hardware.GpuSpec.node_gpus`)."""
    hw, gpu = scenario.hardware, scenario.gpu
    warnings = []
    graphs = scenario.roofline.cuda_graphs
    if not gpu.kernel_floor_s(graphs):
        key = "kernel_floor_graph_s" if graphs else "kernel_floor_eager_s"
        warnings.append(
            f"{KERNELS_UNPRICED}: GPU {gpu.name} states no kernel floor ({key}), so every "
            "kernel of a pass costs its bytes and FLOPs alone and small batches come out too "
            "fast: state it in the GPU's entry (simspec calibrate measures it)"
        )
    if max(hw.tensor_parallel or hw.num_gpus, hw.expert_parallel) > 1 and not (
        gpu.collectives_stated
    ):
        wire = "their bytes over the link" if gpu.link_bytes_per_s else "nothing"
        warnings.append(
            f"{COLLECTIVES_UNPRICED}: GPU {gpu.name} states no collective latency "
            "(collective_latency_s) and no custom all-reduce, so this run's all-reduces and "
            f"all-to-alls across {hw.num_gpus} GPUs cost {wire}: state them in the GPU's entry"
        )
    split = Parallelism.of(hw.num_gpus, hw.tensor_parallel, hw.expert_parallel)
    span = max(split.tensor, split.expert)  # the GPUs one collective joins
    if span > gpu.node_gpus:
        warnings.append(
            f"{MULTI_NODE}: collectives over {span} {gpu.name} GPUs span more than one node's "
            f"{gpu.node_gpus} (node_gpus, the GPUs its GPU-to-GPU fabric joins), so they cross "
            "nodes over NICs far slower than that fabric, which simspec does not model: it "
            "prices them as if one node held every GPU, so the run's times are a lower bound"
        )
    return warnings


def published_key(model: str, gpu: str, tensor_parallel: int) -> str:
    """The key of the accuracy table's ``published`` errors of a model on a GPU at a
    tensor-parallel degree (:mod:`simspec.validation.accuracy`).

    >>> published_key("deepseek-v3", "h200", 8)
    'deepseek-v3@h200/tp8'
    """
    return f"{model}@{gpu}/tp{tensor_parallel}"


def gpu_maker(display_name: str) -> str:
    """A GPU's maker: the first word of its display name ("" for none).

    >>> gpu_maker("AMD Instinct MI300X (OAM, 192 GB)")
    'AMD'
    """
    words = display_name.split()
    return words[0] if words else ""


def maker_key(display_name: str) -> str:
    """The key of the accuracy table's ``published`` errors of every row on one maker's GPUs
    (:func:`gpu_maker`; :mod:`simspec.validation.accuracy`).

    >>> maker_key("NVIDIA H200 SXM 141GB")
    'maker:NVIDIA'
    """
    return f"maker:{gpu_maker(display_name)}"


def published_miss_warnings(scenario: Scenario, speculates: bool) -> list[str]:
    """``published-miss`` warnings (module docstring): one per category of published rows of
    the scenario's target model on its GPU that simspec misses by a median of at least
    :data:`PUBLISHED_MISS_ERROR` over at least :data:`PUBLISHED_MIN_ROWS` rows; where the
    model, GPU and degree have fewer rows than that, the rows of every model on GPUs of the
    same maker (:func:`maker_key`) stand in; speculative rows only when the run
    ``speculates``. None for a run priced from a calibration profile."""
    if scenario.profile is not None:
        return []
    model, gpu, preset = scenario.model.target, scenario.hardware.gpu, scenario.engine.preset
    tp = scenario.hardware.tensor_parallel or scenario.hardware.num_gpus  # 0 = every GPU
    published = catalog.accuracy().get("published", {})
    entry = published.get(published_key(model, gpu, tp), {}).get(preset, {})
    maker = gpu_maker(scenario.gpu.display_name)
    wider = published.get(maker_key(scenario.gpu.display_name), {}).get(preset, {})
    warnings = []
    for category, what, noun in (
        ("decode", "decode step times (TPOT, throughput)", "times"),
        ("speculative", "speculative speedups", "speedups"),
    ):
        if category == "speculative" and not speculates:
            continue
        e, scope = entry.get(category), f"for {model} on {gpu} at TP {tp}"
        if e is None or e["rows"] < PUBLISHED_MIN_ROWS:
            e = wider.get(category)
            scope = f"on {maker} GPUs (every published model and degree)"
        if e is None:
            continue
        error = float(e["median_abs_relative_error"])
        if e["rows"] < PUBLISHED_MIN_ROWS or error < PUBLISHED_MISS_ERROR:
            continue
        reporters = f"{e['reporters']} reporter{'s' if e['reporters'] != 1 else ''}"
        warnings.append(
            f"{PUBLISHED_MISS}: simspec's {what} {scope} with the {preset} preset "
            f"miss the published ones it was not fitted on by a median {error:.0%} "
            f"({e['rows']} rows, {reporters}; "
            f"{e['faster']} predicted faster than measured; validation/REPORT.md): something "
            f"those rows measure is missing from the model, and this run's {noun} can be off "
            "by as much"
        )
    return warnings


def best_k_at_edge(
    ks: Sequence[int], speedups: Sequence[float], limit: int | None = None
) -> str | None:
    """A ``k-at-edge`` warning when the best of the fixed draft lengths ``ks`` (highest
    speedup, the smallest k on ties) is the largest of at least two searched; ``limit``: the
    drafter's most draft tokens, if known. None otherwise."""
    if len(set(ks)) < 2:
        return None
    best = max(speedups)
    best_k = min(k for k, s in zip(ks, speedups, strict=True) if s == best)
    top = max(ks)
    if best_k != top:
        return None
    return (
        f"{K_AT_EDGE}: the best fixed k = {best_k} is the largest searched "
        f"(k = {', '.join(map(str, sorted(set(ks))))}); {_beyond_k(top, limit)}"
    )


def _beyond_k(top: int, limit: int | None, flag: str | None = None) -> str:
    """What to try when the best depth ``top`` is the largest searched."""
    if limit is not None and top >= limit:
        named = "" if flag is None else f" (max_draft_tokens = {limit})"
        return f"the drafter's maximum{named}, so no larger k can be tried"
    if flag is None:
        return "a larger k may be faster: extend the range searched"
    wider = min(2 * top, limit) if limit is not None else 2 * top
    return f"a larger k may be faster: try {flag} {wider}"


def best_shape_at_edge(
    steps: int,
    topk: int,
    num_draft_tokens: int,
    searched: tuple[Sequence[int], Sequence[int], Sequence[int]],
    limit: int,
) -> str | None:
    """A ``k-at-edge`` warning when the best draft shape (SGLang's steps, topk,
    num_draft_tokens; :mod:`simspec.analysis.shapes`) lies on the edge of the grid searched,
    ``searched`` = (steps, topks, tree sizes), with the next range to try; ``limit``: the
    drafter's most draft steps. A tree that verifies every node it grew is bounded by its steps
    and topk, not by the sizes searched. None inside the grid."""
    all_steps, topks, sizes = searched
    edges = []
    if steps == max(all_steps) and len(set(all_steps)) > 1:
        edges.append(
            f"steps = {steps} is the largest searched; {_beyond_k(steps, limit, '--max-k')}"
        )
    if topk == max(topks) and len(set(topks)) > 1:
        wider = ",".join(map(str, [*sorted(set(topks)), 2 * topk]))
        edges.append(f"topk = {topk} is the largest searched: try --topk {wider}")
    if topk > 1 and sizes and num_draft_tokens == max(sizes):
        wider = ",".join(map(str, [*sorted(set(sizes)), 2 * num_draft_tokens]))
        edges.append(
            f"num_draft_tokens = {num_draft_tokens} is the largest searched: "
            f"try --num-draft-tokens {wider}"
        )
    if not edges:
        return None
    shape = f"({steps}, {topk}, {num_draft_tokens})"
    return f"{K_AT_EDGE}: the best shape {shape} is at the edge of the grid: " + "; ".join(edges)


def search_warnings(
    searched: Iterable[tuple[str, int, float]], limit: int | None = None
) -> list[str]:
    """``k-at-edge`` warnings of a search spread over several runs (a sweep whose grid sets a
    fixed policy's ``draft_tokens``): ``searched`` holds (group, k, speedup) per run, a group
    being what else the runs share (the speedups of one group and k are averaged, e.g. over
    replications); one warning per group whose best k is the largest it searched."""
    groups: dict[str, dict[int, list[float]]] = {}
    for group, k, speedup in searched:
        groups.setdefault(group, {}).setdefault(k, []).append(speedup)
    warnings = []
    for group, by_k in groups.items():
        ks = sorted(by_k)
        edge = best_k_at_edge(ks, [sum(by_k[k]) / len(by_k[k]) for k in ks], limit)
        if edge is not None:
            warnings.append(edge.replace(f"{K_AT_EDGE}: ", f"{K_AT_EDGE}: {group}: ", 1))
    return warnings


def acceptance_warning(scenario: Scenario, steps: int) -> str | None:
    """An ``acceptance-extrapolated`` warning when the best answer drafts ``steps`` deep,
    deeper than the setting of the drafter's default acceptance the scenario runs on (module
    docstring). None when the scenario states its own acceptance or the depth is measured."""
    fit = scenario.acceptance_fit
    if fit is None or not fit.default_of:
        return None
    deepest: tuple[int, ...] = fit.setting
    length = fit.given_length
    if fit.deep_setting:
        deepest, length = fit.deep_setting, fit.deep_length
    if steps <= deepest[0]:
        return None
    measured_steps, topk, drafts = deepest
    extension = (
        f"extended with its fitted decay (alpha_j = {fit.alphas[0]:.4f} x {fit.decay:.4f}^j)"
        if fit.deep_setting
        else f"extended i.i.d. (alpha {fit.alphas[0]:.4f} per step), an assumption that "
        "flatters deep chains"
    )
    return (
        f"{ACCEPTANCE_EXTRAPOLATED}: the best depth, {steps} draft steps, lies beyond the "
        f"acceptance measured: drafter {fit.default_of}'s default acceptance length "
        f"{length:g} at (steps {measured_steps}, topk {topk}, num_draft_tokens {drafts}), "
        f"{extension}; give [acceptance] acceptance_length (with acceptance_setting) or "
        "position_acceptance as your engine reports them at a deeper setting"
    )


def speculative_accuracy(
    preset: str, batch: int | None = None
) -> tuple[dict[str, Any], str] | None:
    """The speculative-speedup errors that stand for engine preset ``preset`` and what they
    are, from the catalog's accuracy table; None when it has none. At ``batch`` 1 the rows
    measured at batch 1 alone stand for it where there are enough of them (the preset's, else
    every fitted preset's pooled): the published batch-1 rows lean one way, the others not."""
    engines = catalog.accuracy()["engines"]

    def enough(entry: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
        return bool(
            entry
            and entry["rows"] >= ACCURACY_MIN_ROWS
            and entry["reporters"] >= ACCURACY_MIN_REPORTERS
        )

    own = engines.get(preset, {}).get("speculative")
    pooled = engines.get("all", {}).get("speculative")
    scope = "physics only" if preset == "ideal" else f"the {preset} preset, out of sample"
    if batch == 1:
        for entry, where in ((own, scope), (pooled, "every fitted preset pooled, out of sample")):
            one = (entry or {}).get("batch_one")
            if enough(one):
                return one, where + BATCH_ONE_SCOPE
    if enough(own):
        return own, scope
    if pooled:
        return pooled, f"every fitted preset pooled, out of sample (too few {preset} rows)"
    return None


def within_error_warning(
    scenario: Scenario, label: str, speedup: float, batch: int | None = None
) -> str | None:
    """A ``within-error`` warning when ``speedup``, the predicted speedup of the best drafting
    policy (``label``), could with a typical (median) error ``e`` of the preset's speculative
    predictions be a measured speedup on the other side of 1: s / (1 + e) <= 1 <= s / (1 - e)
    (the relative error is predicted / measured - 1). At ``batch`` 1 the errors of the rows
    measured at batch 1 stand (:func:`speculative_accuracy`), and the text says which way
    they lean. None when the run is priced from a calibration profile or the catalog has no
    accuracy table. The text names no speedup, so replications of one scenario give one line."""
    if scenario.profile is not None:
        return None
    found = speculative_accuracy(scenario.engine.preset, batch)
    if found is None:
        return None
    entry, scope = found
    error = float(entry["median_abs_relative_error"])
    if speedup / (1.0 + error) > 1.0 or (error < 1.0 and speedup / (1.0 - error) < 1.0):
        return None
    signs = (
        f"; the sign of the gain was wrong on {entry['wrong_signs']} of {entry['signs_checked']}"
        if entry["signs_checked"]
        else ""
    )
    lean = float(entry.get("median_relative_error", 0.0))
    leaning = (
        f"; predicted a median {abs(lean):.0%} {'above' if lean > 0 else 'below'} the measured "
        "speedup"
        if scope.endswith(BATCH_ONE_SCOPE) and abs(lean) >= LEAN_NOTED
        else ""
    )
    return (
        f"{WITHIN_ERROR}: the best drafting policy, {label}, is predicted closer to no "
        f"speculation than simspec's typical error on speculative speedups ({scope}: median "
        f"{error:.0%} over {entry['rows']} published rows from {entry['reporters']} "
        f"reporters{signs}{leaning}), so whether speculating pays here is not settled: measure it"
    )


def best_drafting(rows: Sequence[PolicyResult]) -> PolicyResult | None:
    """The drafting policy (mean k > 0, not the oracle) with the highest speedup, if any."""
    drafting = [p for p in rows if p.mean_k > 0 and not p.is_oracle]
    return max(drafting, key=lambda p: p.speedup_vs_no_spec) if drafting else None


def run_warnings(scenario: Scenario, rows: Sequence[PolicyResult], batch: int) -> list[str]:
    """Every warning of one run (module docstring): ``rows`` its policies' results, ``batch``
    the largest batch any of them ran."""
    speculates = any(p.mean_k > 0 for p in rows)
    warnings = preset_range_warnings(scenario, batch, speculates)
    warnings += gpu_warnings(scenario) + published_miss_warnings(scenario, speculates)
    warnings += ttft_warnings(scenario)
    fixed = [p for p in rows if p.name == "fixed" and not p.is_oracle]
    ks = [int(p.params["draft_tokens"]) for p in fixed]
    speedups = [p.speedup_vs_no_spec for p in fixed]
    edge = best_k_at_edge(ks, speedups, scenario.drafter.max_draft_tokens)
    if edge:
        warnings.append(edge)
    if ks:
        best = max(speedups)
        extrapolated = acceptance_warning(
            scenario, min(k for k, s in zip(ks, speedups, strict=True) if s == best)
        )
        if extrapolated:
            warnings.append(extrapolated)
    best_draft = best_drafting(rows)
    if best_draft is not None:
        unsettled = within_error_warning(
            scenario, best_draft.label, best_draft.speedup_vs_no_spec, batch
        )
        if unsettled:
            warnings.append(unsettled)
    return warnings


def at_batch(warning: str, batch: int) -> str:
    """A recommendation's warning with its batch size named, where the text depends on it
    (``k-at-edge``, ``within-error``: one line per batch size that gave it)."""
    for code in (K_AT_EDGE, WITHIN_ERROR):
        if warning.startswith(f"{code}: "):
            return warning.replace(f"{code}: ", f"{code}: at batch {batch}, ", 1)
    return warning


def print_warnings(warnings: Iterable[str], stream: TextIO | None = None) -> None:
    """Each warning once, one line each, on standard error (or ``stream``), in order."""
    out = stream if stream is not None else sys.stderr
    for warning in dict.fromkeys(warnings):
        print(f"simspec: warning: {warning}", file=out)
