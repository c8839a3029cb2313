"""simspec: a discrete-event simulator of speculative decoding on Mixture-of-Experts LLMs.

For a target model, a drafter, a GPU, a batch size and a workload, simspec answers how many
tokens each request should speculate, what that buys, and how far a policy is from the best.

>>> import simspec
>>> scenario = simspec.load_scenario()          # the embedded default scenario
>>> results = simspec.simulate(scenario)        # doctest: +SKIP
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("simspec")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

from simspec.config.scenario import Scenario, apply_overrides, load_scenario, scenario_from_dict
from simspec.errors import InputError, ScenarioError
from simspec.simulate import build_setup, simulate

__all__ = [
    "InputError",
    "Scenario",
    "ScenarioError",
    "__version__",
    "apply_overrides",
    "build_setup",
    "load_scenario",
    "scenario_from_dict",
    "simulate",
]
