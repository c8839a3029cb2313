"""Service-level objectives a run is scored against (scenario table ``[slo]``).

A request meets the SLO when its TPOT and its TTFT are at most the targets that are set. With
any target set, every results row gains ``slo_attainment`` (the fraction of requests that meet
it) and goodput: those requests, and their output tokens, per second of makespan
(:mod:`simspec.analysis.metrics`). No target set = no SLO metrics (the results are unchanged).

```toml
[slo]
tpot_ms = 15.0     # time per output token after the first, ms
ttft_ms = 200.0    # time to first token, ms
```
"""

from __future__ import annotations

from dataclasses import dataclass

from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class SloConfig:
    """Latency targets per request (scenario table ``[slo]``); unset = no objective."""

    tpot_ms: float | None = param(None, "time per output token a request must meet, ms", gt=0)
    ttft_ms: float | None = param(None, "time to first token a request must meet, ms", gt=0)
