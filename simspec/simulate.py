"""The library's entry point: scenario in, results out (no files written).

:func:`simulate` builds the reference sequences once, then runs the k = 0 baseline and every
policy of the scenario on them (common random numbers), and returns the results-JSON object of
the README. :func:`build_setup` exposes the pieces for callers that run policies themselves.
"""

from __future__ import annotations

from typing import Any

from simspec import __version__, rng
from simspec.analysis.metrics import mean_tpot_s, summarize
from simspec.config.scenario import Scenario
from simspec.costs.base import COST_MODELS, CostModel
from simspec.policies import FixedPolicy
from simspec.profile import load_profile
from simspec.routing.samplers import RoutingConfig
from simspec.sim.engine import EngineSetup, RunLog, run_policy
from simspec.text.reference import ReferenceSet
from simspec.text.workload import arrival_times


def draft_overlap(routing: RoutingConfig, references: ReferenceSet) -> float:
    """Mean lag-1 overlap of a draft with its predecessor, for the policies' cost estimates.

    With independent routing this is the chance level Σ_e p_e² / k_e (k_e/N when popularity is
    uniform), p_e being each expert's usage.
    """
    if not references.num_experts:
        return 0.0
    true, draft = routing.layer_profiles(references.num_layers)
    profile = draft if draft is not None else true
    if profile.shape[1] == 0:
        p = references.popularity
        return float((p * p).sum(axis=1).mean() / references.shape.experts_per_token)
    return float(profile[:, 0].mean())


def build_setup(scenario: Scenario) -> EngineSetup:
    """Reference sequences, cost model and limits of ``scenario``."""
    s = scenario
    target, drafter = s.target, s.drafter
    common: dict[str, Any] = {
        "target": target,
        "drafter": drafter,
        "gpu": s.gpu,
        "params": s.costs,
        "num_gpus": s.hardware.num_gpus,
        "draft_model": s.draft_model,
    }
    if s.costs.profile:  # efficiencies are fractions of the peaks the profile was fitted against
        profile = load_profile(s.costs.profile)
        common["gpu"] = profile.peak_gpu(s.gpu)
        common["profile"] = profile
    cost_model: CostModel = COST_MODELS.create(s.costs.model, **common)
    references = ReferenceSet(
        seed=s.seed,
        workload=s.workload,
        acceptance=s.acceptance,
        routing=s.routing,
        shape=target.shape,
        max_draft_tokens=drafter.max_draft_tokens,
    )
    usable = s.gpu.memory_bytes * s.hardware.num_gpus * s.hardware.memory_utilization
    weights = target.shape.total_weight_bytes
    weights += (
        s.draft_model.shape.total_weight_bytes if s.draft_model else drafter.head_weight_bytes()
    )
    return EngineSetup(
        references=references,
        cost_model=cost_model,
        workload=s.workload,
        arrival_s=arrival_times(s.workload, rng.stream(s.seed, "arrivals")),
        kv_capacity_bytes=usable - weights,
        max_draft_tokens=drafter.max_draft_tokens,
        draft_overlap=draft_overlap(s.routing, references),
    )


def simulate(scenario: Scenario) -> dict[str, Any]:
    """Run every policy of ``scenario`` and the k = 0 baseline; return the results object."""
    setup = build_setup(scenario)
    baseline: RunLog | None = None
    logs = []
    for spec in scenario.policies:
        log = run_policy(setup, spec.policy)
        if spec.policy == FixedPolicy(draft_tokens=0):
            baseline = log
        logs.append(log)
    if baseline is None:
        baseline = run_policy(setup, FixedPolicy(draft_tokens=0))
    base_tpot = mean_tpot_s(baseline)
    rows = [
        {
            "name": spec.name,
            "label": spec.label,
            "params": spec.params(),
            **summarize(log, base_tpot),
        }
        for spec, log in zip(scenario.policies, logs, strict=True)
    ]
    return {
        "scenario": scenario.to_dict(),
        "simspec_version": __version__,
        "seed": scenario.seed,
        "policies": rows,
    }
