"""Predicting a published measurement: one row of the cases file -> simspec's number for it.

How a row is predicted:

- **kernel** (``moe_layer_us``): the routed-expert term of the roofline
  (:func:`simspec.costs.kernels.routed_experts_s`) at M tokens with the expected distinct experts
  of M uniformly, independently routed tokens N·(1 − (1 − k_e/N)^M)
  (:func:`simspec.physics.experts.independent_union`; the fused-MoE benchmarks route at random).
- **decode**: :func:`simspec.run` on the default scenario with the row's target, precision, GPU,
  ``num_gpus``, a closed loop at the row's concurrency and the row's lengths, policy k = 0.
  TPOT rows simulate at most 256 output tokens and move the prompt up by half the rest, so the
  mean context of the decode steps is the row's (attention cost is linear in context).
- **benchmark rows** (``num_requests`` set, e.g. SpecForge's ``bench_eagle3``): the benchmark
  runs a finite set of requests (two-turn conversations) ``batch`` at a time and divides all
  output tokens by the wall time, so its throughput includes the ramp-down tail while the
  batch drains to its longest request. Such a row runs exactly that: ``num_requests`` requests
  in a closed loop at the row's concurrency, output lengths uniform in mean·(1 ± length_jitter),
  tokens_per_s = output / makespan. Lengths above 512 are scaled down by one factor (prompt
  moved up by half the rest: the drain in steps and the mean context are kept); at batch 1 the
  requests run one after another, so a few requests of the mean length stand for them.
- **serving-benchmark rows** (``range_ratio`` set: SGLang's or InferenceX's ``bench_serving``
  over its random dataset): the benchmark runs ``num_requests`` prompts at the row's
  concurrency, each prompt and output length uniform in [r·L, L]; as one finishes the next
  is prefilled, and that prefill stalls the running requests' decoding, which their TPOT
  ((end − first token) / (output − 1)) includes. Such a row runs exactly that, whole: the
  mean lengths (1 + r)/2·L with spread (1 − r)/(1 + r), no length capped, and its TPOT is
  the median over the requests, as the benchmark reports it. Where the row also publishes
  the run's median TTFT (``ttft_ms``), the same runs' median TTFT is set against it.
- **speculative**: the same run with ``fixed`` k = ``steps`` and i.i.d. acceptance alpha solving
  (1 − alpha^(k+1)) / (1 − alpha) = AL (the row's measured acceptance length); the prediction is
  the ratio of the quantity the row publishes: throughput (output / makespan) of the run over
  that of its no-speculation baseline for tokens_per_s rows, the TPOT ratio
  (``speedup_vs_no_spec``) for TPOT rows. Draft trees (topk > 1) run as trees
  (``[speculation]`` topk and num_draft_tokens, :mod:`simspec.text.tree`) with the alpha whose
  tree has the measured AL. A row whose ``method`` is an MTP one (``mtp``, ``nextn``, ...)
  drafts with its model's MTP drafter (:mod:`simspec.physics.mtp`), any other with the
  model's default drafter.
- **overlap** (one speculative setting run with the engine's overlap scheduler for speculative
  decoding and without it, e.g. SGLang's spec v2 against v1): the speculative run above twice,
  ``[engine] overlap_scheduling`` on and off; the prediction is the ratio of the published
  quantity, on over off. The engine preset's ``verify_overhead_s`` is the host time the
  overlap hides per iteration, so the row tests it against the iteration's own physics.

Every decode and speculative row is predicted twice (:func:`predict`): with the engine preset
of the row's engine (:func:`~simspec.validation.cases.engine_preset`: sglang, vllm, trtllm;
fitted by :mod:`simspec.fit.presets`) and with ``ideal`` (physics only). Tensor and expert
parallelism are modelled (:mod:`simspec.costs.parallel`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import simspec
from simspec import catalog
from simspec.config.load import read_scenario_data, scenario_from_dict
from simspec.config.speculation import DEFAULT_RANK_DECAY as RANK_DECAY
from simspec.costs.kernels import routed_experts_s
from simspec.errors import InputError
from simspec.params import RooflineParams
from simspec.physics.experts import independent_union
from simspec.text.tree import expected_acceptance_length, fit_alpha

from .cases import (
    MTP_METHODS,
    NGRAM_METHODS,
    RATIO_CATEGORIES,
    Case,
    engine_preset,
    mtp_drafters,
    target_spec,
)

#: TPOT rows simulate at most this many output tokens (module docstring).
TPOT_OUTPUT_CAP = 256
#: Requests simulated at least (batch 1 rows average over a few requests).
MIN_REQUESTS = 4
#: Highest i.i.d. alpha a row may get (alpha = 1 is a drafter that is never wrong).
ALPHA_MAX = 0.999
#: Benchmark rows (``num_requests`` set) simulate at most this many output tokens per request:
#: every length is scaled by the same factor (the prompt moves up by half the rest), so the
#: benchmark's drain structure, in steps, and the mean context are kept (module docstring).
BENCH_OUTPUT_CAP = 512


def is_tree_row(case: Case) -> bool:
    """A draft tree: topk > 1, or fewer tokens verified than the chain's steps + 1."""
    return case.topk > 1 or 0 < case.draft_tokens < case.steps + 1


