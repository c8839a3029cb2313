"""Latent-state routers (topic, drifting hot set), their hidden-Markov law and its fit."""

from __future__ import annotations

import re

import numpy as np
import pytest

from simspec.routing.hmm import LatentRoutingModel, fit_latent, triple_overlap_of
from simspec.routing.predictor import UniqueExpertPredictor, choose_predictor
from simspec.routing.sets import to_sets
from simspec.routing.trace import RoutingTrace, estimate_statistics
from tests.reference.latent_routers import HotSetSampler, TopicSampler

N, K = 64, 4


def _trace(ids: np.ndarray) -> RoutingTrace:
    s, t, layers, k = ids.shape
    flat = ids.reshape(s * t, layers, k).astype(np.int64)
    return RoutingTrace(flat, N, np.arange(s, dtype=np.int64) * t)


def _sets(ids: np.ndarray) -> np.ndarray:
    return to_sets(ids, N)


@pytest.fixture(scope="module")
def topic_ids():
    return TopicSampler(N, K, reuse=0.8, drift=0.05).sample_sequences(
        np.random.default_rng(3), 1500, 40
    )


@pytest.fixture(scope="module")
def hot_ids():
    return HotSetSampler(N, K, hot_size=12, hot_share=0.75, drift=0.04).sample_sequences(
        np.random.default_rng(4), 1500, 40
    )


@pytest.mark.parametrize("fixture", ["topic_ids", "hot_ids"])
def test_exact_top_k_distinct_ids(fixture, request):
    ids = request.getfixturevalue(fixture)
    assert ids.shape == (1500, 40, 1, K) and ids.dtype == np.int16
    assert ((ids >= 0) & (ids < N)).all()
    ordered = np.sort(ids, axis=-1)
    assert (np.diff(ordered, axis=-1) > 0).all()  # k_e distinct experts every token


def test_topic_persistence_and_drift_rates(topic_ids):
    sets = _sets(topic_ids[:, :, 0])  # (S, T, N)
    # Usage is uniform: p_e = k/N.
    assert abs(sets.mean() - K / N) < 1e-12  # exactly k per token
    assert np.abs(sets.mean(axis=(0, 1)) - K / N).max() < 0.01
    # A token repeats its predecessor's set exactly iff both follow the topic and it did not
    # drift: probability reuse² (1 − drift)^k, plus a negligible chance term.
    same = (sets[:, 1:] == sets[:, :-1]).all(axis=-1).mean()
    assert same == pytest.approx(0.8**2 * 0.95**K, abs=0.01)
    # Lag-d overlap: chance + reuse² (1 − k/N) r^d, r = 1 − drift·N/(N − k) (closed form).
    r = 1 - 0.05 * N / (N - K)
    for d in (1, 4, 10):
        measured = (sets[:, d:] & sets[:, :-d]).sum(-1).mean() / K
        expected = K / N + 0.8**2 * (1 - K / N) * r**d
        assert measured == pytest.approx(expected, abs=0.006)


def test_hot_set_usage_rates(hot_ids):
    sets = _sets(hot_ids[:, :, 0])
    # A token's set is skewed but the long-run usage is uniform (the hot set drifts).
    assert np.abs(sets.mean(axis=(0, 1)) - K / N).max() < 0.01
    # Lag overlap: chance·(1 + c²·pi(1 − pi)·r^d), pi = h/N, c = (a − b)/p (closed form).
    pi, a, b = 12 / N, K * 0.75 / 12, K * 0.25 / (N - 12)
    c = (a - b) / (K / N)
    r = 1 - 0.04 * N / (N - 12)
    for d in (1, 8):
        measured = (sets[:, d:] & sets[:, :-d]).sum(-1).mean() / K
        expected = K / N * (1 + c * c * pi * (1 - pi) * r**d)
        assert measured == pytest.approx(expected, rel=0.03)


def test_samplers_are_reproducible_and_seeded():
    sampler = TopicSampler(N, K, 0.8, 0.05)
    a = sampler.sample_sequences(np.random.default_rng(7), 5, 9)
    b = sampler.sample_sequences(np.random.default_rng(7), 5, 9)
    c = sampler.sample_sequences(np.random.default_rng(8), 5, 9)
    assert a.tobytes() == b.tobytes() and a.tobytes() != c.tobytes()


def test_latent_law_closed_forms():
    p = np.full((1, N), K / N)
    # Independent routing (share 0): P(silent over T) = (1 − p)^T.
    model = LatentRoutingModel.topic(p, reuse=0.0, drift=0.1)
    expected = N * (1 - (1 - K / N) ** 5)
    assert model.expected_unique([5])[0] == pytest.approx(expected, rel=1e-12)
    # A frozen topic followed always: U(T) = k for any T; B sequences: N(1 − (1 − k/N)^B).
    frozen = LatentRoutingModel.topic(p, reuse=1.0, drift=0.0)
    assert frozen.unique_curve(16)[:, 0] == pytest.approx(np.full(16, K), rel=1e-9)
    assert frozen.expected_unique([7, 7, 7])[0] == pytest.approx(N * (1 - (1 - K / N) ** 3))
    # Inclusion probabilities and the geometric lag profile.
    topic = LatentRoutingModel.topic(p, reuse=0.8, drift=0.05)
    assert topic.inclusion_probabilities == pytest.approx(p)
    r = 1 - 0.05 * N / (N - K)
    rho = K / N + 0.64 * (1 - K / N) * r ** np.arange(1, 6)
    assert topic.overlaps(5)[0] == pytest.approx(rho, rel=1e-9)


