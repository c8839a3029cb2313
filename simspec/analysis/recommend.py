"""The recommendation: for one batch size, which fixed draft length k to run, and what it buys.

Input: R replications (:mod:`simspec.analysis.replications`) of a scenario whose policies are
fixed k = 0..K, some online policies, and the hindsight oracle. Output, from the speedups over
k = 0 (TPOT of k = 0 / TPOT of the policy, per replication):

* the **best fixed k**: the k with the highest mean speedup (its mean and 95 % t interval is the
  *expected speedup* of following the recommendation);
* the **runners-up within noise**: every other k whose paired difference to the best (same
  reference sequences in each replication) has a 95 % interval containing 0: the data cannot
  tell them apart, so either is as good an answer;
* the **best online policy** (highest mean speedup among the non-fixed policies) and its paired
  difference to the best fixed k: does adapting k per step beat the best constant?
* the **oracle's bound**: the hindsight oracle's speedup, an upper bound for any policy on the
  same sequences (approximate above batch 1: :mod:`simspec.analysis.oracle`).

:func:`batch_scenario` and :func:`recommend` are pure; :func:`recommend_batches` runs the
replications (the one place here that simulates) and :mod:`simspec.commands.recommend` prints.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simspec.analysis.experiment import Progress
from simspec.analysis.guardrails import (
    PRESET_RANGE,
    PUBLISHED_MISS,
    acceptance_warning,
    best_k_at_edge,
    within_error_warning,
)
from simspec.analysis.replications import Interval, Replicated, replicate
from simspec.config.load import with_overrides
from simspec.config.scenario import Scenario

#: Online policies recommend compares when neither the scenario nor --policies names one.
DEFAULT_ONLINE = ("threshold", "cost_aware")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One policy's mean speedup and its paired difference to the batch's best fixed k."""

    label: str
    speedup: Interval
    diff_vs_best: Interval  # speedup(this) − speedup(best fixed k), paired over replications

    @property
    def within_noise(self) -> bool:
        """The paired interval of the difference contains 0 (true without an interval)."""
        return self.diff_vs_best.contains(0.0)


