"""The timeline of a run with offloaded experts shows the host link beside the GPU; a run
without [offload] has no such track."""

from __future__ import annotations

import pytest

import simspec
from simspec.io.perfetto import LINK_TID, trace_events

RUN = [
    "workload.num_requests=2",
    "workload.concurrency=1",
    "workload.prompt_tokens=32",
    "workload.output_tokens=16",
]


def test_offloaded_trace_has_a_copy_stream_as_busy_as_the_link():
    result = simspec.run(
        None,
        [
            *RUN,
            "hardware.gpu=rtx-4090",
            'offload.experts="host_pinned"',
            "offload.cache_experts_per_layer=16",
            'offload.prefetch="draft_guided"',
        ],
        keep_logs=True,
    )
    assert result.logs is not None
    trace = trace_events(result.logs)
    for pid, row in enumerate(result.policies, start=1):
        copies = [
            e
            for e in trace["traceEvents"]
            if e["pid"] == pid and e["tid"] == LINK_TID and e["ph"] == "X"
        ]
        assert copies and all(e["name"] == "copy" for e in copies)
        assert sum(e["dur"] for e in copies) / 1e6 == pytest.approx(row.link_busy_s, rel=1e-6)
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"]
    assert "host link" in names
    # Draft-guided copies start inside the draft phase of a policy that drafts, never without.
    for row in result.policies:
        off = result.logs[row.label].offload
        assert off is not None
        early = min(off.link_start_s) < 0
        assert early == (row.mean_k > 0), row.label


def test_resident_trace_has_no_link_track():
    result = simspec.run(None, RUN, keep_logs=True)
    assert result.logs is not None
    trace = trace_events(result.logs)
    assert not [e for e in trace["traceEvents"] if e["tid"] == LINK_TID]
