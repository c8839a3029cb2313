"""Timelines of simulated runs as Chrome trace-event JSON, which ui.perfetto.dev opens.

The trace-event format (Google, "Trace Event Format", docs.google.com/document/d/
1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU) is a JSON object whose ``traceEvents`` list holds
events with a phase ``ph``, a timestamp ``ts`` in microseconds, a process ``pid`` and a thread
``tid``. This module uses three phases: ``X`` (a complete span with a duration ``dur``), ``C``
(a counter sample) and ``M`` (metadata: process and thread names and their sort order).

Each simulated run (one row of a result: a policy, the k = 0 baseline, the oracle) becomes one
*process*, named by its label, with these tracks (*threads*):

* ``GPU``: one ``prefill`` span per prefill pass and one ``step`` span per decode iteration,
  inside which a ``draft`` span (all draft steps of the iteration, probes included) is followed
  by a ``verify`` span whose arguments carry the pass's tokens, drafts, accepted drafts, the
  mean distinct routed experts per MoE layer and the pass's time components
  (:data:`~simspec.sim.records.PASS_PARTS`, in ms), then, when the engine has one, a
  ``speculation overhead`` span (verify bookkeeping and the drafter's extend);
* ``host link`` (only when experts are offloaded, ``[offload]``): one ``copy`` span per pass
  that copied experts, from its first copy's start (inside the draft phase for draft-guided
  prefetch) for the time the link spent on the pass's copies, with the experts it needed,
  missed and copied, and the time the pass waited on them; the copies of a pass interleave
  with its layers' compute, so the span is their busy time laid end to end;
* ``batch`` and ``unique experts``: counters sampled at every step;
* ``requests N``: each request's span from arrival to its last token, split into ``waiting +
  prefill`` (arrival to first token) and ``decode``. Requests overlap, and a track shows only
  nested spans, so they are packed greedily into as few lanes as never overlap.

Times are simulated GPU time from the run's start. Timestamps are rounded to nanoseconds and a
span's duration is its rounded end minus its rounded start, so children never poke out of their
parents. :func:`trace_events` is pure (records in, a dict out); :func:`write_trace` writes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from simspec.io.atomic import write_atomic
from simspec.sim.records import PASS_PARTS, PrefillRecord, RequestRecord, StepRecord

#: Thread ids of the fixed tracks; request lanes follow from :data:`FIRST_LANE_TID`.
GPU_TID = 1
LINK_TID = 2
COUNTER_TID = 0
FIRST_LANE_TID = 10


class Records(Protocol):
    """What one run recorded (:class:`simspec.sim.engine.RunLog` is one)."""

    steps: Sequence[StepRecord]
    prefills: Sequence[PrefillRecord]
    requests: Sequence[RequestRecord]


def _us(seconds: float) -> float:
    """Seconds -> microseconds, rounded to the nanosecond (stable bytes, exact nesting)."""
    return round(seconds * 1e6, 3)


def _span(
    name: str, pid: int, tid: int, start_s: float, end_s: float, args: Mapping[str, Any]
) -> dict[str, Any]:
    ts = _us(start_s)
    return {
        "name": name,
        "ph": "X",
        "ts": ts,
        "dur": max(round(_us(end_s) - ts, 3), 0.0),
        "pid": pid,
        "tid": tid,
        "args": dict(args),
    }


def _meta(name: str, pid: int, tid: int, value: Any) -> dict[str, Any]:
    key = "sort_index" if name.endswith("sort_index") else "name"
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {key: value}}


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 6)


def _gpu_events(records: Records, pid: int) -> list[dict[str, Any]]:
    events = []
    args: dict[str, Any]
    for p in records.prefills:
        end = p.start_s + p.cost.total_s
        args = {"requests": p.requests, "prompt_tokens": p.prompt_tokens}
        events.append(_span("prefill", pid, GPU_TID, p.start_s, end, args))
    for s in records.steps:
        verify_start = s.start_s + s.draft_s
        verify_end = verify_start + s.verify.total_s
        events.append(_span("step", pid, GPU_TID, s.start_s, s.end_s, {"batch_size": s.batch_size}))
        if s.draft_s > 0:
            args = {"drafted": s.drafted, "probes": s.probes}
            events.append(_span("draft", pid, GPU_TID, s.start_s, verify_start, args))
        args = {
            "tokens": s.fed_tokens,
            "drafted": s.drafted,
            "accepted": s.accepted,
            "batch_size": s.batch_size,
            "unique_experts": s.unique_experts,
            **{
                f"{name.removesuffix('_s')}_ms": _ms(getattr(s.verify, name)) for name in PASS_PARTS
            },
        }
        events.append(_span("verify", pid, GPU_TID, verify_start, verify_end, args))
        if s.speculation_overhead_s > 0:
            events.append(_span("speculation overhead", pid, GPU_TID, verify_end, s.end_s, {}))
        ts = _us(s.start_s)
        for name, values in (
            ("batch", {"requests": s.batch_size, "tokens": s.fed_tokens}),
            ("unique experts", {"per_layer": s.unique_experts}),
        ):
            events.append(
                {"name": name, "ph": "C", "ts": ts, "pid": pid, "tid": COUNTER_TID, "args": values}
            )
    return events


def _link_events(records: Records, pid: int) -> list[dict[str, Any]]:
    """The ``host link`` track: the copies of every pass (module docstring)."""
    off = getattr(records, "offload", None)
    if off is None:
        return []
    events = []
    for i in range(len(off.start_s)):
        if off.copy_s[i] <= 0:
            continue
        start = off.start_s[i] + off.link_start_s[i]
        args = {
            "pass": "decode" if off.decode[i] else "prefill",
            "experts_needed": off.needed[i],
            "experts_missed": off.missed[i],
            "experts_copied": off.copied[i],
            "gb": round(off.copied_bytes[i] / 1e9, 6),
            "exposed_ms": _ms(off.exposed_s[i]),
        }
        events.append(_span("copy", pid, LINK_TID, start, start + off.copy_s[i], args))
    return events


def request_lanes(requests: Iterable[RequestRecord]) -> dict[int, int]:
    """Lane of each request id: greedy interval packing in (arrival, id) order, no overlaps."""
    ends: list[float] = []
    lanes: dict[int, int] = {}
    for r in sorted(requests, key=lambda r: (r.arrival_s, r.request_id)):
        lane = next((i for i, end in enumerate(ends) if end <= r.arrival_s), len(ends))
        if lane == len(ends):
            ends.append(r.finish_s)
        else:
            ends[lane] = r.finish_s
        lanes[r.request_id] = lane
    return lanes


def _request_events(records: Records, pid: int, lanes: Mapping[int, int]) -> list[dict[str, Any]]:
    events = []
    for r in records.requests:
        tid = FIRST_LANE_TID + lanes[r.request_id]
        tpot_s = (r.finish_s - r.first_token_s) / max(r.output_tokens - 1, 1)
        args = {
            "request_id": r.request_id,
            "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.output_tokens,
            "steps": r.steps,
            "drafted": r.drafted,
            "accepted": r.accepted,
            "ttft_ms": _ms(r.first_token_s - r.arrival_s),
            "tpot_ms": _ms(tpot_s),
        }
        name = f"request {r.request_id}"
        events.append(_span(name, pid, tid, r.arrival_s, r.finish_s, args))
        events.append(_span("waiting + prefill", pid, tid, r.arrival_s, r.first_token_s, {}))
        events.append(_span("decode", pid, tid, r.first_token_s, r.finish_s, {}))
    return events


def trace_events(
    runs: Mapping[str, Records], metadata: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The trace-event object of ``runs`` (label -> records), one process per run.

    Parameters
    ----------
    runs : mapping of str to records
        Each run's engine records by display label, in the order the trace lists them
        (:attr:`simspec.analysis.results.RunResult.logs`).
    metadata : mapping, optional
        Plain data stored under ``otherData`` (scenario name, digest, seed, version).

    Returns
    -------
    dict
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``; spans are
        sorted by process, thread, start and longest first, so parents precede children.
    """
    events: list[dict[str, Any]] = []
    spans: list[dict[str, Any]] = []
    for index, (label, records) in enumerate(runs.items()):
        pid = index + 1
        lanes = request_lanes(records.requests)
        events += [
            _meta("process_name", pid, 0, label),
            _meta("process_sort_index", pid, 0, index),
            _meta("thread_name", pid, GPU_TID, "GPU"),
            _meta("thread_sort_index", pid, GPU_TID, 0),
        ]
        link = _link_events(records, pid)
        if link:
            events.append(_meta("thread_name", pid, LINK_TID, "host link"))
            events.append(_meta("thread_sort_index", pid, LINK_TID, 0))
        for lane in range(max(lanes.values(), default=-1) + 1):
            tid = FIRST_LANE_TID + lane
            events.append(_meta("thread_name", pid, tid, f"requests {lane}"))
            events.append(_meta("thread_sort_index", pid, tid, 1 + lane))
        spans += _gpu_events(records, pid) + link + _request_events(records, pid, lanes)
    spans.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e.get("dur", 0.0)))
    return {
        "traceEvents": events + spans,
        "displayTimeUnit": "ms",
        "otherData": dict(metadata or {}),
    }


def trace_json(trace: Mapping[str, Any]) -> str:
    """The trace as compact JSON text (one event per line keeps diffs readable)."""
    lines = [json.dumps(e, separators=(",", ":"), allow_nan=False) for e in trace["traceEvents"]]
    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    rest = json.dumps(head, separators=(",", ":"), allow_nan=False)[1:-1]
    return '{"traceEvents":[\n' + ",\n".join(lines) + "\n]" + (f",{rest}" if rest else "") + "}\n"


def write_trace(path: str | Path, trace: Mapping[str, Any]) -> Path:
    """Write ``trace`` to ``path`` atomically (``-`` = standard output)."""
    return write_atomic(path, trace_json(trace))
