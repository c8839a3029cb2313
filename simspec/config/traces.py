"""The traces a scenario replays: found, read once, checked against the scenario.

``routing.mode = "trace"`` names a routing trace (``routing.trace``) and
``acceptance.process = "trace"`` a trace with draft outcomes (``acceptance.trace``); both may
name the same file, which is then read once. A relative path is resolved against the same
folder as ``costs.profile`` (:func:`simspec.config.profiles.profile_path`: the scenario file's
folder; the working folder for the embedded default). The checks: the routing trace was recorded
on a router of the target's shape (MoE layers, routed experts, k_e), the acceptance trace has its
draft section, and both cover the workload (:func:`simspec.routing.replay.check_coverage`).
The traces then travel in :class:`~simspec.config.scenario.Resolved` as data.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from simspec.config.profiles import existing_file
from simspec.config.scenario import Resolved
from simspec.errors import InputError, ScenarioError
from simspec.routing.replay import TraceFile, check_coverage
from simspec.routing.trace import load_trace
from simspec.text.replay import request_lengths


def read_trace(value: str, key: str, source: str, base_dir: str) -> TraceFile:
    """The trace file ``value`` (a scenario's ``key``), read and validated."""
    path = existing_file(value, base_dir, source, key, "trace file (.npz)")
    trace = load_trace(path)  # InputError naming the trace file and the key inside it
    return TraceFile(str(path), hashlib.sha256(Path(path).read_bytes()).hexdigest(), trace)


def with_traces(
    resolved: Resolved, sections: dict[str, Any], seed: int, source: str, base_dir: str
) -> Resolved:
    """``resolved`` with the routing and acceptance traces the scenario names (or none)."""
    routing, acceptance = sections["routing"], sections["acceptance"]
    files: dict[str, TraceFile] = {}

    def read(value: str, key: str) -> TraceFile:
        if value not in files:
            files[value] = read_trace(value, key, source, base_dir)
        return files[value]

    replays = (routing.replays_trace and resolved.target.shape.num_moe_layers) or (
        acceptance.process == "trace"
    )
    # Drawn only to check a trace's coverage (a stream per request: most of a sweep point's
    # validation time when nothing is replayed).
    lengths = request_lengths(sections["workload"], seed) if replays else []
    routing_trace = acceptance_trace = None
    if routing.replays_trace and resolved.target.shape.num_moe_layers:
        routing_trace = read(routing.trace, "routing.trace")
        _check_shape(routing_trace, resolved, source)
        _check_covers(routing_trace, lengths, routing.trace_wrap, source, "routing.trace")
    if acceptance.process == "trace":
        acceptance_trace = read(acceptance.trace, "acceptance.trace")
        if acceptance_trace.trace.drafts.accepted is None:
            raise ScenarioError(
                source,
                "acceptance.trace",
                "a trace with draft_accepted and draft_confidences (recorded with a drafter: "
                "simspec record --drafter)",
                f"{acceptance_trace.path}, which has no draft section",
            )
        _check_covers(acceptance_trace, lengths, acceptance.trace_wrap, source, "acceptance.trace")
    return dataclasses.replace(
        resolved, routing_trace=routing_trace, acceptance_trace=acceptance_trace
    )


def _check_shape(file: TraceFile, resolved: Resolved, source: str) -> None:
    shape, trace = resolved.target.shape, file.trace
    want = (shape.num_moe_layers, shape.num_experts, shape.experts_per_token)
    have = (trace.num_layers, trace.num_experts, trace.experts_per_token)
    if want != have:
        raise ScenarioError(
            source,
            "routing.trace",
            f"a trace of {resolved.target.name}'s router: {want[0]} MoE layers, top-{want[2]} "
            f"of {want[1]} routed experts",
            f"{file.path}: {have[0]} layers, top-{have[2]} of {have[1]}",
        )


def _check_covers(file: TraceFile, lengths: list[int], wrap: bool, source: str, key: str) -> None:
    try:
        check_coverage(file.trace, lengths, wrap, file.path, key)
    except InputError as err:
        wrap_key = key.replace(".trace", ".trace_wrap")
        raise ScenarioError(
            source,
            key,
            err.expected.replace("trace_wrap", wrap_key),
            f"{file.path}: {err.found}",
        ) from None
