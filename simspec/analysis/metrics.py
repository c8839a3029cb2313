"""From run records to a :class:`~simspec.analysis.results.PolicyResult` (definitions there).

Per request: TTFT = first-token time − arrival and TPOT = (finish − first-token time) /
(output tokens − 1). A run reports their means, their 50th/90th/99th percentiles, and, against
the scenario's ``[slo]`` targets, how many requests met every target and at what rate (goodput).
:func:`requests_csv` writes the same per-request values, one row per request
(:data:`REQUEST_COLUMNS`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simspec.analysis.results import GpuTime, PolicyResult, RunResult, step_parts
from simspec.config.slo import SloConfig
from simspec.costs.batch import verify_totals
from simspec.sim.records import PASS_PARTS, RequestRecord, RunLog
from simspec.sim.setup import EngineSetup

#: The latency percentiles every run reports (``tpot_p50_ms``, ..., ``ttft_p99_ms``).
PERCENTILES = (50, 90, 99)


def request_ttft_s(requests: Sequence[RequestRecord]) -> np.ndarray:
    """Time to first token of each request, s."""
    return np.array([r.first_token_s - r.arrival_s for r in requests], dtype=float)


def request_tpot_s(requests: Sequence[RequestRecord]) -> np.ndarray:
    """Time per output token after the first, of each request, s (outputs have >= 2 tokens)."""
    return np.array(
        [(r.finish_s - r.first_token_s) / (r.output_tokens - 1) for r in requests], dtype=float
    )


def percentiles_ms(values_s: np.ndarray) -> tuple[float, ...]:
    """The :data:`PERCENTILES` of ``values_s`` in ms (zeros when there are no values)."""
    if len(values_s) == 0:
        return tuple(0.0 for _ in PERCENTILES)
    return tuple(float(v) * 1e3 for v in np.percentile(values_s, PERCENTILES))


def has_targets(slo: SloConfig | None) -> bool:
    """Whether ``slo`` sets any target."""
    return slo is not None and (slo.tpot_ms is not None or slo.ttft_ms is not None)


def meets_slo(requests: Sequence[RequestRecord], slo: SloConfig) -> np.ndarray:
    """Per request: its TPOT and TTFT are at most the targets ``slo`` sets (unset = no limit)."""
    ok = np.ones(len(requests), dtype=bool)
    if slo.tpot_ms is not None:
        ok &= request_tpot_s(requests) * 1e3 <= slo.tpot_ms
    if slo.ttft_ms is not None:
        ok &= request_ttft_s(requests) * 1e3 <= slo.ttft_ms
    return ok


def _slo_metrics(
    requests: Sequence[RequestRecord], slo: SloConfig | None, makespan_s: float
) -> dict[str, float | None]:
    if slo is None or not has_targets(slo):
        return {}
    ok = meets_slo(requests, slo)
    good_tokens = sum(r.output_tokens for r, met in zip(requests, ok, strict=True) if met)
    return {
        "slo_attainment": float(ok.mean()) if len(ok) else 0.0,
        "goodput_requests_per_s": int(ok.sum()) / makespan_s if makespan_s > 0 else 0.0,
        "goodput_tokens_per_s": good_tokens / makespan_s if makespan_s > 0 else 0.0,
    }


_PLAIN_CHUNK = 2048  # plain passes priced per call
_PLAIN_TOKENS = 4096  # sampled routing: their tokens gathered per call, at most


def plain_decode_s(log: RunLog, setup: EngineSetup) -> float:
    """Seconds the run's steps would have taken as plain decode passes (k = 0): the
    denominator of ``verify_over_decode``.

    Each step's plain pass feeds one token per request of its batch at the step's contexts,
    with the experts of those requests' true tokens alone; a step in which nobody drafted was
    that pass. The passes of each batch size are priced together, as rows of
    :func:`~simspec.costs.batch.verify_totals` (each row is ``verify_pass``'s
    total), and summed in step order.
    """
    steps, refs = log.steps, setup.references
    if not len(steps):
        return 0.0
    totals = _verify_s(log)  # the verify pass of a step in which nobody drafted
    offset, ids, positions = steps.members()
    prompts = np.array([refs.sequence(r).prompt_tokens for r in range(int(ids.max()) + 1)])
    analytic = refs.routing.mode == "analytic"
    by_batch: dict[int, list[int]] = {}
    for s in np.flatnonzero(steps.column("drafted")).tolist():
        by_batch.setdefault(int(offset[s + 1] - offset[s]), []).append(s)
    for batch, steps_of_batch in by_batch.items():
        ones = np.ones(batch, dtype=np.int64)
        # Analytic: an expectation over B one-token sequences, which depends on B alone.
        expected = refs.expected_unique(ones, ones) if analytic else None
        # Bounded memory; sampled routing gathers every token of a chunk's passes at once.
        chunk = _PLAIN_CHUNK if analytic else max(1, min(_PLAIN_CHUNK, _PLAIN_TOKENS // batch))
        for start in range(0, len(steps_of_batch), chunk):
            rows = steps_of_batch[start : start + chunk]
            members = offset[rows][:, None] + np.arange(batch)  # (N, B) indices into ids
            rid, pos = ids[members], positions[members]
            if expected is not None:
                plain = np.tile(expected, (len(rows), 1))
            else:  # every request's next true token, each step's union at once
                fed = np.stack([rid.ravel(), pos.ravel(), np.zeros(rid.size, np.int64)], axis=1)
                passes = np.repeat(np.arange(len(rows)), batch)
                plain = refs.pass_unique_experts_each(fed, fed[:, 2], passes)
            contexts = prompts[rid] + pos
            totals[rows] = verify_totals(setup.cost_model, np.ones_like(rid), contexts, plain)
    return float(sum(totals.tolist()))


def _verify_s(log: RunLog) -> np.ndarray:
    """Each step's verify pass, its components summed in :class:`PassCost`'s order."""
    columns = [log.steps.column(name) for name in PASS_PARTS]
    total = columns[0].copy()
    for column in columns[1:]:
        total += column
    return total


def gpu_time(log: RunLog) -> GpuTime:
    """The run's GPU time by part (:func:`~simspec.analysis.results.gpu_time_parts`): each
    time component of a step (:func:`~simspec.analysis.results.step_parts`, the step log's
    column of that name) summed over the steps in order, then the prefill passes'. Their sum
    is the run's whole GPU time."""
    parts = {part: sum(log.steps.column(name).tolist(), 0.0) for part, name in step_parts()}
    parts["prefill"] = sum((p.cost.total_s for p in log.prefills), 0.0)
    return GpuTime(parts)


