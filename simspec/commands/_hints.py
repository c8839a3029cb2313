"""Hints printed before a long simulation: what would make it faster."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Simulated tokens (requests x output tokens x runs) of Monte-Carlo routing above which
#: run, compare, sweep and validate suggest analytic routing (a run worth waiting less for).
SLOW_MONTE_CARLO_TOKENS = 100_000


def analytic_routing_hint(scenarios: Sequence[Any], oracle: bool) -> str | None:
    """A note suggesting ``routing.mode = "analytic"`` when the Monte-Carlo runs among
    ``scenarios`` are long (None otherwise)."""
    from simspec.analysis.experiment import work_tokens

    sampled = [s for s in scenarios if s.routing.mode == "monte_carlo"]
    tokens = sum(work_tokens(s, oracle) for s in sampled)
    if tokens < SLOW_MONTE_CARLO_TOKENS:
        return None
    return (
        f"note: {tokens:,} simulated tokens with Monte-Carlo routing (sampled expert sets); "
        "--set 'routing.mode=\"analytic\"' uses the expected unique experts instead and "
        "runs much faster, without the sampling noise"
    )
