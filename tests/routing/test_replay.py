"""Trace replay routing: which rows each request reads, coverage, and rejected drafts."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.errors import InputError
from simspec.routing.replay import RoutingReplay, check_coverage, request_rows
from simspec.routing.trace import RoutingTrace
from simspec.routing.trace_drafts import DraftSections


def _trace(lengths=(5, 3), layers=2, k=2, n=6, rejected_depth=0, seed=0) -> RoutingTrace:
    rng = np.random.default_rng(seed)
    tokens = sum(lengths)
    ids = np.array(
        [[rng.choice(n, k, replace=False) for _ in range(layers)] for _ in range(tokens)]
    )
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    drafts = DraftSections()
    if rejected_depth:
        rejected = np.full((tokens, rejected_depth, layers, k), -1)
        rejected[:, 0] = (ids + 1) % n  # a recognisable recorded set: every id shifted by one
        drafts = DraftSections(rejected_ids=rejected)
    return RoutingTrace(ids, n, starts, drafts=drafts)


def test_request_r_reads_sequence_r_from_its_start():
    trace = _trace(lengths=(5, 3))
    assert request_rows(trace, 0, 4, wrap=False).tolist() == [0, 1, 2, 3]
    assert request_rows(trace, 1, 3, wrap=False).tolist() == [5, 6, 7]


def test_wrapping_cycles_sequences_and_rows():
    trace = _trace(lengths=(5, 3))
    assert request_rows(trace, 2, 2, wrap=True).tolist() == [0, 1]  # request 2 -> sequence 0
    assert request_rows(trace, 1, 7, wrap=True).tolist() == [5, 6, 7, 5, 6, 7, 5]


@pytest.mark.parametrize(("request_id", "length"), [(1, 4), (2, 2)])
def test_uncovered_requests_are_refused_without_wrapping(request_id, length):
    with pytest.raises(ValueError):
        request_rows(_trace(lengths=(5, 3)), request_id, length, wrap=False)


def test_coverage_names_the_first_short_request():
    trace = _trace(lengths=(5, 3))
    check_coverage(trace, [5, 3], False, "t.npz", "routing.trace")  # exactly covered
    check_coverage(trace, [9, 9, 9], True, "t.npz", "routing.trace")  # wrapping: anything goes
    with pytest.raises(InputError) as info:
        check_coverage(trace, [5, 4], False, "t.npz", "routing.trace")
    assert info.value.key_path == "routing.trace"
    assert "request 1 needs 4 tokens, sequence 1 has 3" in info.value.found
    with pytest.raises(InputError, match="2 sequences for 3 requests"):
        check_coverage(trace, [2, 2, 2], False, "t.npz", "routing.trace")


def test_true_block_is_the_trace_rows_padded():
    trace = _trace(lengths=(5, 3))
    block = RoutingReplay(trace, wrap=False).true_block(range(2), [4, 3])
    assert block.shape == (2, 4, 2, 2)
    assert np.array_equal(block[0], trace.expert_ids[:4])
    assert np.array_equal(block[1, :3], trace.expert_ids[5:8])


def test_inclusion_frequencies_count_each_layer():
    trace = _trace(lengths=(5, 3))
    p = RoutingReplay(trace, wrap=False).inclusion_probabilities
    assert np.allclose(p.sum(axis=1), 2.0)  # k_e experts per token
    expected = (trace.expert_ids[:, 0, :] == 3).any(axis=1).mean()
    assert p[0, 3] == pytest.approx(expected)


def test_recorded_rejected_drafts_overlay_the_model():
    trace = _trace(lengths=(5, 3), rejected_depth=2)
    replay = RoutingReplay(trace, wrap=False)
    assert not replay.needs_model(0)  # depth 1 recorded everywhere
    assert replay.needs_model(1) and replay.needs_model(2)  # depth 2 never, depth 3 absent
    sampled = np.full((2, 4, 2, 2), 99)
    out = replay.overlay_rejected(sampled, range(2), [4, 3], 0)
    assert np.array_equal(out[0], (trace.expert_ids[:4] + 1) % 6)
    assert np.array_equal(out[1, :3], (trace.expert_ids[5:8] + 1) % 6)
    assert (out[1, 3] == 99).all()  # padding keeps the model's draw
    assert (replay.overlay_rejected(sampled, range(2), [4, 3], 1) == 99).all()


def test_fitted_model_reproduces_the_trace_marginals():
    trace = _trace(lengths=(40, 40), n=6, seed=3)
    replay = RoutingReplay(trace, wrap=False)
    sampler = replay.fitted_sampler()
    assert sampler is replay.fitted_sampler()  # built once
    ids = sampler.sample_sequences(np.random.default_rng(0), 200, 20)
    p = np.stack(
        [(ids[:, :, layer] == e).any(axis=-1).mean() for layer in range(2) for e in range(6)]
    )
    assert np.allclose(p.reshape(2, 6), replay.inclusion_probabilities, atol=0.03)


def test_a_trace_of_single_tokens_cannot_fit_a_model():
    trace = _trace(lengths=(1, 1, 1))
    with pytest.raises(InputError, match="rejected drafts"):
        RoutingReplay(trace, wrap=False).fitted_sampler()
