"""The draft sections of a routing trace: round trip, old traces, and every rejection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simspec.errors import InputError
from simspec.routing.trace import RoutingTrace, load_trace, save_trace
from simspec.routing.trace_drafts import DraftSections

OLD_TRACE = Path(__file__).resolve().parents[1] / "data" / "routing_trace.npz"


def _trace(tokens: int = 6, layers: int = 2, k: int = 2, n: int = 8, slots: int = 3, seed=0):
    rng = np.random.default_rng(seed)
    ids = np.stack(
        [[rng.choice(n, k, replace=False) for _ in range(layers)] for _ in range(tokens)]
    )
    accepted = rng.random((tokens, slots)) < 0.5
    confidences = rng.random((tokens, slots))
    rejected = np.full((tokens, slots, layers, k), -1)
    rejected[::2, 0] = ids[::2]  # some recorded blocks (any valid sets will do)
    return RoutingTrace(
        ids,
        n,
        np.array([0, tokens // 2]),
        drafts=DraftSections(accepted, confidences, rejected),
    )


def _write(path, **arrays):
    np.savez(path, **arrays)
    return path


def test_sections_round_trip(tmp_path):
    trace = _trace()
    save_trace(tmp_path / "t.npz", trace)
    back = load_trace(tmp_path / "t.npz")
    assert back.drafts.draft_slots == 3
    assert np.array_equal(back.drafts.accepted, trace.drafts.accepted)
    assert np.allclose(back.drafts.confidences, trace.drafts.confidences, atol=1e-7)
    assert np.array_equal(back.drafts.rejected_ids, trace.drafts.rejected_ids)
    assert np.array_equal(back.expert_ids, trace.expert_ids)


def test_old_traces_have_no_draft_sections():
    trace = load_trace(OLD_TRACE)
    assert trace.drafts == DraftSections()
    assert trace.drafts.draft_slots == 0


def _arrays(**change):
    trace = _trace()
    arrays = {
        "expert_ids": trace.expert_ids,
        "num_experts": np.array(8),
        "draft_accepted": trace.drafts.accepted,
        "draft_confidences": trace.drafts.confidences,
        "rejected_expert_ids": trace.drafts.rejected_ids,
    }
    arrays.update(change)
    return {k: v for k, v in arrays.items() if v is not None}


def _bad_rejected(kind):
    rejected = _trace().drafts.rejected_ids.copy()
    if kind == "partial":
        rejected[0, 0, 0, 0] = -1  # one layer missing in a recorded block
    elif kind == "range":
        rejected[0, 0, 1, 1] = 8
    else:  # repeat
        rejected[0, 0, 1] = [3, 3]
    return rejected


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"draft_confidences": None}, "draft_confidences", "alongside"),
        ({"draft_accepted": None}, "draft_accepted", "alongside"),
        ({"draft_accepted": np.zeros((6, 3), int)}, "draft_accepted", "bool"),
        ({"draft_accepted": np.zeros((5, 3), bool)}, "draft_accepted", "(6, K)"),
        ({"draft_confidences": np.full((6, 3), 1.5)}, "draft_confidences", "[0, 1]"),
        ({"draft_confidences": np.full((6, 3), np.nan)}, "draft_confidences", "[0, 1]"),
        ({"draft_confidences": np.zeros((6, 2))}, "draft_confidences", "(6, 3)"),
        ({"rejected_expert_ids": np.zeros((6, 3, 2), int)}, "rejected_expert_ids", "R"),
        ({"rejected_expert_ids": _bad_rejected("partial")}, "rejected_expert_ids", "every layer"),
        ({"rejected_expert_ids": _bad_rejected("range")}, "rejected_expert_ids", "[0, 8)"),
        ({"rejected_expert_ids": _bad_rejected("repeat")}, "rejected_expert_ids", "distinct"),
    ],
)
def test_bad_sections_name_the_key(tmp_path, change, key, words):
    path = _write(tmp_path / "bad.npz", **_arrays(**change))
    with pytest.raises(InputError) as info:
        load_trace(path)
    assert info.value.key_path == key
    assert words in info.value.expected
    assert str(path) in str(info.value)


def test_rejected_section_may_come_alone(tmp_path):
    path = _write(tmp_path / "alone.npz", **_arrays(draft_accepted=None, draft_confidences=None))
    trace = load_trace(path)
    assert trace.drafts.accepted is None and trace.drafts.rejected_ids is not None