@pytest.mark.parametrize("fixture", ["topic_ids", "hot_ids"])
def test_latent_predictor_matches_its_router(fixture, request):
    ids = request.getfixturevalue(fixture)
    sampler = (
        TopicSampler(N, K, 0.8, 0.05)
        if fixture == "topic_ids"
        else HotSetSampler(N, K, 12, 0.75, 0.04)
    )
    model = sampler.latent_model()
    union = np.logical_or.accumulate(_sets(ids[:, 20:36, 0]), axis=1)  # stationary windows
    for batch in (1, 4, 16):
        groups = len(union) // batch
        measured = union[: groups * batch].reshape(groups, batch, 16, N)
        measured = measured.any(axis=1).sum(axis=-1).mean(axis=0)
        predicted = model.unique_curve(16, batch)[:, 0]
        assert np.abs(predicted / measured - 1).max() < 0.03


def test_fit_recovers_topic_parameters(topic_ids):
    trace = _trace(topic_ids)
    stats = estimate_statistics(trace, max_lag=6, max_tokens=4)
    tau = triple_overlap_of(trace.expert_ids, trace.sequence_of_token(), N)
    fit = fit_latent(stats.inclusion_probabilities, stats.overlaps, tau)
    assert fit.model.params["hidden_size"] == pytest.approx(K, rel=0.1)
    assert fit.model.params["share"] == pytest.approx(0.8, abs=0.03)
    assert fit.model.params["drift"] == pytest.approx(0.05, rel=0.1)
    assert fit.profile_error < 0.02 and choose_predictor(fit) == "latent"


def test_fit_recovers_hot_set_parameters(hot_ids):
    trace = _trace(hot_ids)
    stats = estimate_statistics(trace, max_lag=6, max_tokens=4)
    tau = triple_overlap_of(trace.expert_ids, trace.sequence_of_token(), N)
    fit = fit_latent(stats.inclusion_probabilities, stats.overlaps, tau)
    # Latent-set share of a hot set: s − h(1 − s)/(N − h) (same a − b, module docstring).
    assert fit.model.params["hidden_size"] == pytest.approx(12, rel=0.12)
    assert fit.model.params["share"] == pytest.approx(0.75 - 12 * 0.25 / (N - 12), abs=0.04)
    assert fit.model.params["drift"] == pytest.approx(0.04, rel=0.12)


def test_fit_of_the_exact_moments_is_exact():
    p = np.full((2, N), K / N)
    truth = LatentRoutingModel.latent_set(p, 10.0, 0.6, 0.03)
    fit = fit_latent(p, truth.overlaps(6), truth.triple_overlap())
    for key, value in truth.params.items():
        assert fit.model.params[key] == pytest.approx(value, rel=1e-6)
    assert fit.profile_error < 1e-9


def test_ipf_overpredicts_a_topic_router(topic_ids):
    """Lag pairs are not enough: the max-entropy law with the same rho_d is far off."""
    trace = _trace(topic_ids)
    stats = estimate_statistics(trace, max_lag=2, max_tokens=12)
    ipf = UniqueExpertPredictor(stats.inclusion_probabilities, stats.overlaps)
    measured = stats.pooled_unique[11]
    assert ipf.expected_unique([12])[0] / measured - 1 > 0.08


def test_fit_needs_two_lags_and_trace_needs_three_tokens():
    p = np.full((1, N), K / N)
    with pytest.raises(ValueError, match="two lags"):
        fit_latent(p, np.array([[0.3]]), 0.1)
    ids = np.tile(np.arange(K), (4, 1, 1))
    with pytest.raises(ValueError, match="3 tokens"):
        triple_overlap_of(ids, np.array([0, 0, 1, 1]), N)


def test_bad_sampler_parameters_raise():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="drift"):
        TopicSampler(N, K, 0.5, 1.5).sample_sequences(rng, 1, 2)
    with pytest.raises(ValueError, match="reuse"):
        TopicSampler(N, K, -0.1, 0.1).sample_sequences(rng, 1, 2)
    with pytest.raises(ValueError, match="h < N"):
        HotSetSampler(N, K, 2, 0.9, 0.1).sample_sequences(rng, 1, 2)


def test_cli_stats_reports_the_latent_fit_and_picks_it(capsys, tmp_path, topic_ids):
    from simspec.routing.trace import save_trace
    from tests.commands.test_cli import run_main

    path = tmp_path / "topic.npz"
    save_trace(path, _trace(topic_ids[:400]))
    args = ("routing", "stats", str(path), "--lags", "3", "--max-tokens", "8")
    code, out, _ = run_main(capsys, *args)
    assert code == 0
    reuse = re.search(r"read as a topic router: reuse ([0-9.]+), drift ([0-9.]+)", out)
    assert reuse and abs(float(reuse[1]) - 0.8) < 0.05 and abs(float(reuse[2]) - 0.05) < 0.01
    assert "latent (fitted)" in out and "IPF (rho_1..rho_3)" in out
    assert "best fit to this trace's U(T): latent (fitted)" in out
    assert "chosen from the statistics alone (default): latent (fitted)" in out
