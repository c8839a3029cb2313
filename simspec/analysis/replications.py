"""Replications: one scenario under R seeds, and paired 95 % confidence intervals between policies.

A single run answers "which policy was faster on *these* reference sequences"; two policies
1.195x and 1.197x apart may swap places under another seed. Replication r runs the scenario with
seed :func:`simspec.rng.replication_seed` (r = 0 is the scenario's own seed, so one replication
is the plain run, and a sweep's replications use the same seeds). Replications are independent
draws of the same experiment; within one, every policy runs on the *same* reference sequences
(common random numbers). So for a metric x (e.g. the speedup over k = 0) the difference

    d_r = x(policy A, r) − x(policy B, r)

is paired: what the text does to both runs cancels, and d_r varies far less than either value.
The interval of a mean of R independent values is Student's t interval

    mean ± t_{0.975, R−1} · s / √R,      s = the sample standard deviation,

(nan half-width for R = 1). Two policies are *within noise* of each other when the paired
interval of their difference contains 0: the data cannot tell which is faster.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simspec.analysis import experiment
from simspec.analysis.experiment import Progress
from simspec.analysis.results import PolicyResult, RunResult
from simspec.config.load import with_overrides
from simspec.config.scenario import Scenario
from simspec.rng import replication_seed


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean and the half-width of its 95 % confidence interval (nan: one replication)."""

    mean: float
    half_width: float

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray) -> Interval:
        """The t interval of the mean of ``values`` (module docstring; nan, nan for none)."""
        # scipy.special, not scipy.stats: the latter takes about a second to import.
        from scipy.special import stdtrit

        x = np.asarray(values, dtype=float)
        if len(x) < 2:
            return cls(float(x.mean()) if len(x) else math.nan, math.nan)
        half = float(stdtrit(len(x) - 1, 0.975)) * float(x.std(ddof=1)) / math.sqrt(len(x))
        return cls(float(x.mean()), half)

    @property
    def low(self) -> float:
        """Lower end of the interval."""
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        """Upper end of the interval."""
        return self.mean + self.half_width

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the interval; True when there is no interval (R = 1)."""
        return math.isnan(self.half_width) or self.low <= value <= self.high

    def text(self, digits: int = 3, sign: str = "") -> str:
        """``mean ± half`` (``mean`` alone without an interval); ``sign="+"`` signs the mean."""
        mean = f"{self.mean:{sign}.{digits}f}"
        return mean if math.isnan(self.half_width) else f"{mean} ± {self.half_width:.{digits}f}"

    def to_dict(self, name: str) -> dict[str, float | None]:
        """``{name: mean, name_ci95: half}`` (null half-width without an interval)."""
        half = None if math.isnan(self.half_width) else self.half_width
        return {name: self.mean, f"{name}_ci95": half}


def _rows(runs: Sequence[RunResult], label: str) -> list[tuple[RunResult, PolicyResult]]:
    """The replications that ran ``label``, each with its row."""
    return [(run, p) for run in runs for p in run.policies if p.label == label]


def _labels(runs: Sequence[RunResult]) -> list[str]:
    """Every policy label, in the order the runs first show them."""
    return list(dict.fromkeys(p.label for run in runs for p in run.policies))


def _best_label(runs: Sequence[RunResult], metric: str = "speedup_vs_no_spec") -> str:
    """The label with the highest mean ``metric``, the oracle excluded (first on ties)."""
    means = {
        label: float(np.mean([float(getattr(p, metric)) for _, p in _rows(runs, label)]))
        for label in _labels(runs)
        if not any(p.is_oracle for _, p in _rows(runs, label))
    }
    return max(means, key=means.__getitem__)


def _paired(
    runs: Sequence[RunResult], label: str, reference: Callable[[RunResult], PolicyResult | None]
) -> tuple[list[float], list[float]]:
    """(TPOT differences, speedup differences) of ``label`` to a reference row, per replication
    where both ran."""
    tpot, speedup = [], []
    for run, mine in _rows(runs, label):
        ref = reference(run)
        if ref is not None:
            tpot.append(mine.tpot_ms - ref.tpot_ms)
            speedup.append(mine.speedup_vs_no_spec - ref.speedup_vs_no_spec)
    return tpot, speedup


@dataclass(frozen=True, slots=True)
class PolicyOverReplications:
    """One policy over R replications: means with 95 % intervals and paired differences.

    TPOT differences are in ms, negative = faster than the reference; speedup differences are
    to the best policy (the oracle excluded), paired within each replication.
    """

    policy: str  # the policy's label
    is_baseline: bool
    is_oracle: bool
    replications: int
    tpot_ms: Interval
    tokens_per_s: float
    speedup_vs_no_spec: Interval
    mean_k: float
    acceptance_length: float
    tpot_diff_vs_no_spec_ms: Interval
    tpot_diff_vs_oracle_ms: Interval  # nan without an oracle
    speedup_diff_vs_best: Interval
    gap_to_oracle_pct: Interval | None  # None without an oracle

    @property
    def within_noise_of_best(self) -> bool:
        """Whether the paired interval of the speedup difference to the best contains 0."""
        return self.speedup_diff_vs_best.contains(0.0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON row of ``replications.policies`` in a results file."""
        gap = self.gap_to_oracle_pct
        return {
            "policy": self.policy,
            **self.tpot_ms.to_dict("tpot_ms"),
            **self.speedup_vs_no_spec.to_dict("speedup_vs_no_spec"),
            **self.speedup_diff_vs_best.to_dict("speedup_diff_vs_best"),
            "within_noise_of_best": self.within_noise_of_best,
            **(gap.to_dict("gap_to_oracle_pct") if gap is not None else {}),
        }


