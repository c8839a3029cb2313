"""Replications: seeds, paired t intervals against closed forms and known differences."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from simspec.analysis.experiment import run_experiment
from simspec.analysis.replications import Interval, Replicated, replicate
from simspec.analysis.results import GpuTime, PolicyResult, RunResult, gpu_time_parts
from simspec.rng import replication_seed
from simspec.sweep import spec as sweep_spec
from tests.helpers import tiny


def _t_half_width(values: list[float]) -> float:
    """The reference 95 % Student t half-width of the mean (scipy.stats)."""
    return float(stats.sem(values) * stats.t.ppf(0.975, len(values) - 1))


T_975_2 = 4.302652729911275  # Student t quantile 0.975 with 2 degrees of freedom


def row(label: str, speedup: float, *, k: int | None = None, **flags: bool) -> PolicyResult:
    """A results row whose only meaningful numbers are its speedup and TPOT (= 10 / speedup)."""
    return PolicyResult(
        name="fixed" if k is not None else ("oracle" if flags.get("is_oracle") else label),
        label=label,
        params={"draft_tokens": k} if k is not None else {},
        tokens_per_s=100.0 * speedup,
        tpot_ms=10.0 / speedup,
        ttft_ms=1.0,
        acceptance_length=1.0,
        acceptance_rate=0.0,
        mean_k=float(k or 0),
        verify_over_decode=1.0,
        unique_experts_per_layer=1.0,
        speedup_vs_no_spec=speedup,
        gpu_time_s=GpuTime(dict.fromkeys(gpu_time_parts(), 0.0)),
        requests=1,
        tokens=2,
        cost_fallbacks=0,
        **{f"{m}_p{q}_ms": 1.0 for m in ("tpot", "ttft") for q in (50, 90, 99)},
        **flags,
    )


def run_of(rows: list[PolicyResult], seed: int = 0) -> RunResult:
    return RunResult(
        scenario={"name": "constructed"},
        scenario_digest="0" * 12,
        simspec_version="test",
        seed=seed,
        policies=tuple(rows),
    )


def constructed(a: np.ndarray, b: np.ndarray) -> Replicated:
    """Replications with a baseline, policy A and policy B at the given speedups."""
    return Replicated(
        tuple(
            run_of([row("fixed-0", 1.0, k=0, is_baseline=True), row("A", x), row("B", y)], seed=r)
            for r, (x, y) in enumerate(zip(a, b, strict=True))
        )
    )


def test_t_interval_matches_the_closed_form():
    interval = Interval.of([1.0, 2.0, 3.0])
    assert interval.mean == 2.0
    assert interval.half_width == pytest.approx(T_975_2 * 1.0 / math.sqrt(3))
    assert interval.contains(2.0 + 0.99 * interval.half_width)
    assert not interval.contains(2.0 + 1.01 * interval.half_width)
    assert math.isnan(Interval.of([1.0]).half_width)
    assert Interval.of([1.0]).contains(123.0)  # one replication: no interval, no claim


def test_paired_interval_contains_the_true_difference_and_excludes_zero():
    rng = np.random.default_rng(7)
    text = rng.normal(1.5, 0.3, size=6)  # what the text does to both policies
    b = text + rng.normal(0.0, 0.002, size=6)
    a = text + 0.05 + rng.normal(0.0, 0.002, size=6)
    rep = constructed(a, b)
    diff = rep.paired("A", "B")
    assert diff.contains(0.05)
    assert not diff.contains(0.0)
    assert diff.mean == pytest.approx(np.mean(a - b))
    # Unpaired, the two means' intervals overlap: only pairing separates the policies.
    ma, mb = rep.mean("A"), rep.mean("B")
    assert ma.low < mb.high
    summary = {s.policy: s for s in rep.summary()}
    assert summary["A"].within_noise_of_best and not summary["B"].within_noise_of_best


def test_paired_interval_covers_the_true_difference_95_percent_of_the_time():
    rng = np.random.default_rng(11)
    hits = 0
    trials = 1000
    for _ in range(trials):
        text = rng.normal(1.0, 0.5, size=5)
        diff = Interval.of((text + 0.1 + rng.normal(0, 0.05, 5)) - (text + rng.normal(0, 0.05, 5)))
        hits += diff.contains(0.1)
    assert 0.93 <= hits / trials <= 0.97


def test_identical_policies_are_within_noise_with_a_zero_width_interval():
    values = np.array([1.1, 1.3, 1.2])
    diff = constructed(values, values).paired("A", "B")
    assert diff.mean == 0.0 and diff.half_width == 0.0 and diff.contains(0.0)


def test_replications_use_the_sweep_seeds_and_replication_zero_is_the_plain_run():
    scenario = tiny()
    rep = replicate(scenario, 3)
    assert sweep_spec.replication_seed is replication_seed
    assert rep.seeds == tuple(replication_seed(scenario.seed, r) for r in range(3))
    assert rep.seeds[0] == scenario.seed and len(set(rep.seeds)) == 3
    assert rep.runs[0].to_json() == run_experiment(scenario).to_json()
    assert rep.runs[1].to_json() != rep.runs[0].to_json()
    data = json.loads(rep.to_json())
    assert data["policies"] == json.loads(rep.runs[0].to_json())["policies"]
    assert data["replications"]["seeds"] == list(rep.seeds)
    speedups = [run.get("fixed-3").speedup_vs_no_spec for run in rep.runs]
    (fixed3,) = [p for p in data["replications"]["policies"] if p["policy"] == "fixed-3"]
    assert fixed3["speedup_vs_no_spec"] == pytest.approx(np.mean(speedups))
    assert fixed3["speedup_vs_no_spec_ci95"] == pytest.approx(_t_half_width(speedups))


def test_one_replication_writes_the_plain_results_json():
    scenario = tiny()
    assert replicate(scenario, 1).to_json() == run_experiment(scenario).to_json()
    with pytest.raises(ValueError):
        replicate(scenario, 0)
