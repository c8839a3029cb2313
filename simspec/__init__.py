"""simspec: a discrete-event simulator of speculative decoding on Mixture-of-Experts LLMs.

For a target model, a drafter, a GPU, a batch size and a workload, simspec answers how many
tokens each request should speculate, what that buys, and how far a policy is from the best.

>>> import simspec
>>> scenario = simspec.load_scenario()               # the embedded default scenario
>>> small = simspec.with_overrides(scenario, {"workload.num_requests": 2})
>>> result = simspec.run(small)                      # doctest: +SKIP
>>> result.get("fixed-2").speedup_vs_no_spec         # doctest: +SKIP
"""

from simspec._version import __version__
from simspec.analysis.experiment import run_experiment
from simspec.analysis.results import METRICS, PolicyResult, RunResult
from simspec.config.load import apply_overrides, load_scenario, scenario_from_dict, with_overrides
from simspec.config.scenario import Scenario
from simspec.errors import InputError, ScenarioError
from simspec.sweep.run import run_sweep
from simspec.sweep.spec import load_sweep


def run(scenario: Scenario) -> RunResult:
    """Every policy of ``scenario`` and the k = 0 baseline on the same reference sequences."""
    return run_experiment(scenario)


def compare(scenario: Scenario) -> RunResult:
    """:func:`run` plus the hindsight oracle, each row's gap to it and its Delta-space analysis."""
    return run_experiment(scenario, oracle=True)


__all__ = [
    "METRICS",
    "InputError",
    "PolicyResult",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "__version__",
    "apply_overrides",
    "compare",
    "load_scenario",
    "load_sweep",
    "run",
    "run_experiment",
    "run_sweep",
    "scenario_from_dict",
    "with_overrides",
]
