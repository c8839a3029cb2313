"""simspec: a discrete-event simulator of speculative decoding on Mixture-of-Experts LLMs.

For a target model, a drafter, a GPU, a batch size and a workload, simspec answers how many
tokens each request should speculate, what that buys, and how far a policy is from the best.

>>> import simspec
>>> scenario = simspec.load_scenario()               # the embedded default scenario
>>> small = simspec.with_overrides(scenario, {"workload.num_requests": 2})
>>> result = simspec.run(small)                      # doctest: +SKIP
>>> result.get("fixed-2").speedup_vs_no_spec         # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from simspec._version import __version__
from simspec.errors import InputError, ScenarioError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import TypeAlias

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
    from simspec.sweep.run import run_sweep
    from simspec.sweep.spec import load_sweep

    #: What :func:`run` and :func:`compare` accept as a scenario: a loaded one, a TOML path,
    #: or None for the embedded default.
    ScenarioLike: TypeAlias = Scenario | str | Path | None

#: The public names defined elsewhere, by the module that defines them. ``import simspec``
#: imports none of these modules (the simulator, numpy and simpy are slow to import, and a CLI
#: command or a sweep may need only part of them): the first access to a
#: name imports its module (:func:`__getattr__`, PEP 562).
_LAZY: dict[str, str] = {
    "run_experiment": "simspec.analysis.experiment",
    "METRICS": "simspec.analysis.results",
    "PolicyResult": "simspec.analysis.results",
    "RunResult": "simspec.analysis.results",
    "Overrides": "simspec.config.load",
    "apply_overrides": "simspec.config.load",
    "load_scenario": "simspec.config.load",
    "scenario_from_dict": "simspec.config.load",
    "with_overrides": "simspec.config.load",
    "Scenario": "simspec.config.scenario",
    "run_sweep": "simspec.sweep.run",
    "load_sweep": "simspec.sweep.spec",
}


def __getattr__(name: str) -> Any:
    """A public name of :data:`_LAZY`, imported on first access and then kept as a global (so
    this runs once per name); ``ScenarioLike`` is built the same way."""
    if name == "ScenarioLike":
        from pathlib import Path

        from simspec.config.scenario import Scenario

        value: Any = Scenario | str | Path | None
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy ones included (for tab completion)."""
    return sorted({*globals(), *_LAZY, "ScenarioLike"})


def _scenario(scenario: ScenarioLike, overrides: Overrides) -> Scenario:
    from simspec.config.load import load_scenario, with_overrides
    from simspec.config.scenario import Scenario

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
    from simspec.analysis.experiment import run_experiment

    return run_experiment(_scenario(scenario, overrides), progress=progress, keep_logs=keep_logs)


def compare(
    scenario: ScenarioLike = None,
    overrides: Overrides = (),
    *,
    progress: Callable[[int, int], None] | None = None,
    keep_logs: bool = False,
) -> RunResult:
    """:func:`run` plus the hindsight oracle, each row's gap to it and its Delta-space analysis."""
    from simspec.analysis.experiment import run_experiment

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
