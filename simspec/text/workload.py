"""Workload: how requests arrive and how long their prompts and outputs are.

Closed loop (``loop = "closed"``): ``concurrency`` requests are in flight at all times; a finished
request is replaced at once by the next one, until ``num_requests`` have been served. This is the
setting of speedup-vs-batch-size curves (MoESD, arXiv 2505.19645).

Open loop (``loop = "open"``): requests arrive as a Poisson process of rate ``arrival_rate_per_s``;
the scheduler admits them at iteration boundaries up to ``max_batch_size`` and the KV-cache
capacity (continuous batching).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import FieldError
from simspec.schema import param

#: Longest span of open-loop arrivals, s of simulated time (about 116 days): float seconds
#: then still resolve 2 ns, far below one decode step.
MAX_ARRIVAL_SPAN_S = 1e7


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadConfig:
    """The requests (scenario table ``[workload]``)."""

    loop: str = param(
        "closed",
        "closed (fixed concurrency) or open (Poisson arrivals)",
        choices=("closed", "open"),
    )
    num_requests: int = param(32, "requests served in the run", ge=1, le=1_000_000)
    concurrency: int = param(8, "requests in flight, closed loop", ge=1, le=65536)
    arrival_rate_per_s: float = param(
        1.0,
        "Poisson arrival rate, open loop, requests/s (all num_requests must arrive within "
        f"{MAX_ARRIVAL_SPAN_S:g} s of simulated time)",
        ge=1e-3,
        le=1e6,
    )
    max_batch_size: int = param(
        256,
        "most requests decoded together (the engine's max_num_seqs); in a closed loop the "
        "requests beyond it wait in line",
        ge=1,
        le=65536,
    )
    prompt_tokens: int = param(512, "mean prompt length, tokens", ge=1, le=10_000_000)
    output_tokens: int = param(256, "mean output length, tokens", ge=2, le=1_000_000)
    length_jitter: float = param(
        0.0, "lengths are uniform in [mean·(1 − j), mean·(1 + j)]", ge=0, lt=1
    )
    temperature: float = param(
        0.0,
        "sampling temperature of every request (0 = greedy): above 0 a speculative verify "
        "samples from renormalised target probabilities (costs.top_p_renorm_passes)",
        ge=0,
        le=100,
    )
    top_p: float = param(
        1.0,
        "nucleus sampling mass (1 = off); below 1 with temperature > 0 every verified row is "
        "renormalised over the vocabulary",
        gt=0,
        le=1,
    )

    def __post_init__(self) -> None:
        # Arrivals spread over num_requests / rate seconds; beyond MAX_ARRIVAL_SPAN_S the
        # float clock loses the sub-microsecond resolution a decode step needs.
        span = self.num_requests / self.arrival_rate_per_s
        if self.loop == "open" and span > MAX_ARRIVAL_SPAN_S:
            raise FieldError(
                "arrival_rate_per_s",
                f"a rate that brings num_requests = {self.num_requests} within "
                f"{MAX_ARRIVAL_SPAN_S:g} s of simulated time "
                f"(>= {self.num_requests / MAX_ARRIVAL_SPAN_S:g} requests/s)",
                self.arrival_rate_per_s,
            )


def draw_lengths(config: WorkloadConfig, rng: np.random.Generator) -> tuple[int, int]:
    """(prompt tokens, output tokens) of one request."""
    j = config.length_jitter
    scale = rng.uniform(1 - j, 1 + j, size=2) if j else np.ones(2)
    prompt = max(1, round(config.prompt_tokens * scale[0]))
    output = max(2, round(config.output_tokens * scale[1]))
    return prompt, output


def arrival_times(config: WorkloadConfig, rng: np.random.Generator) -> np.ndarray:
    """Arrival times (s) of all requests in an open loop; zeros in a closed loop."""
    if config.loop == "closed":
        return np.zeros(config.num_requests)
    gaps = rng.exponential(1.0 / config.arrival_rate_per_s, size=config.num_requests)
    return np.cumsum(gaps) - gaps[0]
