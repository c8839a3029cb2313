"""Service-level objectives a run is scored against (scenario table ``[slo]``)."""

from __future__ import annotations

from dataclasses import dataclass

from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class SloConfig:
    """Latency targets per request (scenario table ``[slo]``); unset = no objective."""

    tpot_ms: float | None = param(None, "time per output token a request must meet, ms", gt=0)
    ttft_ms: float | None = param(None, "time to first token a request must meet, ms", gt=0)
