"""Acceptance replay: recorded outcomes become match lengths and confidences, request by request."""

from __future__ import annotations

import numpy as np
import pytest

from simspec import rng as rngs
from simspec.routing.trace import RoutingTrace
from simspec.routing.trace_drafts import DraftSections
from simspec.text.acceptance import AcceptanceConfig, slot_alphas
from simspec.text.replay import AcceptanceReplay, request_lengths
from simspec.text.workload import WorkloadConfig, draw_lengths


def _trace(accepted, confidences=None, lengths=None) -> RoutingTrace:
    accepted = np.asarray(accepted, dtype=bool)
    tokens = len(accepted)
    if confidences is None:
        confidences = np.linspace(0.1, 0.9, accepted.size).reshape(accepted.shape)
    lengths = lengths or [tokens]
    return RoutingTrace(
        np.zeros((tokens, 1, 1), dtype=np.int64),
        2,
        np.concatenate([[0], np.cumsum(lengths)[:-1]]),
        drafts=DraftSections(accepted, np.asarray(confidences, dtype=float)),
    )


def test_match_length_is_the_leading_run_of_recorded_matches():
    accepted = [[1, 1, 0], [0, 1, 1], [1, 1, 1], [1, 0, 1]]
    replay = AcceptanceReplay(_trace(accepted), wrap=False)
    confidence, match = replay.outcomes(0, 4, 3)
    assert match.tolist() == [2, 0, 3, 1]
    assert np.array_equal(confidence, replay.confidences)


def test_slots_beyond_the_recorded_ones_are_never_accepted():
    accepted = [[1, 1], [1, 1]]
    confidence, match = AcceptanceReplay(_trace(accepted), wrap=False).outcomes(0, 2, 5)
    assert match.tolist() == [2, 2]  # capped at the K = 2 recorded drafts
    assert (confidence[:, 2:] == 0).all()
    assert confidence.shape == (2, 5)


def test_fewer_slots_than_recorded_read_the_first_ones():
    accepted = [[1, 1, 1]]
    confidence, match = AcceptanceReplay(_trace(accepted), wrap=False).outcomes(0, 1, 2)
    assert match.tolist() == [2] and confidence.shape == (1, 2)


def test_requests_read_their_own_sequence_and_wrap_when_asked():
    accepted = [[1], [0], [1], [1], [0]]
    trace = _trace(accepted, lengths=[2, 3])
    _, second = AcceptanceReplay(trace, wrap=False).outcomes(1, 3, 1)
    assert second.tolist() == [1, 1, 0]
    _, third = AcceptanceReplay(trace, wrap=True).outcomes(2, 3, 1)  # sequence 0, cyclic
    assert third.tolist() == [1, 0, 1]
    with pytest.raises(ValueError):
        AcceptanceReplay(trace, wrap=False).outcomes(2, 1, 1)


def test_a_trace_without_draft_outcomes_cannot_be_replayed():
    trace = RoutingTrace(np.zeros((3, 1, 1), dtype=np.int64), 2, np.array([0]))
    with pytest.raises(ValueError, match="draft_accepted"):
        AcceptanceReplay(trace, wrap=False)


def test_request_lengths_are_the_reference_sets_draws():
    workload = WorkloadConfig(num_requests=5, output_tokens=40, length_jitter=0.5)
    lengths = request_lengths(workload, seed=7)
    expected = [draw_lengths(workload, rngs.stream(7, "workload", r))[1] for r in range(5)]
    assert lengths == expected
    assert len(set(lengths)) > 1  # the jitter is drawn per request


def test_trace_process_needs_a_path_and_has_no_law():
    with pytest.raises(ValueError, match="trace path"):
        AcceptanceConfig(process="trace")
    with pytest.raises(ValueError, match="only with process = 'trace'"):
        AcceptanceConfig(process="iid", trace="t.npz")
    config = AcceptanceConfig(process="trace", trace="t.npz")
    with pytest.raises(ValueError, match="replays recorded outcomes"):
        slot_alphas(config, 3, 2, np.random.default_rng(0))
