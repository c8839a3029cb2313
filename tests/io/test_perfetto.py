"""Perfetto timelines: the trace-event format, and events that say what the records say."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

import simspec
from simspec.io.perfetto import (
    FIRST_LANE_TID,
    GPU_TID,
    request_lanes,
    trace_events,
    trace_json,
    write_trace,
)
from simspec.params import PassCost
from simspec.sim.engine import RunLog
from simspec.sim.records import PrefillRecord, RequestRecord

METADATA_NAMES = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}
EPS_US = 1e-6


def check_trace_format(trace: dict) -> None:
    """Trace Event Format rules a viewer relies on (Google's spec; Perfetto's JSON importer)."""
    assert set(trace) >= {"traceEvents"}
    assert trace.get("displayTimeUnit", "ms") in ("ms", "ns")
    spans = defaultdict(list)
    for e in trace["traceEvents"]:
        assert {"name", "ph", "ts", "pid", "tid"} <= set(e), e
        assert isinstance(e["name"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["ts"], int | float) and e["ts"] >= 0
        assert e["ph"] in ("X", "C", "M"), e  # no B/E pairs: nothing to balance
        if e["ph"] == "X":
            assert e["dur"] >= 0
            spans[e["pid"], e["tid"]].append(e)
        elif e["ph"] == "M":
            assert e["name"] in METADATA_NAMES
            key = "sort_index" if e["name"].endswith("sort_index") else "name"
            assert set(e["args"]) == {key}
        else:  # counters: numeric series
            assert e["args"] and all(isinstance(v, int | float) for v in e["args"].values())
    for track in spans.values():  # on one track spans nest or follow each other, never cross
        stack: list[float] = []
        for e in sorted(track, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= e["ts"] + EPS_US:  # spans that ended: closed
                stack.pop()
            if stack:  # e starts inside the innermost open span: it must end inside it too
                assert e["ts"] + e["dur"] <= stack[-1] + EPS_US, (e, stack)
            stack.append(e["ts"] + e["dur"])


def _cost(total_s: float) -> PassCost:
    return PassCost(
        overhead_s=total_s / 4, moe_s=total_s / 2, attention_s=total_s / 8, other_s=total_s / 8
    )


def _ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _log() -> RunLog:
    log = RunLog()
    log.prefills.append(PrefillRecord(0.0, 2, 1000, _cost(0.02)))
    log.steps.append(0.02, 6, 4, 3, 0.004, _cost(0.01), 40.5, 1, 0.0, _ints(0, 1), _ints(1, 1))
    log.steps.append(0.034, 1, 0, 0, 0.0, _cost(0.008), 8.0, 0, 0.0, _ints(1), _ints(4))
    log.requests += [
        RequestRecord(0, 0.0, 0.02, 0.034, 500, 5, 5, 1, 2, 2),
        RequestRecord(1, 0.0, 0.02, 0.042, 500, 3, 3, 2, 2, 1),
        RequestRecord(2, 0.035, 0.05, 0.06, 10, 2, 2, 1, 0, 0),
    ]
    return log


def test_hand_built_records_give_a_valid_trace_with_their_numbers():
    trace = trace_events({"fixed-2": _log()}, {"scenario": "tiny"})
    check_trace_format(trace)
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {"fixed-2"}
    gpu = [e for e in events if e["ph"] == "X" and e["tid"] == GPU_TID]
    assert [e["name"] for e in gpu] == ["prefill", "step", "draft", "verify", "step", "verify"]
    prefill, step, draft, verify, step2, verify2 = gpu
    assert prefill["dur"] == pytest.approx(20_000)  # 0.02 s in microseconds
    assert (step["ts"], step["dur"]) == (pytest.approx(20_000), pytest.approx(14_000))
    assert draft["dur"] == pytest.approx(4_000) and draft["args"] == {"drafted": 4, "probes": 1}
    assert verify["ts"] == pytest.approx(24_000) and verify["dur"] == pytest.approx(10_000)
    assert verify["args"]["tokens"] == 6 and verify["args"]["unique_experts"] == 40.5
    assert (verify["args"]["drafted"], verify["args"]["accepted"]) == (4, 3)
    assert verify["args"]["moe_ms"] == pytest.approx(5.0)
    assert step2["ts"] == verify2["ts"]  # nobody drafted: no draft span, verify opens the step
    assert trace["otherData"] == {"scenario": "tiny"}


def test_the_speculation_overhead_is_a_span_of_its_step_after_the_verify_pass():
    log = RunLog()
    log.steps.append(0.0, 4, 3, 2, 0.003, _cost(0.008), 20.0, 0, 0.002, _ints(0), _ints(0))
    trace = trace_events({"sglang": log})
    check_trace_format(trace)
    gpu = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == GPU_TID]
    assert [e["name"] for e in gpu] == ["step", "draft", "verify", "speculation overhead"]
    step, _, verify, overhead = gpu
    assert step["dur"] == pytest.approx(13_000)  # draft 3 + verify 8 + overhead 2 ms
    assert overhead["ts"] == pytest.approx(verify["ts"] + verify["dur"])
    assert overhead["dur"] == pytest.approx(2_000)
    parts = {k: v for k, v in verify["args"].items() if k.endswith("_ms")}
    assert parts == pytest.approx({"overhead_ms": 2.0, "moe_ms": 4.0, "attention_ms": 1.0,
                                   "other_ms": 1.0, "floors_ms": 0.0,
                                   "collectives_ms": 0.0,
                                   "tree_attention_ms": 0.0})  # fmt: skip


def test_requests_are_packed_into_lanes_that_never_overlap():
    log = _log()
    lanes = request_lanes(log.requests)
    assert lanes == {0: 0, 1: 1, 2: 0}  # request 2 arrives after request 0 finished
    events = trace_events({"r": log})["traceEvents"]
    spans = [e for e in events if e["ph"] == "X" and e["name"].startswith("request ")]
    assert {e["name"]: e["tid"] for e in spans} == {
        "request 0": FIRST_LANE_TID,
        "request 1": FIRST_LANE_TID + 1,
        "request 2": FIRST_LANE_TID,
    }
    r1 = next(e for e in spans if e["name"] == "request 1")
    assert r1["args"]["ttft_ms"] == pytest.approx(20.0)
    assert r1["args"]["tpot_ms"] == pytest.approx((0.042 - 0.02) / 2 * 1e3)
    lane_names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert lane_names == {"GPU", "requests 0", "requests 1"}


def test_a_simulated_run_gives_one_process_per_row_and_its_records(tmp_path):
    scenario = simspec.load_scenario(overrides={"workload.num_requests": 3})
    result = simspec.run(scenario, keep_logs=True)
    assert result.logs is not None and list(result.logs) == [p.label for p in result.policies]
    trace = trace_events(result.logs)
    check_trace_format(trace)
    for pid, (label, log) in enumerate(result.logs.items(), start=1):
        verify = [e for e in trace["traceEvents"] if e["pid"] == pid and e["name"] == "verify"]
        assert len(verify) == len(log.steps)
        assert [e["args"]["tokens"] for e in verify] == [s.fed_tokens for s in log.steps]
        assert [e["args"]["unique_experts"] for e in verify] == [
            s.unique_experts for s in log.steps
        ]
        requests = [
            e for e in trace["traceEvents"] if e["pid"] == pid and e["name"].startswith("request ")
        ]
        assert len(requests) == len(log.requests) == 3, label
    path = write_trace(tmp_path / "run.json", trace)
    assert json.loads(path.read_text()) == json.loads(json.dumps(trace))
    assert trace_json(trace) == trace_json(trace_events(result.logs))  # byte-stable


def test_run_without_keep_logs_keeps_no_records():
    scenario = simspec.load_scenario(overrides={"workload.num_requests": 2})
    assert simspec.run(scenario).logs is None


def test_the_format_check_catches_crossing_spans_and_negative_times():
    def span(ts, dur):
        return {"name": "s", "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": 1}

    check_trace_format({"traceEvents": [span(0, 10), span(2, 3), span(10, 5)]})
    with pytest.raises(AssertionError):
        check_trace_format({"traceEvents": [span(0, 10), span(5, 10)]})
    with pytest.raises(AssertionError):
        check_trace_format({"traceEvents": [span(-1, 1)]})
    with pytest.raises(AssertionError):
        check_trace_format({"traceEvents": [{**span(0, 1), "ph": "B"}]})