def tree_alpha(case: Case, rank_decay: float = RANK_DECAY) -> float:
    """The i.i.d. alpha whose (steps, topk, draft_tokens) tree has the row's AL.

    Siblings share the rest of a node's acceptance by ``rank_decay`` (default: the default
    scenario's, :mod:`simspec.text.tree`); capped at the tree's largest AL. A chain is the tree
    with ``topk = 1``, where this is Leviathan et al.'s (1 − alpha^(k+1)) / (1 − alpha) = AL.
    """
    top = expected_acceptance_length(1.0, case.steps, case.topk, case.draft_tokens, rank_decay)
    target = min(case.acceptance_length, top)
    return fit_alpha(target, case.steps, case.topk, case.draft_tokens, rank_decay)


def predict_kernel_us(
    case: Case, default: simspec.Scenario, params: RooflineParams | None = None
) -> float:
    """One MoE layer's routed-expert time at M = ``case.tokens`` tokens, µs (module docstring).

    ``params`` replaces the default scenario's cost parameters (a held-out fold's kernel fit).
    """
    spec = target_spec(case)
    shape, gpu = spec.shape, catalog.get_gpu(case.gpu)
    params = params or default.roofline
    unique = independent_union(shape.num_experts, shape.experts_per_token, case.tokens)
    bw = gpu.hbm_bytes_per_s * case.num_gpus
    flops = gpu.bf16_flops_per_s * case.num_gpus * params.compute_efficiency
    rows = case.tokens * shape.experts_per_token
    scale = gpu.latency_scale
    return (
        float(routed_experts_s(shape, params, np.array([unique]), rows, bw, flops, 0.0, scale)[0])
        * 1e6
    )