@dataclass(frozen=True, slots=True)
class BatchRecommendation:
    """The answer for one batch size (module docstring)."""

    batch: int
    replications: int
    fixed: tuple[tuple[int, Candidate], ...]  # (k, candidate) for every fixed k, ascending
    best_k: int
    online: tuple[Candidate, ...]  # every online policy, in the scenario's order
    oracle: Interval | None
    #: Guardrail warnings (:mod:`simspec.analysis.guardrails`): the replications' preset-range
    #: warnings and whether the best k is the largest searched.
    warnings: tuple[str, ...] = ()

    @property
    def best(self) -> Candidate:
        """The best fixed k's candidate."""
        return dict(self.fixed)[self.best_k]

    @property
    def expected_speedup(self) -> Interval:
        """The speedup of running the best fixed k (mean and 95 % interval)."""
        return self.best.speedup

    @property
    def runners_up(self) -> tuple[tuple[int, Candidate], ...]:
        """The other fixed k within noise of the best, best mean first."""
        others = [(k, c) for k, c in self.fixed if k != self.best_k and c.within_noise]
        return tuple(sorted(others, key=lambda kc: -kc[1].speedup.mean))

    @property
    def best_online(self) -> Candidate | None:
        """The online policy with the highest mean speedup (None without online policies)."""
        return max(self.online, key=lambda c: c.speedup.mean, default=None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every candidate's speedup and paired difference (null without a CI)."""

        def row(c: Candidate, **extra: Any) -> dict[str, Any]:
            return {
                "policy": c.label,
                **extra,
                **c.speedup.to_dict("speedup_vs_no_spec"),
                **c.diff_vs_best.to_dict("speedup_diff_vs_best_k"),
                "within_noise": c.within_noise,
            }

        best_online = self.best_online
        return {
            "batch": self.batch,
            "replications": self.replications,
            "best_k": self.best_k,
            **self.expected_speedup.to_dict("expected_speedup"),
            "within_noise_k": [k for k, _ in self.runners_up],
            "best_online": best_online.label if best_online else None,
            **(self.oracle.to_dict("oracle_speedup") if self.oracle else {}),
            "fixed": [row(c, draft_tokens=k) for k, c in self.fixed],
            "online": [row(c) for c in self.online],
            "warnings": list(self.warnings),
        }


def fixed_draft_tokens(replicated: Replicated) -> dict[str, int]:
    """Label -> k of every fixed-k row (the k = 0 baseline included), from replication 0."""
    return {
        p.label: int(p.params["draft_tokens"])
        for p in replicated.runs[0].policies
        if p.name == "fixed" and not p.is_oracle
    }


def recommend(
    replicated: Replicated, batch: int, max_draft_tokens: int | None = None
) -> BatchRecommendation:
    """The recommendation for ``batch`` from its replications (module docstring).

    The best fixed k maximises the mean speedup over replications (the smallest k on ties:
    fewer drafts, less work for the same result). ``max_draft_tokens``: the drafter's limit,
    named by the warning when the best k is the largest searched.
    """
    fixed = fixed_draft_tokens(replicated)
    if not fixed:
        raise ValueError("recommend needs fixed-k policies (k = 0 at least)")
    mean = {label: replicated.mean(label) for label in replicated.labels}
    best_label = max(sorted(fixed, key=fixed.__getitem__), key=lambda label: mean[label].mean)

    def candidate(label: str) -> Candidate:
        return Candidate(label, mean[label], replicated.paired(label, best_label))

    first = replicated.runs[0]
    online = tuple(
        candidate(p.label)
        for p in first.policies
        if p.label not in fixed and not p.is_oracle and not p.is_baseline
    )
    oracle_row = first.oracle_result
    labels = sorted(fixed, key=fixed.__getitem__)
    edge = best_k_at_edge(
        [fixed[label] for label in labels], [mean[label].mean for label in labels], max_draft_tokens
    )
    ranges = [w for w in replicated.warnings if w.startswith((PRESET_RANGE, PUBLISHED_MISS))]
    return BatchRecommendation(
        batch=batch,
        replications=len(replicated.runs),
        fixed=tuple(
            sorted(((fixed[label], candidate(label)) for label in fixed), key=lambda kc: kc[0])
        ),
        best_k=fixed[best_label],
        online=online,
        oracle=mean[oracle_row.label] if oracle_row is not None else None,
        warnings=(*ranges, *([edge] if edge else [])),
    )


def _ci(interval: Interval) -> str:
    """``1.234 [1.200, 1.268]`` (the mean alone without an interval)."""
    if math.isnan(interval.half_width):
        return f"{interval.mean:.3f}"
    return f"{interval.mean:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def markdown_table(recommendations: Sequence[BatchRecommendation]) -> str:
    """One row per batch size: best k and its expected speedup (95 % CI), the k within noise,
    the best online policy with its paired difference to the best k, and the oracle's bound."""
    lines = [
        "| batch | best k | expected speedup (95 % CI) | also within noise | best online policy "
        "| online − best k | oracle bound |",
        "|---:|---:|---|---|---|---|---|",
    ]
    for rec in recommendations:
        ties = ", ".join(f"k={k}" for k, _ in rec.runners_up) or "none"
        online = rec.best_online
        online_text = f"{online.label}: {_ci(online.speedup)}" if online else "none"
        diff = online.diff_vs_best.text(sign="+") if online else ""
        oracle = _ci(rec.oracle) if rec.oracle is not None else ""
        lines.append(
            f"| {rec.batch} | {rec.best_k} | {_ci(rec.expected_speedup)} | {ties} | "
            f"{online_text} | {diff} | {oracle} |"
        )
    return "\n".join(lines) + "\n"


def online_policy_data(scenario: Scenario, names: Sequence[str] | None) -> list[dict[str, Any]]:
    """The online policies to compare, as scenario data: ``names`` with their defaults, else
    the scenario's own non-fixed policies, else :data:`DEFAULT_ONLINE`."""
    if names is not None:
        return [{"name": name} for name in names]
    own = [p for p in scenario.to_data()["policies"] if p["name"] != "fixed"]
    return own or [{"name": name} for name in DEFAULT_ONLINE]


def batch_scenario(
    scenario: Scenario, batch: int, max_k: int, online: Sequence[dict[str, Any]]
) -> Scenario:
    """``scenario`` at batch size ``batch`` with fixed k = 0..``max_k`` and the ``online`` policies.

    Closed loop: ``batch`` requests in flight (and at least ``batch`` requests, so the batch
    is full); open loop: at most ``batch`` requests decoded together.
    """
    w = scenario.workload
    overrides: dict[str, Any] = {
        "policies": [{"name": "fixed", "draft_tokens": k} for k in range(max_k + 1)]
        + [dict(p) for p in online]
    }
    if w.loop == "closed":
        overrides["workload.concurrency"] = batch
        overrides["workload.num_requests"] = max(w.num_requests, batch)
    else:
        overrides["workload.max_batch_size"] = batch
    return with_overrides(scenario, overrides)


def recommend_batches(
    scenarios: Sequence[tuple[int, Scenario]],
    replications: int,
    progress: Progress | None = None,
) -> list[BatchRecommendation]:
    """Run each ``(batch, scenario)`` :func:`replicate`-d with the oracle and recommend."""
    out = []
    for i, (batch, scenario) in enumerate(scenarios):

        def step(done: int, total: int, offset: int = i) -> None:
            if progress is not None:
                progress(offset * total + done, len(scenarios) * total)

        replicated = replicate(scenario, replications, oracle=True, progress=step)
        rec = recommend(replicated, batch, scenario.drafter.max_draft_tokens)
        extrapolated = acceptance_warning(scenario, rec.best_k)
        if extrapolated:
            rec = dataclasses.replace(rec, warnings=(*rec.warnings, extrapolated))
        drafting = [(c.speedup.mean, -k, c.label) for k, c in rec.fixed if k > 0]
        if drafting:
            speedup, _, label = max(drafting)
            unsettled = within_error_warning(scenario, label, speedup, batch)
            if unsettled:
                rec = dataclasses.replace(rec, warnings=(*rec.warnings, unsettled))
        out.append(rec)
    return out
