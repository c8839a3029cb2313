"""From run records to the summary fields of the results JSON (README, "Results JSON").

Definitions are the usual serving ones: TTFT = first-token time − arrival; TPOT = (finish −
first-token time) / (output tokens − 1), averaged over requests; tokens/s = committed output
tokens / makespan; acceptance length = mean tokens committed per request per verify pass
(accepted drafts + 1); acceptance rate = accepted / drafted; verify_over_decode = total verify
time / total time the same passes would take with k = 0 (same requests, same contexts);
speedup_vs_no_spec = TPOT of the k = 0 run / TPOT of this run on the same reference sequences.
cost_fallbacks = passes (verify and prefill) in which the calibrated cost model took a term
from its fitted roofline because the point lay outside the profile's measured tables (0 for the
roofline model).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simspec.sim.engine import RunLog


def mean_tpot_s(log: RunLog) -> float:
    """Mean time per output token after the first, over requests."""
    tpots = [(r.finish_s - r.first_token_s) / (r.output_tokens - 1) for r in log.requests]
    return float(np.mean(tpots)) if tpots else 0.0


def summarize(log: RunLog, baseline_tpot_s: float) -> dict[str, Any]:
    """The scalar metrics and GPU-time breakdown of one run."""
    reqs, steps = log.requests, log.steps
    tokens = sum(r.output_tokens for r in reqs)
    start = min((r.arrival_s for r in reqs), default=0.0)
    makespan = max((r.finish_s for r in reqs), default=0.0) - start
    request_steps = sum(s.batch_size for s in steps)
    drafted = sum(s.drafted for s in steps)
    accepted = sum(s.accepted for s in steps)
    verify_s = sum(s.verify.total_s for s in steps)
    decode_s = sum(s.decode_s for s in steps)
    tpot = mean_tpot_s(log)
    prefill = [p.cost for p in log.prefills]
    return {
        "tokens_per_s": tokens / makespan if makespan > 0 else 0.0,
        "tpot_ms": tpot * 1e3,
        "ttft_ms": float(np.mean([r.first_token_s - r.arrival_s for r in reqs])) * 1e3
        if reqs
        else 0.0,
        "acceptance_length": (accepted + request_steps) / request_steps if request_steps else 0.0,
        "acceptance_rate": accepted / drafted if drafted else 0.0,
        "mean_k": drafted / request_steps if request_steps else 0.0,
        "verify_over_decode": verify_s / decode_s if decode_s else 0.0,
        "unique_experts_per_layer": float(np.mean([s.unique_experts for s in steps]))
        if steps
        else 0.0,
        "speedup_vs_no_spec": baseline_tpot_s / tpot if tpot > 0 else 0.0,
        "gpu_time_s": {
            "draft": sum((s.draft_s for s in steps), 0.0),
            "verify_moe": sum((s.verify.moe_s for s in steps), 0.0),
            "verify_attention": sum((s.verify.attention_s for s in steps), 0.0),
            "verify_other": sum((s.verify.other_s for s in steps), 0.0),
            "overhead": sum((s.verify.overhead_s for s in steps), 0.0),
            "prefill": sum((c.total_s for c in prefill), 0.0),
        },
        "requests": len(reqs),
        "tokens": tokens,
        # Passes (verify and prefill) with a term outside the calibrated profile's tables.
        "cost_fallbacks": sum(1 for s in steps if s.verify.fallback_terms)
        + sum(1 for c in prefill if c.fallback_terms),
    }
