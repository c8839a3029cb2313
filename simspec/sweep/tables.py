"""The two CSV tables of a sweep, views of its :class:`~simspec.sweep.points.PointResult` objects.

``results.csv``: one row per point × policy (case, grid keys, replication, seed, policy label
and name, :data:`simspec.analysis.results.METRICS`, gap to the oracle, requests, tokens, GPU
time per component). ``summary.csv``: one row per (case, grid values, policy) with the
statistics of :class:`~simspec.sweep.summary.PolicySummary`. Rows follow the sweep's order,
never completion order; a point that sets no value for a grid key leaves its cell empty.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simspec.io import write_atomic
from simspec.sweep.points import PointResult, axes
from simspec.sweep.summary import PolicySummary, summarize


def result_rows(points: Sequence[PointResult]) -> list[dict[str, Any]]:
    """The rows of ``results.csv``: one per point × policy."""
    keys = axes(points)
    rows: list[dict[str, Any]] = []
    for p in points:
        for row in p.result.policies:
            flat: dict[str, Any] = {
                "case": p.case,
                **{k: p.values.get(k, "") for k in keys},
                "replication": p.replication,
                "seed": p.result.seed,
                "policy": row.label,
                "policy_name": row.name,
                **row.scalars(),
                "gap_to_oracle_pct": "" if row.gap_to_oracle_pct is None else row.gap_to_oracle_pct,
                "requests": row.requests,
                "tokens": row.tokens,
            }
            for name, value in row.gpu_time_s.parts.items():
                flat[f"gpu_time_s.{name}"] = value
            rows.append(flat)
    return rows


def summary_rows(summaries: Sequence[PolicySummary]) -> list[dict[str, Any]]:
    """The rows of ``summary.csv``: one per (case, grid values, policy)."""
    return [
        {
            "case": s.case,
            **s.values,
            "policy": s.policy,
            "replications": s.replications,
            **s.statistics(),
        }
        for s in summaries
    ]


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    """CSV text with a header from the first row's keys ('' for no rows)."""
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_tables(points: Sequence[PointResult], out: Path) -> tuple[Path, Path]:
    """Write ``out/results.csv`` and ``out/summary.csv``; returns their paths."""
    results = write_atomic(out / "results.csv", to_csv(result_rows(points)))
    summary = write_atomic(out / "summary.csv", to_csv(summary_rows(summarize(points))))
    return results, summary
