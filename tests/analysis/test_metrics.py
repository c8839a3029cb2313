"""Per-request latency percentiles, SLO attainment, goodput and the per-request CSV."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from simspec.analysis.experiment import run_experiment
from simspec.analysis.metrics import REQUEST_COLUMNS, meets_slo, requests_csv, summarize
from simspec.analysis.results import METRICS, SLO_METRICS, PolicyResult, RunResult
from simspec.config.slo import SloConfig
from simspec.sim.engine import RunLog
from simspec.sim.records import RequestRecord
from tests.helpers import tiny


def records(seed: int = 3, n: int = 41) -> list[RequestRecord]:
    """Requests with random arrivals, first-token delays, lengths and decode times."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        arrival = float(rng.uniform(0, 5))
        first = arrival + float(rng.exponential(0.05))
        tokens = int(rng.integers(2, 300))
        finish = first + (tokens - 1) * float(rng.uniform(0.005, 0.02))
        out.append(RequestRecord(i, arrival, first, finish, 100, tokens, tokens, 1, 0, 0))
    return out


def summary(reqs: list[RequestRecord], slo: SloConfig | None = None) -> PolicyResult:
    log = RunLog(requests=reqs)
    return summarize(log, log.mean_tpot_s(), name="fixed", label="fixed-1", params={}, slo=slo)


def test_percentiles_agree_with_numpy_on_constructed_records():
    reqs = records()
    tpot = np.array([(r.finish_s - r.first_token_s) / (r.output_tokens - 1) for r in reqs])
    ttft = np.array([r.first_token_s - r.arrival_s for r in reqs])
    result = summary(reqs)
    for q in (50, 90, 99):
        assert getattr(result, f"tpot_p{q}_ms") == pytest.approx(np.percentile(tpot, q) * 1e3)
        assert getattr(result, f"ttft_p{q}_ms") == pytest.approx(np.percentile(ttft, q) * 1e3)
    assert result.tpot_p50_ms <= result.tpot_p90_ms <= result.tpot_p99_ms <= tpot.max() * 1e3
    assert result.tpot_ms == pytest.approx(tpot.mean() * 1e3)
    assert {"tpot_p99_ms", "ttft_p50_ms"} <= set(METRICS)


def test_goodput_is_zero_below_every_tpot_and_the_throughput_above():
    reqs = records()
    tpot_ms = [(r.finish_s - r.first_token_s) / (r.output_tokens - 1) * 1e3 for r in reqs]
    makespan = max(r.finish_s for r in reqs) - min(r.arrival_s for r in reqs)
    below = summary(reqs, SloConfig(tpot_ms=0.99 * min(tpot_ms)))
    assert below.slo_attainment == 0.0
    assert below.goodput_requests_per_s == 0.0 and below.goodput_tokens_per_s == 0.0
    above = summary(reqs, SloConfig(tpot_ms=1.01 * max(tpot_ms)))
    assert above.slo_attainment == 1.0
    assert above.goodput_tokens_per_s == pytest.approx(above.tokens_per_s)
    assert above.goodput_requests_per_s == pytest.approx(len(reqs) / makespan)
    middle = float(np.median(tpot_ms))
    half = summary(reqs, SloConfig(tpot_ms=middle))
    met = [t <= middle for t in tpot_ms]
    assert half.slo_attainment == pytest.approx(np.mean(met))
    good_tokens = sum(r.output_tokens for r, ok in zip(reqs, met, strict=True) if ok)
    assert half.goodput_tokens_per_s == pytest.approx(good_tokens / makespan)


def test_a_request_meets_the_slo_only_when_it_meets_every_target():
    reqs = records(n=9)
    ttft_ms = np.array([(r.first_token_s - r.arrival_s) * 1e3 for r in reqs])
    tpot_ms = np.array([(r.finish_s - r.first_token_s) / (r.output_tokens - 1) * 1e3 for r in reqs])
    slo = SloConfig(tpot_ms=float(np.median(tpot_ms)), ttft_ms=float(np.median(ttft_ms)))
    expected = (tpot_ms <= slo.tpot_ms) & (ttft_ms <= slo.ttft_ms)
    assert meets_slo(reqs, slo).tolist() == expected.tolist()
    assert meets_slo(reqs, SloConfig()).all()


def test_slo_metrics_appear_only_with_an_slo():
    plain = summary(records()).to_dict()
    assert not set(SLO_METRICS) & set(plain)
    scored = summary(records(), SloConfig(ttft_ms=20.0)).to_dict()
    assert set(SLO_METRICS) <= set(scored)
    assert PolicyResult.from_dict(scored).to_dict() == scored


def test_requests_csv_has_one_row_per_request_and_round_trips():
    scenario = tiny("slo.tpot_ms=6.0")
    result = run_experiment(scenario, keep_logs=True)
    text = requests_csv([result])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == REQUEST_COLUMNS
    assert len(rows) == scenario.workload.num_requests * len(result.policies)
    assert result.logs is not None
    for policy in result.policies:
        mine = [r for r in rows if r["policy"] == policy.label]
        recs = result.logs[policy.label].requests
        assert [int(r["request_id"]) for r in mine] == [rec.request_id for rec in recs]
        assert [float(r["finish_s"]) for r in mine] == [rec.finish_s for rec in recs]
        tpot = np.array([float(r["tpot_ms"]) for r in mine])
        assert tpot.mean() == pytest.approx(policy.tpot_ms)
        assert np.percentile(tpot, 90) == pytest.approx(policy.tpot_p90_ms)
        met = [int(r["meets_slo"]) for r in mine]
        assert met == (tpot <= 6.0).astype(int).tolist()
        assert np.mean(met) == pytest.approx(policy.slo_attainment)
    assert {r["seed"] for r in rows} == {str(scenario.seed)}


def test_requests_csv_leaves_meets_slo_empty_without_an_slo_and_needs_logs():
    result = run_experiment(tiny(), keep_logs=True)
    rows = list(csv.DictReader(io.StringIO(requests_csv([result]))))
    assert {r["meets_slo"] for r in rows} == {""}
    without_logs = RunResult.from_dict(json.loads(result.to_json()))
    with pytest.raises(ValueError):
        requests_csv([without_logs])
