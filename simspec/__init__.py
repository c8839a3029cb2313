"""simspec: a discrete-event simulator of speculative decoding on Mixture-of-Experts LLMs.

For a target model, a drafter, a GPU, a batch size and a workload, simspec answers how many
tokens each request should speculate, what that buys, and how far a policy is from the best.

>>> import simspec
>>> scenario = simspec.load_scenario()               # the embedded default scenario
>>> small = simspec.with_overrides(scenario, {"workload.num_requests": 2})
>>> result = simspec.run(small)                      # doctest: +SKIP
>>> result.get("fixed-2").speedup_vs_no_spec         # doctest: +SKIP
"""

from collections.abc import Callable
from pathlib import Path

from simspec._version import __version__
from simspec.analysis.experiment import run_experiment
from simspec.analysis.results import METRICS, PolicyResult, RunResult
from simspec.config.load import (
    Overrides,
    apply_overrides,
    load_scenario,
    scenario_from_dict,
    with_overrides,
)
from simspec.config.scenario import Scenario
from simspec.errors import InputError, ScenarioError
from simspec.sweep.run import run_sweep
from simspec.sweep.spec import load_sweep

#: What :func:`run` and :func:`compare` accept as a scenario: a loaded one, a TOML path, or
#: None for the embedded default.
ScenarioLike = Scenario | str | Path | None


def _scenario(scenario: ScenarioLike, overrides: Overrides) -> Scenario:
    if isinstance(scenario, Scenario):
        return with_overrides(scenario, overrides) if overrides else scenario
    return load_scenario(scenario, overrides)


def run(
    scenario: ScenarioLike = None,
    overrides: Overrides = (),
    *,
    progress: Callable[[int, int], None] | None = None,
    keep_logs: bool = False,
) -> RunResult:
    """Every policy of ``scenario`` and the k = 0 baseline on the same reference sequences.

    Parameters
    ----------
    scenario : Scenario, path or None
        A loaded scenario, a scenario file, or None for the embedded default.
    overrides : mapping or iterable of "key=value"
        Applied first, as :func:`with_overrides` does (``{"workload.concurrency": 16}``; the
        engines' names such as ``num_speculative_tokens`` work too, :mod:`simspec.config.aliases`).
    progress : callable, optional
        ``progress(done, total)`` after each simulated policy (e.g. to move a notebook bar).
    keep_logs : bool
        Keep the engine records in ``result.logs`` (for :mod:`simspec.io.perfetto` timelines).

    Returns
    -------
    RunResult
        ``result.records()`` gives plain dicts, ``result.to_dataframe()`` a pandas DataFrame.
    """
    return run_experiment(_scenario(scenario, overrides), progress=progress, keep_logs=keep_logs)


def compare(
    scenario: ScenarioLike = None,
    overrides: Overrides = (),
    *,
    progress: Callable[[int, int], None] | None = None,
    keep_logs: bool = False,
) -> RunResult:
    """:func:`run` plus the hindsight oracle, each row's gap to it and its Delta-space analysis."""
    return run_experiment(
        _scenario(scenario, overrides), oracle=True, progress=progress, keep_logs=keep_logs
    )


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