def scenario_data(
    case: Case,
    preset: str | None = None,
    costs: dict[str, float] | None = None,
    engine: dict[str, Any] | None = None,
    *,
    rank_decay: float | None = None,
    routing: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The default scenario's data with the row's model, hardware, workload and policy.

    ``preset`` is the engine preset (default: the row's engine, :func:`engine_preset`);
    ``costs`` are ``[costs]`` keys set on top (the preset fit's probes), ``engine`` further
    ``[engine]`` keys (the engine's design settings in those probes); ``rank_decay`` the draft
    trees' (default: the default scenario's; a held-out fold's own, :mod:`simspec.fit.nested`);
    ``routing`` ``[routing]`` keys set on top of the default scenario's, a key set to None
    removed (``{"overlap": None}``: independent routing; the sensitivity report's variants).
    """
    data, _ = read_scenario_data(None)
    data["engine"] = {"preset": preset or engine_preset(case), **(engine or {})}
    if case.overlap_scheduling:  # the row's own engine setting beats the engine's default
        data["engine"]["overlap_scheduling"] = case.overlap_scheduling == "on"
    if case.scheduler_recv_interval > 1:
        data["engine"]["scheduler_recv_interval"] = case.scheduler_recv_interval
    if costs:
        data["costs"] = {**data.get("costs", {}), **costs}
    data["model"] = {"target": case.model, "precision": case.precision}
    if case.category in RATIO_CATEGORIES and case.method in MTP_METHODS:  # the model's own MTP
        data["model"]["drafter"] = mtp_drafters(case.model)[0]
    elif case.category == "speculative" and case.method in NGRAM_METHODS:
        data["model"]["drafter"] = "ngram"
    if case.category in RATIO_CATEGORIES and case.drafter:  # the row's own head
        data["model"]["drafter"] = case.drafter
    if case.expert_precision:
        data["model"]["expert_precision"] = case.expert_precision
    if case.kv_cache_dtype != "auto":
        data["model"]["kv_cache_dtype"] = case.kv_cache_dtype
    data["hardware"] = {
        "gpu": case.gpu,
        "num_gpus": case.num_gpus,
        "tensor_parallel": case.tp,
        "expert_parallel": case.ep,
    }
    data["routing"] = {**data.get("routing", {}), **(routing or {}), "mode": "analytic"}
    data["routing"] = {key: value for key, value in data["routing"].items() if value is not None}
    prompt, output = case.prompt_tokens, case.output_tokens
    requests = case.num_requests or max(case.batch, MIN_REQUESTS)
    jitter = case.length_jitter
    if serving_benchmark(case):  # run whole: lengths uniform in [r·L, L], none capped
        r = case.range_ratio
        prompt, output = round(prompt * (1 + r) / 2), round(output * (1 + r) / 2)
        jitter = (1 - r) / (1 + r)
    else:
        cap = BENCH_OUTPUT_CAP if case.num_requests else TPOT_OUTPUT_CAP
        capped = case.num_requests or case.quantity in ("tpot_ms", "tokens_per_s_per_user")
        if capped and output > cap:
            prompt += (output - cap) // 2
            output = cap
        if case.batch == 1:  # one request at a time: the throughput is one request's
            requests, jitter = MIN_REQUESTS, 0.0
    data["workload"] = {
        "loop": "closed",
        "concurrency": case.batch,
        # The published concurrency is the batch the engine decoded (its recipe sizes
        # max_num_seqs / max_batch_size to it), so the scheduler's default cap must not bind.
        "max_batch_size": case.batch,
        "num_requests": requests,
        "prompt_tokens": prompt,
        "output_tokens": output,
        "length_jitter": jitter,
    }
    k = case.steps if case.category in RATIO_CATEGORIES else 0
    data["policies"] = [{"name": "fixed", "draft_tokens": k}]
    rho = RANK_DECAY if rank_decay is None else rank_decay
    if k and is_tree_row(case):
        data["speculation"] = {"topk": case.topk, "num_draft_tokens": case.draft_tokens}
        if rank_decay is not None:
            data["speculation"]["rank_decay"] = rank_decay
    if k:
        data["acceptance"] = {"process": "iid", "alpha": min(tree_alpha(case, rho), ALPHA_MAX)}
    return data


def serving_benchmark(case: Case) -> bool:
    """A row measured by a serving benchmark over a random dataset (``range_ratio`` set):
    simulated whole (module docstring), its TPOT the median over the requests."""
    return case.range_ratio > 0


#: What :func:`run_times` returns: times of one run that are linear in every fixed overhead
#: (each pass or draft step adds its overhead once, and no decision of a fixed-k run depends on
#: time), so the preset fit can interpolate them (:mod:`simspec.fit.presets`). The medians
#: over requests are linear piecewise (the median request can change between probes).
TIMES = (
    *("tpot_ms", "baseline_tpot_ms", "ttft_ms", "s_per_token", "baseline_s_per_token"),
    *("tpot_p50_ms", "baseline_tpot_p50_ms", "ttft_p50_ms"),
)


def run_times(
    case: Case,
    preset: str | None = None,
    costs: dict[str, float] | None = None,
    engine: dict[str, Any] | None = None,
    *,
    rank_decay: float | None = None,
    routing: dict[str, Any] | None = None,
) -> dict[str, float]:
    """One simulated run of a decode or speculative row: the times of :data:`TIMES`.

    An overlap row runs its speculative setting twice, the overlap scheduler on and off; the
    run without it is the row's baseline (``baseline_tpot_ms``, ``baseline_s_per_token``).
    ``routing``: ``[routing]`` keys on top of the default scenario's (:func:`scenario_data`).
    """
    if case.category == "overlap":
        on = _policies(
            case, preset, costs, {**(engine or {}), "overlap_scheduling": True}, rank_decay, routing
        )
        off = _policies(
            case,
            preset,
            costs,
            {**(engine or {}), "overlap_scheduling": False},
            rank_decay,
            routing,
        )
        row, slow = on[-1], off[-1]
        return {
            "tpot_ms": float(row.tpot_ms),
            "baseline_tpot_ms": float(slow.tpot_ms),
            "ttft_ms": float(row.ttft_ms),
            "s_per_token": 1.0 / float(row.tokens_per_s),
            "baseline_s_per_token": 1.0 / float(slow.tokens_per_s),
            "tpot_p50_ms": float(row.tpot_p50_ms),
            "baseline_tpot_p50_ms": float(slow.tpot_p50_ms),
            "ttft_p50_ms": float(row.ttft_p50_ms),
        }
    rows = _policies(case, preset, costs, engine, rank_decay, routing)
    row, baseline = rows[-1], rows[0]
    tpot = float(row.tpot_ms)
    return {
        "tpot_ms": tpot,
        "baseline_tpot_ms": tpot * float(row.speedup_vs_no_spec),
        "ttft_ms": float(row.ttft_ms),
        "s_per_token": 1.0 / float(row.tokens_per_s),
        "baseline_s_per_token": 1.0 / float(baseline.tokens_per_s),
        "tpot_p50_ms": float(row.tpot_p50_ms),
        "baseline_tpot_p50_ms": float(baseline.tpot_p50_ms),
        "ttft_p50_ms": float(row.ttft_p50_ms),
    }


def _policies(
    case: Case,
    preset: str | None,
    costs: dict[str, float] | None,
    engine: dict[str, Any] | None,
    rank_decay: float | None,
    routing: dict[str, Any] | None = None,
) -> list[Any]:
    """The policy rows of one simulated run of ``case`` (the k = 0 baseline first)."""
    data = scenario_data(case, preset, costs, engine, rank_decay=rank_decay, routing=routing)
    scenario = scenario_from_dict(data, f"validation case {case.id}")
    return list(simspec.run(scenario).policies)


def quantity(case: Case, times: dict[str, float]) -> float:
    """The row's published quantity from a run's :data:`TIMES` (module docstring)."""
    tpot, baseline_tpot = "tpot_ms", "baseline_tpot_ms"
    if serving_benchmark(case):
        tpot, baseline_tpot = "tpot_p50_ms", "baseline_tpot_p50_ms"
    if case.category in RATIO_CATEGORIES and case.quantity == "tokens_per_s":
        return times["baseline_s_per_token"] / times["s_per_token"]
    if case.category in RATIO_CATEGORIES:
        return times[baseline_tpot] / times[tpot]
    if case.quantity == "tpot_ms":
        return times[tpot]
    if case.quantity == "tokens_per_s_per_user":
        return 1000.0 / times[tpot]
    if case.quantity == "tokens_per_s":
        return 1.0 / times["s_per_token"]
    if case.quantity == "e2e_latency_s":
        return (times["ttft_ms"] + times["tpot_ms"] * (case.output_tokens - 1)) / 1000.0
    raise ValueError(case.quantity)


def predict_run(
    case: Case, preset: str | None = None, *, routing: dict[str, Any] | None = None
) -> float:
    """Decode and speculative rows: the quantity from one simulated run (module docstring);
    ``routing``: ``[routing]`` keys on top of the default scenario's (:func:`scenario_data`)."""
    return quantity(case, run_times(case, preset, routing=routing))


#: A measured speedup within this of 1 has no meaningful sign: a benchmark's run-to-run noise
#: is of this order (issue 27's target checks every sign where the measured speedup is more
#: than 2 % from 1), so sign(speedup − 1) of such a row is not checked (REPORT.md says so).
SIGN_NOISE = 0.02


def speedup_sign_right(category: str, predicted: float | None, measured: float) -> bool | None:
    """sign(predicted − 1) == sign(measured − 1); None off speculative rows or within noise."""
    if category != "speculative" or predicted is None or abs(measured - 1) <= SIGN_NOISE:
        return None
    return (predicted > 1) == (measured > 1)


@dataclass(frozen=True)
class Outcome:
    """A row's prediction (or why there is none)."""

    case: Case
    measured: float
    predicted: float | None
    error: str = ""
    ideal: float | None = None  # the prediction with the physics-only preset
    #: A row that publishes its median TTFT (``Case.ttft_ms``): the same runs' median TTFT,
    #: with the row's preset and with the physics-only one (ms).
    ttft: float | None = None
    ideal_ttft: float | None = None

    @property
    def relative_error(self) -> float | None:
        """(predicted − measured) / measured."""
        if self.predicted is None:
            return None
        return (self.predicted - self.measured) / self.measured

    @property
    def sign_right(self) -> bool | None:
        """Speculative rows: does sign(predicted − 1) match sign(measured − 1)?"""
        return speedup_sign_right(self.case.category, self.predicted, self.measured)

    @property
    def ideal_error(self) -> float | None:
        """(ideal − measured) / measured: the physics-only prediction's error."""
        return None if self.ideal is None else (self.ideal - self.measured) / self.measured

    @property
    def ttft_errors(self) -> tuple[float | None, float | None]:
        """(preset, physics-only) relative errors of the median TTFT; None where unpublished."""
        measured = self.case.ttft_ms
        return tuple(  # type: ignore[return-value]
            None if not measured or v is None else (v - measured) / measured
            for v in (self.ttft, self.ideal_ttft)
        )

    @property
    def ideal_sign_right(self) -> bool | None:
        """The sign check of the physics-only prediction."""
        return speedup_sign_right(self.case.category, self.ideal, self.measured)


def predict(case: Case) -> Outcome:
    """Predict one row; a scenario the row cannot build is an outcome with its reason."""
    measured = case.measured
    try:
        if case.category == "kernel":
            value = predict_kernel_us(case, simspec.load_scenario())
            return Outcome(case, measured, value, ideal=value)
        times = run_times(case)
        physics = times if engine_preset(case) == "ideal" else run_times(case, "ideal")
    except InputError as exc:
        return Outcome(case, measured, None, str(exc))
    value, ideal = quantity(case, times), quantity(case, physics)
    if not case.ttft_ms:
        return Outcome(case, measured, value, ideal=ideal)
    ttft, ideal_ttft = times["ttft_p50_ms"], physics["ttft_p50_ms"]
    return Outcome(case, measured, value, ideal=ideal, ttft=ttft, ideal_ttft=ideal_ttft)
