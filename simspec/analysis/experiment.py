"""The one experiment driver: a scenario's policies, its k = 0 baseline and, on request, the oracle.

Every entry point — ``simspec run``, ``simspec compare``, each sweep point, the examples and the
Python API — calls :func:`run_experiment`. It builds the reference sequences once and runs, on
them (common random numbers, so every difference is the policies' alone):

1. the k = 0 baseline, exactly once. A declared ``fixed`` policy with ``draft_tokens = 0`` *is*
   the baseline (its row is marked ``is_baseline``); otherwise the baseline gets its own row,
   labelled ``no-spec``, first in the list;
2. every policy of the scenario, in order;
3. with ``oracle=True``, the hindsight oracle (:mod:`simspec.analysis.oracle`), its row last,
   every row's ``gap_to_oracle_pct``, and the Delta-space analysis of its decisions; when a
   policy of the scenario chooses tree shapes, the tree oracle over chains, the default trees
   and those policies' shapes (:func:`simspec.analysis.tree_oracle.tree_oracle_for`) takes the
   row if it is faster (no Delta analysis then: it is defined for chains);

and lists the guardrails' warnings of the run (:mod:`simspec.analysis.guardrails`).

The baseline is recognised by the policy object (:func:`is_plain_decoding`), never by a label.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simspec._version import __version__
from simspec.analysis.guardrails import run_warnings
from simspec.analysis.metrics import plain_decode_s, summarize
from simspec.analysis.results import OracleSummary, RunResult
from simspec.config.scenario import Scenario
from simspec.policies.fixed import BASELINE_LABEL, FixedPolicy, is_plain_decoding
from simspec.rng import stream
from simspec.sim.engine import run_policy
from simspec.sim.records import RunLog
from simspec.sim.setup import build_setup

if TYPE_CHECKING:
    from simspec.text.reference import ReferenceSet

#: ``progress(done, total)`` is called after each simulated policy.
Progress = Callable[[int, int], None]


def work_tokens(scenario: Scenario, oracle: bool) -> int:
    """Estimated work of :func:`run_experiment`: requests × output tokens × runs (the policies,
    the k = 0 baseline and, with ``oracle``, the oracle)."""
    runs = len(scenario.policies) + 1 + int(oracle)
    return scenario.workload.num_requests * scenario.workload.output_tokens * runs


@dataclass(frozen=True)
class _Run:
    name: str
    label: str
    params: Mapping[str, Any]
    log: RunLog
    is_baseline: bool = False
    is_oracle: bool = False


def run_experiment(
    scenario: Scenario,
    *,
    oracle: bool = False,
    progress: Progress | None = None,
    keep_logs: bool = False,
    references: ReferenceSet | None = None,
) -> RunResult:
    """Run the baseline, every policy of ``scenario`` and optionally the oracle (module doc).

    Parameters
    ----------
    scenario : Scenario
        A resolved scenario (:func:`simspec.load_scenario`).
    oracle : bool
        Also find the hindsight oracle and analyse its decisions.
    progress : callable, optional
        Called as ``progress(done, total)`` after each simulated policy.
    keep_logs : bool
        Keep each run's engine records (:class:`~simspec.sim.engine.RunLog`, by row label) in
        :attr:`RunResult.logs`, e.g. for a timeline (:mod:`simspec.io.perfetto`).
    references : ReferenceSet, optional
        Reference sequences shared with other runs of the same text
        (:func:`~simspec.sim.setup.reference_set`, :func:`~simspec.sim.setup.shares_text`):
        what they have drawn is drawn once for all of them; the results are the same.

    Returns
    -------
    RunResult
    """
    setup = build_setup(scenario, oracle=oracle, references=references)
    declared = next(
        (i for i, spec in enumerate(scenario.policies) if is_plain_decoding(spec.policy)), None
    )
    total = len(scenario.policies) + (declared is None) + oracle
    done = 0

    def step() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    runs: list[_Run] = []
    baseline_log: RunLog | None = None
    for i, spec in enumerate(scenario.policies):
        log = run_policy(setup, spec.policy)
        step()
        if i == declared:
            baseline_log = log
        runs.append(_Run(spec.name, spec.label, spec.params(), log, i == declared))
    if baseline_log is None:
        baseline_log = run_policy(setup, FixedPolicy(draft_tokens=0))
        step()
        runs.insert(0, _Run("fixed", BASELINE_LABEL, {"draft_tokens": 0}, baseline_log, True))

    summary = None
    delta_points = None
    oracle_tpot = None
    if oracle:
        # Imported here, not at the top: only oracle runs need the oracle's search and the
        # Delta analysis, and a sweep without ``oracle`` should not load them in each process.
        from simspec.analysis.delta import analyse
        from simspec.analysis.oracle import oracle_plan
        from simspec.analysis.tree_oracle import tree_oracle_for

        found = oracle_plan(setup)
        trees = tree_oracle_for(setup, [spec.policy for spec in scenario.policies])
        step()
        if trees is not None and trees.log.mean_tpot_s() < found.log.mean_tpot_s():
            # A policy chooses tree shapes: the oracle plans them too (Delta space: chains only).
            runs.append(_Run("oracle", "oracle", {"exact": trees.exact}, trees.log, is_oracle=True))
            oracle_tpot = trees.log.mean_tpot_s()
            delta_points = analyse({})[0]
            summary = OracleSummary(trees.exact, trees.method, {})
        else:
            runs.append(_Run("oracle", "oracle", {"exact": found.exact}, found.log, is_oracle=True))
            oracle_tpot = found.log.mean_tpot_s()
            controls = stream(scenario.seed, "delta_control")
            delta_points, delta = (
                analyse(found.tables, controls) if found.tables else (analyse({})[0], {})
            )
            summary = OracleSummary(found.exact, found.method, delta)

    base_tpot = baseline_log.mean_tpot_s()
    rows = tuple(
        summarize(
            r.log,
            base_tpot,
            name=r.name,
            label=r.label,
            params=r.params,
            oracle_tpot_s=oracle_tpot,
            is_baseline=r.is_baseline,
            is_oracle=r.is_oracle,
            slo=scenario.slo,
            decode_s=plain_decode_s(r.log, setup),
        )
        for r in runs
    )
    batch = max((int(r.log.steps.column("batch_size").max(initial=0)) for r in runs), default=0)
    return RunResult(
        scenario=scenario.to_dict(),
        scenario_digest=scenario.digest(),
        simspec_version=__version__,
        seed=scenario.seed,
        policies=rows,
        oracle=summary,
        warnings=tuple(run_warnings(scenario, rows, max(batch, 1))),
        delta_points=delta_points,
        logs={r.label: r.log for r in runs} if keep_logs else None,
    )