def summarize_runs(runs: Sequence[RunResult]) -> list[PolicyOverReplications]:
    """Per policy label (in the runs' order): the statistics of the module docstring over the
    replications in ``runs`` (the same scenario under different seeds). A policy missing from
    some replications is summarised over those that ran it."""
    best = _best_label(runs)
    out = []
    for label in _labels(runs):
        rows = [p for _, p in _rows(runs, label)]
        speedups = [p.speedup_vs_no_spec for p in rows]
        to_base, _ = _paired(runs, label, lambda run: run.baseline)
        to_oracle, _ = _paired(runs, label, lambda run: run.oracle_result)
        _, to_best = _paired(
            runs, label, lambda run: next((p for p in run.policies if p.label == best), None)
        )
        gaps = [p.gap_to_oracle_pct for p in rows if p.gap_to_oracle_pct is not None]
        out.append(
            PolicyOverReplications(
                policy=label,
                is_baseline=rows[0].is_baseline,
                is_oracle=rows[0].is_oracle,
                replications=len(rows),
                tpot_ms=Interval.of([p.tpot_ms for p in rows]),
                tokens_per_s=float(np.mean([p.tokens_per_s for p in rows])),
                speedup_vs_no_spec=Interval.of(speedups),
                mean_k=float(np.mean([p.mean_k for p in rows])),
                acceptance_length=float(np.mean([p.acceptance_length for p in rows])),
                tpot_diff_vs_no_spec_ms=Interval.of(to_base),
                tpot_diff_vs_oracle_ms=Interval.of(to_oracle),
                speedup_diff_vs_best=Interval.of(to_best),
                gap_to_oracle_pct=Interval.of(gaps) if gaps else None,
            )
        )
    return out


@dataclass(frozen=True)
class Replicated:
    """The results of R replications of one scenario; ``runs[r]`` ran with ``seeds[r]``."""

    runs: tuple[RunResult, ...]

    @property
    def seeds(self) -> tuple[int, ...]:
        """The seed of each replication."""
        return tuple(run.seed for run in self.runs)

    @property
    def labels(self) -> tuple[str, ...]:
        """The policies' labels, in the runs' order (the same in every replication)."""
        return tuple(p.label for p in self.runs[0].policies)

    def values(self, label: str, metric: str = "speedup_vs_no_spec") -> np.ndarray:
        """``metric`` of the policy ``label`` in each replication."""
        return np.array([float(getattr(run.get(label), metric)) for run in self.runs])

    def mean(self, label: str, metric: str = "speedup_vs_no_spec") -> Interval:
        """Mean of ``metric`` over replications with its 95 % t interval."""
        return Interval.of(self.values(label, metric))

    def paired(self, label: str, reference: str, metric: str = "speedup_vs_no_spec") -> Interval:
        """Mean paired difference ``metric(label) − metric(reference)`` with its 95 % interval."""
        return Interval.of(self.values(label, metric) - self.values(reference, metric))

    @property
    def warnings(self) -> tuple[str, ...]:
        """The guardrail warnings of every replication, each once, in order of appearance."""
        return tuple(dict.fromkeys(w for run in self.runs for w in run.warnings))

    def best(self, metric: str = "speedup_vs_no_spec") -> str:
        """The label with the highest mean ``metric``, the oracle excluded (first on ties)."""
        return _best_label(self.runs, metric)

    def summary(self) -> list[PolicyOverReplications]:
        """:func:`summarize_runs` of these replications."""
        return summarize_runs(self.runs)

    def to_dict(self) -> dict[str, Any]:
        """Replication 0's results object plus ``replications``: the seeds and :meth:`summary`.

        Readers of the results JSON see the same keys as for a single run (``policies`` are
        replication 0's rows, the scenario's own seed; ``warnings`` those of every
        replication); the statistics over all replications are added under ``replications``.
        """
        data = self.runs[0].to_dict()
        data["warnings"] = list(self.warnings)
        data["replications"] = {
            "count": len(self.runs),
            "seeds": list(self.seeds),
            "policies": [row.to_dict() for row in self.summary()],
        }
        return data

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (a single run's JSON when R = 1)."""
        if len(self.runs) == 1:
            return self.runs[0].to_json()
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"


def replication_scenario(scenario: Scenario, r: int) -> Scenario:
    """``scenario`` as replication ``r`` runs it: replication 0 as it is, the others under the
    seed :func:`~simspec.rng.replication_seed` derives from its seed."""
    if not r:
        return scenario
    return with_overrides(scenario, {"seed": replication_seed(scenario.seed, r)})


def replicate(
    scenario: Scenario,
    replications: int,
    *,
    oracle: bool = False,
    progress: Progress | None = None,
    keep_logs: bool = False,
) -> Replicated:
    """Run ``scenario`` under ``replications`` seeds (module docstring).

    Parameters
    ----------
    scenario : Scenario
        A resolved scenario; replication 0 runs it as it is.
    replications : int
        R >= 1.
    oracle, keep_logs : bool
        Passed to :func:`~simspec.analysis.experiment.run_experiment`.
    progress : callable, optional
        ``progress(done, total)`` over all replications' simulated policies.

    Returns
    -------
    Replicated
    """
    if replications < 1:
        raise ValueError(f"replications must be >= 1, not {replications}")
    runs = []
    for r in range(replications):
        seeded = replication_scenario(scenario, r)

        def step(done: int, total: int, offset: int = r) -> None:
            if progress is not None:
                progress(offset * total + done, replications * total)

        # Looked up at call time: the one driver, also when a test substitutes it.
        runs.append(
            experiment.run_experiment(seeded, oracle=oracle, progress=step, keep_logs=keep_logs)
        )
    return Replicated(tuple(runs))
