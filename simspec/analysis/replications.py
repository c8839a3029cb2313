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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simspec.analysis import experiment
from simspec.analysis.experiment import Progress
from simspec.analysis.results import RunResult
from simspec.config.load import with_overrides
from simspec.config.scenario import Scenario
from simspec.rng import replication_seed

#: Student's t quantile t_{0.975, nu} for nu = 1..30 degrees of freedom, as ``scipy.stats.t.ppf``
#: computes it (Boost's inverse incomplete beta), to the last bit; tests compare the two. Importing
#: ``scipy.stats`` takes ~1 s, longer than a small sweep's tables.
T_975 = (
    12.706204736174694, 4.302652729749462, 3.1824463052837078, 2.7764451051977934,
    2.5705818356363146, 2.4469118511449786, 2.364624251592784, 2.306004135204166,
    2.262157162798205, 2.228138851986274, 2.200985160091639, 2.1788128296672284,
    2.1603686564627913, 2.144786687917804, 2.131449545559776, 2.1199052992212546,
    2.1098155778333156, 2.1009220402410382, 2.0930240544083087, 2.085963447265864,
    2.0796138447276795, 2.0738730679040254, 2.0686576104190486, 2.0638985616280245,
    2.0595385527532972, 2.0555294386428735, 2.0518305164802846, 2.0484071417952454,
    2.045229642132703, 2.0422724563012378,
)  # fmt: skip


def t_quantile_975(dof: int) -> float:
    """t_{0.975, dof}: the table above, ``scipy.stats.t.ppf`` beyond it."""
    if 1 <= dof <= len(T_975):
        return T_975[dof - 1]
    from scipy.stats import t

    return float(t.ppf(0.975, dof))


def half_width_95(values: Sequence[float] | np.ndarray) -> float:
    """95 % half-width of the mean of independent values: t_{0.975,n−1}·s/√n (nan for n < 2)."""
    n = len(values)
    if n < 2:
        return math.nan
    std = float(np.asarray(values, dtype=float).std(ddof=1))
    return t_quantile_975(n - 1) * std / math.sqrt(n)


def paired_ci(diffs: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Mean and 95 % half-width of paired differences (nan width for one; nan, nan for none)."""
    if len(diffs) == 0:
        return math.nan, math.nan
    return float(np.mean(np.asarray(diffs, dtype=float))), half_width_95(diffs)


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean and the half-width of its 95 % confidence interval (nan: one replication)."""

    mean: float
    half_width: float

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray) -> Interval:
        """The t interval of the mean of ``values`` (module docstring)."""
        return cls(*paired_ci(values))

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

    def text(self, digits: int = 3) -> str:
        """``mean ± half`` (``mean`` alone without an interval)."""
        if math.isnan(self.half_width):
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.half_width:.{digits}f}"

    def to_dict(self, name: str) -> dict[str, float | None]:
        """``{name: mean, name_ci95: half}`` (null half-width without an interval)."""
        half = None if math.isnan(self.half_width) else self.half_width
        return {name: self.mean, f"{name}_ci95": half}


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

    def best(self, metric: str = "speedup_vs_no_spec") -> str:
        """The label with the highest mean ``metric``, the oracle excluded (first on ties)."""
        rows = [p.label for p in self.runs[0].policies if not p.is_oracle]
        return max(rows, key=lambda label: float(self.values(label, metric).mean()))

    def summary(self) -> list[dict[str, Any]]:
        """Per policy: mean TPOT and speedup with 95 % half-widths, the paired difference of its
        speedup to the best policy's, whether it is within noise of it, and with an oracle the
        mean gap to it (JSON-ready)."""
        best = self.best()
        with_oracle = self.runs[0].oracle_result is not None
        rows = []
        for label in self.labels:
            diff = self.paired(label, best)
            gap = self.mean(label, "gap_to_oracle_pct") if with_oracle else None
            rows.append(
                {
                    "policy": label,
                    **self.mean(label, "tpot_ms").to_dict("tpot_ms"),
                    **self.mean(label).to_dict("speedup_vs_no_spec"),
                    **diff.to_dict("speedup_diff_vs_best"),
                    "within_noise_of_best": diff.contains(0.0),
                    **(gap.to_dict("gap_to_oracle_pct") if gap is not None else {}),
                }
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        """Replication 0's results object plus ``replications``: the seeds and :meth:`summary`.

        Readers of the results JSON see the same keys as for a single run (``policies`` are
        replication 0's rows, the scenario's own seed); the statistics over all replications
        are added under ``replications``.
        """
        data = self.runs[0].to_dict()
        data["replications"] = {
            "count": len(self.runs),
            "seeds": list(self.seeds),
            "policies": self.summary(),
        }
        return data

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (a single run's JSON when R = 1)."""
        if len(self.runs) == 1:
            return self.runs[0].to_json()
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"


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
        seeded = scenario
        if r:
            seeded = with_overrides(scenario, {"seed": replication_seed(scenario.seed, r)})

        def step(done: int, total: int, offset: int = r) -> None:
            if progress is not None:
                progress(offset * total + done, replications * total)

        # Looked up at call time: the one driver, also when a test substitutes it.
        runs.append(
            experiment.run_experiment(seeded, oracle=oracle, progress=step, keep_logs=keep_logs)
        )
    return Replicated(tuple(runs))
