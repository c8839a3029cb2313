"""Reference sequences: caps, common random numbers, fed-token routing."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.routing.model import AnalyticRouting, MaxEntRouting, ReuseRouting
from simspec.routing.sets import to_sets
from simspec.sim.setup import build_setup
from simspec.text import reference
from simspec.text.reference import ReferenceSet
from tests.helpers import tiny


def _refs(*overrides: str) -> ReferenceSet:
    return build_setup(tiny(*overrides)).references


def test_match_lengths_capped_by_drafter_and_end_of_text():
    refs = _refs("acceptance.alpha=1.0", "workload.output_tokens=30")
    seq = refs.sequence(0)
    n = seq.output_tokens
    for i in range(1, n):
        assert seq.match_lengths[i] == min(refs.max_draft_tokens, n - i - 1)


def test_fed_routing_use_true_routing_for_accepted_drafts():
    refs = _refs("acceptance.alpha=1.0", "workload.output_tokens=30")
    fed = refs.fed_routing(0, 3, 4)  # all 4 drafts accepted -> tokens y_3..y_7
    true = refs._block_true(0)[0]
    assert np.array_equal(fed, true[3:8])
    assert (to_sets(fed, 128).sum(axis=-1) == 8).all()


def test_rejected_drafts_continue_from_last_accepted_token():
    refs = _refs("acceptance.alpha=0.0", "routing.overlap=1.0")
    # alpha = 0: every draft is rejected; overlap 1 makes each rejected draft copy its predecessor.
    sets = to_sets(refs.fed_routing(1, 5, 3), 128)
    assert np.array_equal(sets[1], sets[0]) and np.array_equal(sets[3], sets[0])


def test_deeper_requests_do_not_change_shallower_routing():
    a = _refs("acceptance.alpha=0.2")
    b = _refs("acceptance.alpha=0.2")
    shallow = a.fed_routing(2, 4, 2)
    deep = b.fed_routing(2, 4, 6)  # generates rejected levels up to 6 first
    again = b.fed_routing(2, 4, 2)
    assert np.array_equal(shallow, again)
    m = int(b.sequence(2).match_lengths[4])
    assert np.array_equal(deep[: min(2, m) + 1 + max(0, 2 - m)], shallow)


def test_requests_beyond_one_block(monkeypatch):
    monkeypatch.setattr(reference, "BLOCK_REQUESTS", 3)
    refs = _refs("workload.num_requests=7")
    assert refs.fed_routing(6, 1, 2).shape == (3, 48, 8)
    assert len(refs._true) == 1 and 2 in refs._true


def test_dense_model_has_no_routing():
    refs = _refs('model.target="qwen3-8b"', 'model.drafter="eagle3-qwen3-8b"')
    assert refs.fed_routing(0, 1, 3).shape == (4, 0, 0)


# -- multi-lag routing and the analytic mode ---------------------------------------------------
def test_routing_model_choice():
    assert isinstance(_refs().model, ReuseRouting)  # uniform, lag-1: the reuse sampler
    assert isinstance(_refs("routing.overlaps=[0.38, 0.3]").model, MaxEntRouting)
    assert isinstance(_refs('routing.popularity="zipf"').model, MaxEntRouting)
    analytic = _refs('routing.mode="analytic"')
    assert isinstance(analytic.model, AnalyticRouting) and analytic.model.analytic
    assert "sampled" not in vars(analytic.model)  # no sampler until a reader asks for sets
    assert not _refs().model.analytic


def test_multi_lag_rejected_drafts_continue_the_history():
    # Overlap 1 at every lag: each token repeats the previous set, rejected drafts included.
    refs = _refs("acceptance.alpha=0.0", "routing.overlap=1.0", "routing.overlaps=[1.0, 1.0, 1.0]")
    sets = to_sets(refs.fed_routing(1, 5, 3), 128)
    assert all(np.array_equal(sets[j], sets[0]) for j in range(1, 4))


def test_multi_lag_deeper_requests_do_not_change_shallower_routing():
    over = (
        "acceptance.alpha=0.3",
        "routing.overlaps=[0.38, 0.34, 0.3]",
        'routing.popularity="zipf"',
    )
    a, b = _refs(*over), _refs(*over)
    shallow = a.fed_routing(2, 4, 2)
    b.fed_routing(2, 4, 6)
    assert np.array_equal(b.fed_routing(2, 4, 2), shallow)
    assert (to_sets(shallow, 128).sum(axis=-1) == 8).all()


def test_analytic_mode_serves_the_ipf_expectation_cached():
    refs = _refs('routing.mode="analytic"', "routing.overlaps=[0.38, 0.32, 0.29]")
    u = refs.pass_unique_experts([(0, 3, 2)])
    assert u.shape == (48,) and u.dtype == float
    assert u == pytest.approx(refs.predictor.expected_unique([3]))
    assert refs.pass_unique_experts([(0, 3, 2)]) is u  # the oracle's single-request query: cached
    batch = refs.pass_unique_experts([(0, 3, 2), (1, 5, 0), (2, 1, 4)])
    assert batch == pytest.approx(refs.predictor.expected_unique([3, 1, 5]))


def test_analytic_mode_splits_true_and_rejected_tokens_with_a_draft_profile():
    refs = _refs(
        'routing.mode="analytic"', "routing.overlaps=[0.38, 0.3]", "routing.draft_overlaps=[0.1]"
    )
    seq = refs.sequence(0)
    state = next(i for i in range(1, seq.output_tokens - 5) if seq.match_lengths[i] < 4)
    m = int(seq.match_lengths[state])
    u = refs.pass_unique_experts([(0, state, 4)])
    assert u == pytest.approx(refs.predictor.expected_unique([5], [m + 1]))
    assert u.mean() > refs.predictor.expected_unique([5], [5]).mean()


@pytest.mark.parametrize(
    "overrides",
    [
        ("routing.overlap=0.38",),
        ("routing.overlaps=[0.38, 0.34, 0.31]", 'routing.popularity="zipf"'),
    ],
)
def test_analytic_mode_matches_monte_carlo_in_the_engine(overrides):
    from tests.helpers import simulate, tiny

    common = (
        *overrides,
        "workload.concurrency=4",
        "workload.num_requests=8",
        "workload.output_tokens=120",
    )
    policies = [{"name": "fixed", "draft_tokens": 0}, {"name": "fixed", "draft_tokens": 4}]
    mc = simulate(tiny(*common, policies=policies))["policies"]
    an = simulate(tiny(*common, 'routing.mode="analytic"', policies=policies))["policies"]
    for a, b in zip(mc, an, strict=True):
        assert b["unique_experts_per_layer"] == pytest.approx(
            a["unique_experts_per_layer"], rel=0.02
        )
        assert b["tpot_ms"] == pytest.approx(a["tpot_ms"], rel=0.01)


def test_impossible_overlaps_are_input_errors():
    from simspec.errors import InputError

    for mode in ("monte_carlo", "analytic"):
        with pytest.raises(InputError) as err:
            _refs(f'routing.mode="{mode}"', "routing.overlap=0.99", "routing.overlaps=[0.99, 0.0]")
        assert err.value.key_path == "routing.overlaps"
        assert "cannot be matched" in str(err.value)


@pytest.mark.parametrize("popularity", ["uniform", "zipf"])
def test_pass_unique_experts_is_the_union_of_every_fed_token(popularity):
    """The batched gather (grouped by block) equals the union of each request's fed_routing."""
    refs = _refs(
        "workload.num_requests=66",
        "workload.output_tokens=12",
        f'routing.popularity="{popularity}"',
    )
    rng = np.random.default_rng(5)
    for trial in range(40):
        rids = rng.choice(66, size=int(rng.integers(1, 9)), replace=False)  # spans two blocks
        fed = [
            (
                int(r),
                int(rng.integers(0, refs.sequence(int(r)).output_tokens)),
                int(rng.integers(6)),
            )
            for r in rids
        ]
        accepted = [int(rng.integers(k + 1)) for _, _, k in fed] if trial % 2 else None
        counts = accepted or [None] * len(fed)
        tokens = [refs.fed_routing(r, i, k, a) for (r, i, k), a in zip(fed, counts, strict=True)]
        expected = to_sets(np.concatenate(tokens), 128).any(axis=0).sum(axis=-1)
        assert np.array_equal(refs.pass_unique_experts(fed, accepted), expected)


