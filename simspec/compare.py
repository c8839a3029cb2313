"""Compare every policy of a scenario with the k = 0 baseline and the hindsight oracle.

All runs share one set of reference sequences (common random numbers), so the differences are
the policies' alone. The results object is the ``simulate`` one (README, "Results JSON") with
the baseline and oracle rows added, a ``gap_to_oracle_pct`` per row (how much longer its TPOT is
than the oracle's), and an ``oracle`` section: exact or approximate, how it was found, and the
Delta-space summary of its decisions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simspec import __version__
from simspec.analysis.delta import DeltaPoints, analyse
from simspec.analysis.metrics import mean_tpot_s, summarize
from simspec.analysis.oracle import oracle_plan
from simspec.config.scenario import Scenario
from simspec.policies import FixedPolicy
from simspec.sim.engine import RunLog, run_policy
from simspec.simulate import build_setup


@dataclass(frozen=True)
class Comparison:
    """The results object plus the oracle's Delta-space points (for figures)."""

    results: dict[str, Any]
    delta_points: DeltaPoints


def compare(scenario: Scenario) -> Comparison:
    """Run the baseline, every policy and the oracle on the same reference sequences."""
    setup = build_setup(scenario)
    runs: list[tuple[str, str, dict[str, Any], RunLog]] = []
    baseline: RunLog | None = None
    for spec in scenario.policies:
        log = run_policy(setup, spec.policy)
        if spec.policy == FixedPolicy(draft_tokens=0):
            baseline = log
        runs.append((spec.name, spec.label, spec.params(), log))
    if baseline is None:
        baseline = run_policy(setup, FixedPolicy(draft_tokens=0))
        runs.insert(0, ("fixed", "no-spec", {"draft_tokens": 0}, baseline))
    oracle = oracle_plan(setup)
    runs.append(("oracle", "oracle", {"exact": oracle.exact}, oracle.log))
    base_tpot = mean_tpot_s(baseline)
    oracle_tpot = mean_tpot_s(oracle.log)
    rows = []
    for name, label, params, log in runs:
        row = {"name": name, "label": label, "params": params, **summarize(log, base_tpot)}
        tpot = mean_tpot_s(log)
        row["gap_to_oracle_pct"] = 100.0 * (tpot / oracle_tpot - 1.0) if oracle_tpot else 0.0
        rows.append(row)
    points, summary = analyse(oracle.tables) if oracle.tables else (analyse({})[0], {})
    results = {
        "scenario": scenario.to_dict(),
        "simspec_version": __version__,
        "seed": scenario.seed,
        "policies": rows,
        "oracle": {"exact": oracle.exact, "method": oracle.method, "delta": summary},
    }
    return Comparison(results, points)
