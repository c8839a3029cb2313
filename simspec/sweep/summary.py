"""The sweep's ``summary.csv`` rows: each point's replications summarised by
:func:`simspec.analysis.replications.summarize_runs` (means, 95 % t intervals, paired TPOT
differences to the k = 0 baseline and to the oracle), flattened into one typed row per
(case, grid values, policy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from simspec.analysis.replications import summarize_runs
from simspec.sweep.points import PointResult, axes


def _statistic() -> Any:
    return field(metadata={"statistic": True})


@dataclass(frozen=True)
class PolicySummary:
    """One policy at one sweep point (case and grid values), over its replications.

    The fields marked as statistics are the columns of ``summary.csv`` after ``replications``,
    in order; TPOT differences are in ms, negative = faster than the reference.
    """

    case: str
    values: Mapping[str, Any]
    policy: str  # the policy's label
    is_baseline: bool
    is_oracle: bool
    replications: int
    tpot_ms: float = _statistic()
    tpot_ms_ci95: float = _statistic()
    tokens_per_s: float = _statistic()
    speedup_vs_no_spec: float = _statistic()
    speedup_vs_no_spec_ci95: float = _statistic()
    mean_k: float = _statistic()
    acceptance_length: float = _statistic()
    tpot_diff_vs_no_spec_ms: float = _statistic()
    tpot_diff_vs_no_spec_ci95_ms: float = _statistic()
    tpot_diff_vs_oracle_ms: float = _statistic()
    tpot_diff_vs_oracle_ci95_ms: float = _statistic()

    def statistics(self) -> dict[str, float]:
        """The statistics by name, in column order."""
        return {name: getattr(self, name) for name in STATISTICS}


#: The statistics of a :class:`PolicySummary`, in ``summary.csv`` order.
STATISTICS: tuple[str, ...] = tuple(
    f.name for f in fields(PolicySummary) if f.metadata.get("statistic")
)


def summarize(points: Sequence[PointResult]) -> list[PolicySummary]:
    """One :class:`PolicySummary` per (case, grid values, policy), in the sweep's order: the
    replications of each point summarised by
    :func:`simspec.analysis.replications.summarize_runs`."""
    keys = axes(points)
    groups: dict[tuple[Any, ...], dict[int, PointResult]] = {}
    for p in points:
        # Values compare as the text the tables show them as (1 and 1.0 stay apart, as in CSV).
        where = (p.case, *(str(p.values.get(k, "")) for k in keys))
        groups.setdefault(where, {})[p.replication] = p
    out = []
    for reps in groups.values():
        first = reps[min(reps)]
        for row in summarize_runs([reps[r].result for r in sorted(reps)]):
            out.append(
                PolicySummary(
                    case=first.case,
                    values={k: first.values.get(k, "") for k in keys},
                    policy=row.policy,
                    is_baseline=row.is_baseline,
                    is_oracle=row.is_oracle,
                    replications=row.replications,
                    tpot_ms=row.tpot_ms.mean,
                    tpot_ms_ci95=row.tpot_ms.half_width,
                    tokens_per_s=row.tokens_per_s,
                    speedup_vs_no_spec=row.speedup_vs_no_spec.mean,
                    speedup_vs_no_spec_ci95=row.speedup_vs_no_spec.half_width,
                    mean_k=row.mean_k,
                    acceptance_length=row.acceptance_length,
                    tpot_diff_vs_no_spec_ms=row.tpot_diff_vs_no_spec_ms.mean,
                    tpot_diff_vs_no_spec_ci95_ms=row.tpot_diff_vs_no_spec_ms.half_width,
                    tpot_diff_vs_oracle_ms=row.tpot_diff_vs_oracle_ms.mean,
                    tpot_diff_vs_oracle_ci95_ms=row.tpot_diff_vs_oracle_ms.half_width,
                )
            )
    return out