def test_pass_unique_experts_each_is_the_union_of_each_pass_fed_tokens():
    """Many passes in one gather: each pass's count is the union of its own requests'
    fed_routing (requests of two blocks, a pass of several, states at the end of a text)."""
    refs = _refs("workload.num_requests=66", "workload.output_tokens=12")
    rng = np.random.default_rng(6)
    fed, accepted, passes, want = [], [], [], []
    for p in range(12):
        rids = rng.choice(66, size=int(rng.integers(1, 5)), replace=False)
        tokens = []
        for r in rids.tolist():
            i = int(rng.integers(0, refs.sequence(r).output_tokens))
            k = int(rng.integers(6))
            a = min(k, int(refs.sequence(r).match_lengths[i]))
            fed.append((r, i, k))
            accepted.append(a)
            passes.append(p)
            tokens.append(refs.fed_routing(r, i, k, a))
        want.append(to_sets(np.concatenate(tokens), 128).any(axis=0).sum(axis=-1))
    triples, taken = np.array(fed), np.array(accepted)
    got = refs.pass_unique_experts_each(triples, taken, np.array(passes))
    assert got.shape == (12, 48)
    assert np.array_equal(got, np.array(want))
    alone = refs.pass_unique_experts_each(triples, taken)  # every row its own pass
    for b in range(len(fed)):
        assert np.array_equal(
            alone[b], refs.pass_unique_experts(triples[b : b + 1], taken[b : b + 1])
        )
