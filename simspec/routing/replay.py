"""Trace replay: requests take the routing of real tokens from a recorded trace.

With ``routing.mode = "trace"`` nothing about true tokens is sampled: request r's text is
sequence r of the trace (format: :mod:`simspec.routing.trace`), its state-i token being row i
of that sequence, so every policy (and the oracle) replays the same expert sets: the common
random numbers of :mod:`simspec.text.reference` hold by construction. A verify pass loads the
union of the replayed sets, counted directly (so there is no separate analytic variant: the
count is exact, not sampled). The routing of a *rejected* draft comes from the trace's
``rejected_expert_ids`` section where it was recorded (:mod:`simspec.routing.trace_drafts`),
else from the max-entropy sampler (:mod:`simspec.routing.maxent`) fitted to the trace's own
per-layer inclusion frequencies and lag-1..2 overlaps (:func:`~simspec.routing.trace.
estimate_statistics`), continuing from the replayed tokens before it.

Coverage: a workload of n requests needs n sequences, sequence r at least as long as request r's
output. A shorter trace is refused at load time (exit 2) unless wrapping is asked for
(``trace_wrap = true``): request r then takes sequence r mod S, read cyclically from its first
token when the request is longer (the seam joins two unrelated tokens: their overlap is lost).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import InputError
from simspec.routing.maxent import MaxEntSampler
from simspec.routing.trace import RoutingTrace, estimate_statistics

#: Lags of the overlap profile fitted to a trace for rejected drafts it did not record.
FITTED_LAGS = 2


@dataclass(frozen=True, slots=True)
class TraceFile:
    """A trace the loader read for a scenario: where it was, its digest and its contents."""

    path: str
    sha256: str
    trace: RoutingTrace


def sequence_bounds(trace: RoutingTrace) -> tuple[np.ndarray, np.ndarray]:
    """First row and length of every sequence of ``trace``, int arrays (S,)."""
    starts = np.asarray(trace.sequence_starts, dtype=np.int64)
    ends = np.append(starts[1:], trace.num_tokens)
    return starts, ends - starts


def request_rows(trace: RoutingTrace, request_id: int, length: int, wrap: bool) -> np.ndarray:
    """Trace rows of the ``length`` tokens of request ``request_id`` (module docstring).

    Raises
    ------
    ValueError
        The trace does not cover the request and ``wrap`` is false.
    """
    starts, lengths = sequence_bounds(trace)
    if request_id >= len(starts) and not wrap:
        raise ValueError(f"request {request_id} needs sequence {request_id} of {len(starts)}")
    seq = request_id % len(starts)
    if length > lengths[seq] and not wrap:
        raise ValueError(
            f"request {request_id} needs {length} tokens, sequence {seq} has {lengths[seq]}"
        )
    return starts[seq] + np.arange(length) % lengths[seq]


def check_coverage(
    trace: RoutingTrace, lengths: list[int], wrap: bool, source: str, key: str
) -> None:
    """Raise InputError when the trace cannot give every request its text without wrapping."""
    if wrap:
        return
    _, have = sequence_bounds(trace)
    need = np.asarray(lengths, dtype=np.int64)
    if len(need) > len(have) or (need > have[: len(need)]).any():
        short = np.flatnonzero(need[: len(have)] > have[: len(need)])
        found = f"{len(have)} sequences for {len(need)} requests"
        if short.size:
            r = int(short[0])
            found += f"; request {r} needs {need[r]} tokens, sequence {r} has {have[r]}"
        raise InputError(
            source,
            key,
            "a trace with one sequence per request, sequence r at least as long as request r "
            "(or trace_wrap = true to reuse sequences cyclically)",
            found,
        )


class RoutingReplay:
    """The true tokens' and rejected drafts' routing of a trace, request by request."""

    def __init__(self, trace: RoutingTrace, wrap: bool):
        self.trace = trace
        self.wrap = wrap
        self._fitted: MaxEntSampler | None = None
        ids = trace.expert_ids
        counts = np.zeros((trace.num_layers, trace.num_experts))
        layer = np.broadcast_to(np.arange(trace.num_layers)[None, :, None], ids.shape)
        np.add.at(counts, (layer, ids), 1.0)
        #: Inclusion frequency of each expert per MoE layer over the trace, (layers, N).
        self.inclusion_probabilities = counts / trace.num_tokens

    def rows(self, request_id: int, length: int) -> np.ndarray:
        """Trace rows of a request's tokens (:func:`request_rows`)."""
        return request_rows(self.trace, request_id, length, self.wrap)

    def true_block(self, request_ids: range, lengths: list[int]) -> np.ndarray:
        """Replayed ids of the requests' tokens, int16 (requests, max length, layers, k_e)."""
        t = self.trace
        out = np.zeros(
            (len(request_ids), max(lengths), t.num_layers, t.experts_per_token), np.int16
        )
        for q, (r, n) in enumerate(zip(request_ids, lengths, strict=True)):
            out[q, :n] = t.expert_ids[self.rows(r, n)]
        return out

    def fitted_sampler(self) -> MaxEntSampler:
        """The max-entropy sampler of the trace's own statistics (built on first use).

        Raises
        ------
        InputError
            The trace's sequences are too short to measure a lag-1 overlap, or the statistics
            cannot be fitted.
        """
        if self._fitted is None:
            for lags in range(FITTED_LAGS, 0, -1):
                try:
                    stats = estimate_statistics(self.trace, max_lag=lags, max_tokens=1)
                    self._fitted = MaxEntSampler(stats.inclusion_probabilities, stats.overlaps)
                    break
                except ValueError as err:
                    problem = str(err)
            else:
                raise InputError(
                    "routing trace",
                    "rejected_expert_ids",
                    "recorded rejected drafts, or sequences from which their routing can be "
                    "fitted (two tokens or more)",
                    problem,
                )
        return self._fitted

    def needs_model(self, level: int) -> bool:
        """True when some rejected draft of depth ``level`` + 1 has no recorded routing."""
        rejected = self.trace.drafts.rejected_ids
        return (
            rejected is None or level >= rejected.shape[1] or bool((rejected[:, level] < 0).any())
        )

    def overlay_rejected(
        self, sampled: np.ndarray, request_ids: range, lengths: list[int], level: int
    ) -> np.ndarray:
        """``sampled`` (requests, length, layers, k_e) with recorded depth-``level`` drafts."""
        rejected = self.trace.drafts.rejected_ids
        if rejected is None or level >= rejected.shape[1]:
            return sampled
        out = sampled.copy()
        for q, (r, n) in enumerate(zip(request_ids, lengths, strict=True)):
            recorded = rejected[self.rows(r, n), level]
            have = recorded[:, 0, 0] >= 0
            out[q, :n][have] = recorded[have]
        return out