def summarize(
    log: RunLog,
    baseline_tpot_s: float,
    *,
    name: str,
    label: str,
    params: Mapping[str, Any],
    oracle_tpot_s: float | None = None,
    is_baseline: bool = False,
    is_oracle: bool = False,
    slo: SloConfig | None = None,
    decode_s: float = 0.0,
) -> PolicyResult:
    """The metrics and GPU-time breakdown of one run of one policy (SLO metrics with ``slo``;
    ``verify_over_decode`` with ``decode_s``, the run's :func:`plain_decode_s`)."""
    reqs, steps = log.requests, log.steps
    tokens = sum(r.output_tokens for r in reqs)
    start = min((r.arrival_s for r in reqs), default=0.0)
    makespan = max((r.finish_s for r in reqs), default=0.0) - start
    column = steps.column

    request_steps = int(column("batch_size").sum())
    drafted = int(column("drafted").sum())
    accepted = int(column("accepted").sum())
    verify_s = sum(_verify_s(log).tolist())
    tpot = log.mean_tpot_s()
    prefill = [p.cost for p in log.prefills]
    tpot_p = percentiles_ms(request_tpot_s(reqs))
    ttft_p = percentiles_ms(request_ttft_s(reqs))
    gap = None
    if oracle_tpot_s is not None:
        gap = 100.0 * (tpot / oracle_tpot_s - 1.0) if oracle_tpot_s else 0.0
    return PolicyResult(
        name=name,
        label=label,
        params=dict(params),
        tokens_per_s=tokens / makespan if makespan > 0 else 0.0,
        tpot_ms=tpot * 1e3,
        ttft_ms=float(np.mean([r.first_token_s - r.arrival_s for r in reqs])) * 1e3
        if reqs
        else 0.0,
        acceptance_length=(accepted + request_steps) / request_steps if request_steps else 0.0,
        acceptance_rate=accepted / drafted if drafted else 0.0,
        mean_k=drafted / request_steps if request_steps else 0.0,
        verify_over_decode=verify_s / decode_s if decode_s else 0.0,
        unique_experts_per_layer=float(np.mean(column("unique_experts"))) if len(steps) else 0.0,
        speedup_vs_no_spec=baseline_tpot_s / tpot if tpot > 0 else 0.0,
        gpu_time_s=gpu_time(log),
        requests=len(reqs),
        tokens=tokens,
        # Passes (verify and prefill) with a term outside the calibrated profile's tables.
        cost_fallbacks=int(np.count_nonzero(column("fallback_terms")))
        + sum(1 for c in prefill if c.fallback_terms),
        gap_to_oracle_pct=gap,
        is_baseline=is_baseline,
        is_oracle=is_oracle,
        tpot_p50_ms=tpot_p[0],
        tpot_p90_ms=tpot_p[1],
        tpot_p99_ms=tpot_p[2],
        ttft_p50_ms=ttft_p[0],
        ttft_p90_ms=ttft_p[1],
        ttft_p99_ms=ttft_p[2],
        **_slo_metrics(reqs, slo, makespan),
        **_offload_metrics(log, makespan),
    )


