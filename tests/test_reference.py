"""Reference sequences: caps, common random numbers, fed-token routing."""

from __future__ import annotations

import numpy as np

from simspec import reference
from simspec.reference import ReferenceSet
from simspec.routing import to_sets
from simspec.simulate import build_setup
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
