"""From run records to a :class:`~simspec.analysis.results.PolicyResult` (definitions there)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from simspec.analysis.results import GpuTime, PolicyResult
from simspec.sim.engine import RunLog


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
) -> PolicyResult:
    """The metrics and GPU-time breakdown of one run of one policy."""
    reqs, steps = log.requests, log.steps
    tokens = sum(r.output_tokens for r in reqs)
    start = min((r.arrival_s for r in reqs), default=0.0)
    makespan = max((r.finish_s for r in reqs), default=0.0) - start
    request_steps = sum(s.batch_size for s in steps)
    drafted = sum(s.drafted for s in steps)
    accepted = sum(s.accepted for s in steps)
    verify_s = sum(s.verify.total_s for s in steps)
    decode_s = sum(s.decode_s for s in steps)
    tpot = log.mean_tpot_s()
    prefill = [p.cost for p in log.prefills]
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
        unique_experts_per_layer=float(np.mean([s.unique_experts for s in steps]))
        if steps
        else 0.0,
        speedup_vs_no_spec=baseline_tpot_s / tpot if tpot > 0 else 0.0,
        gpu_time_s=GpuTime(
            draft=sum((s.draft_s for s in steps), 0.0),
            verify_moe=sum((s.verify.moe_s for s in steps), 0.0),
            verify_attention=sum((s.verify.attention_s for s in steps), 0.0),
            verify_other=sum((s.verify.other_s for s in steps), 0.0),
            overhead=sum((s.verify.overhead_s for s in steps), 0.0),
            prefill=sum((c.total_s for c in prefill), 0.0),
        ),
        requests=len(reqs),
        tokens=tokens,
        # Passes (verify and prefill) with a term outside the calibrated profile's tables.
        cost_fallbacks=sum(1 for s in steps if s.verify.fallback_terms)
        + sum(1 for c in prefill if c.fallback_terms),
        gap_to_oracle_pct=gap,
        is_baseline=is_baseline,
        is_oracle=is_oracle,
    )