def _offload_metrics(log: RunLog, makespan_s: float) -> dict[str, float]:
    """:data:`~simspec.analysis.results.OFFLOAD_METRICS` of a run with offloaded experts
    (none without)."""
    off = log.offload
    if off is None:
        return {}
    decode = np.array(off.decode, dtype=bool)
    needed = float(np.array(off.needed)[decode].sum())
    missed = float(np.array(off.missed)[decode].sum())
    busy = float(np.sum(off.copy_s))
    return {
        "expert_hit_rate": 1.0 - missed / needed if needed else 1.0,
        "link_gb": float(np.sum(off.copied_bytes)) / 1e9,
        "link_busy_s": busy,
        "link_busy_fraction": busy / makespan_s if makespan_s > 0 else 0.0,
        "exposed_copy_s": float(np.sum(off.exposed_s)),
    }


#: Columns of the per-request CSV (``--requests-csv``), in order: the replication and the seed it
#: ran with, the policy's label, the request's id and its record (times in s of simulated time
#: since the run began), its TTFT and TPOT in ms, and ``meets_slo`` (1 or 0; empty without an
#: ``[slo]`` table).
REQUEST_COLUMNS = (
    "replication",
    "seed",
    "policy",
    "request_id",
    "arrival_s",
    "first_token_s",
    "finish_s",
    "prompt_tokens",
    "output_tokens",
    "ttft_ms",
    "tpot_ms",
    "steps",
    "drafted",
    "accepted",
    "meets_slo",
)


def request_rows(result: RunResult, replication: int = 0) -> list[dict[str, Any]]:
    """One row per request per policy of ``result`` (kept logs needed: ``keep_logs=True``)."""
    if result.logs is None:
        raise ValueError("per-request rows need the run's logs: run_experiment(keep_logs=True)")
    slo = SloConfig(**result.scenario.get("slo", {}))
    rows = []
    for row in result.policies:
        reqs = result.logs[row.label].requests
        met = meets_slo(reqs, slo) if has_targets(slo) else None
        ttft, tpot = request_ttft_s(reqs) * 1e3, request_tpot_s(reqs) * 1e3
        for i, r in enumerate(reqs):
            rows.append(
                {
                    "replication": replication,
                    "seed": result.seed,
                    "policy": row.label,
                    "request_id": r.request_id,
                    "arrival_s": r.arrival_s,
                    "first_token_s": r.first_token_s,
                    "finish_s": r.finish_s,
                    "prompt_tokens": r.prompt_tokens,
                    "output_tokens": r.output_tokens,
                    "ttft_ms": float(ttft[i]),
                    "tpot_ms": float(tpot[i]),
                    "steps": r.steps,
                    "drafted": r.drafted,
                    "accepted": r.accepted,
                    "meets_slo": "" if met is None else int(met[i]),
                }
            )
    return rows


def requests_csv(results: Sequence[RunResult]) -> str:
    """The per-request CSV text of the runs (replication r = ``results[r]``), floats as repr."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=REQUEST_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for replication, result in enumerate(results):
        writer.writerows(request_rows(result, replication))
    return out.getvalue()
