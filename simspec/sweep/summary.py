"""Means over replications and paired 95 % confidence intervals.

Replications of a sweep point differ only in their seed, so they are independent draws of the
same experiment. Within one replication every policy, the k = 0 baseline and the oracle run on
the *same* reference sequences (common random numbers). The difference of a policy's TPOT to
the baseline's in replication r,

    d_r = TPOT(policy, r) − TPOT(baseline, r),

is therefore a paired difference: what the text does to both runs (a long easy stretch, a burst
of rejections) cancels, and d_r varies far less than either TPOT. Its 95 % confidence interval is
the Student-t interval of the mean of R independent values,

    d̄ ± t_{0.975, R−1} · s_d / √R,

with s_d the sample standard deviation (``scipy.stats.t``); one replication gives no interval
(nan). Two policies that behave identically have d_r = 0 exactly, and so a zero-width interval.
The same interval of the plain means (``tpot_ms_ci95``) is much wider: it carries the text's
variation too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from simspec.analysis.replications import half_width_95, paired_ci
from simspec.analysis.results import PolicyResult, RunResult
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
#: Metrics averaged over replications; those in :data:`WITH_CI` also get a 95 % half-width.
MEANS = ("tpot_ms", "tokens_per_s", "speedup_vs_no_spec", "mean_k", "acceptance_length")
WITH_CI = ("tpot_ms", "speedup_vs_no_spec")


def _tpot_diffs(runs: Sequence[RunResult], label: str, reference: str) -> tuple[float, float]:
    """Paired TPOT differences of ``label`` to the baseline or the oracle, over replications."""
    diffs = []
    for run in runs:
        ref = run.baseline if reference == "no_spec" else run.oracle_result
        mine = _row(run, label)
        if ref is not None and mine is not None:
            diffs.append(mine.tpot_ms - ref.tpot_ms)
    return paired_ci(diffs)


def _row(run: RunResult, label: str) -> PolicyResult | None:
    return next((p for p in run.policies if p.label == label), None)


def summarize(points: Sequence[PointResult]) -> list[PolicySummary]:
    """One :class:`PolicySummary` per (case, grid values, policy), in the sweep's order."""
    keys = axes(points)
    groups: dict[tuple[Any, ...], dict[int, PointResult]] = {}
    order: dict[tuple[tuple[Any, ...], str], None] = {}
    for p in points:
        # Values compare as the text the tables show them as (1 and 1.0 stay apart, as in CSV).
        where = (p.case, *(str(p.values.get(k, "")) for k in keys))
        groups.setdefault(where, {})[p.replication] = p
        for row in p.result.policies:
            order.setdefault((where, row.label), None)
    out = []
    for where, label in order:
        reps = groups[where]
        runs = [reps[r].result for r in sorted(reps)]
        present = [(reps[r], found) for r in sorted(reps) if (found := _row(reps[r].result, label))]
        first = present[0][0]
        mine = [found for _, found in present]
        stats: dict[str, float] = {}
        for name in MEANS:
            values = [float(getattr(m, name)) for m in mine]
            stats[name] = float(np.mean(values))
            if name in WITH_CI:
                stats[f"{name}_ci95"] = half_width_95(values)
        for reference in ("no_spec", "oracle"):
            mean, half = _tpot_diffs(runs, label, reference)
            stats[f"tpot_diff_vs_{reference}_ms"] = mean
            stats[f"tpot_diff_vs_{reference}_ci95_ms"] = half
        out.append(
            PolicySummary(
                case=first.case,
                values={k: first.values.get(k, "") for k in keys},
                policy=label,
                is_baseline=mine[0].is_baseline,
                is_oracle=mine[0].is_oracle,
                replications=len(mine),
                **stats,
            )
        )
    return out
