"""Acceptance replay: each request's draft outcomes and confidences come from a recorded run.

With ``acceptance.process = "trace"`` a request's text is a sequence of the trace named by
``acceptance.trace`` (request r takes sequence r, or r mod S with ``trace_wrap``:
:func:`simspec.routing.replay.request_rows`), and at state i it reads the row of its token i:
the drafter's confidences c_{i,j} and whether draft j matched the target's own next token
(:mod:`simspec.routing.trace_drafts`). The match length m_i is the leading run of matches, as
for the drawn processes (:func:`simspec.text.acceptance.match_lengths`). Nothing is random, so
every policy sees the same outcomes (common random numbers by construction).

A trace records K draft slots. Slots beyond K (a drafter whose ``max_draft_tokens`` is larger)
are taken as never accepted with confidence 0: the recorded drafter proposed no more. Near the
end of a wrapped sequence the recorded matches refer to the tokens that followed in the recorded
run, not to the wrapped ones (a small inconsistency at the seam).
"""

from __future__ import annotations

import numpy as np

from simspec import rng as rngs
from simspec.routing.replay import request_rows
from simspec.routing.trace import RoutingTrace
from simspec.text.acceptance import match_lengths
from simspec.text.workload import WorkloadConfig, draw_lengths


class AcceptanceReplay:
    """Recorded acceptance outcomes of a trace, request by request."""

    def __init__(self, trace: RoutingTrace, wrap: bool):
        drafts = trace.drafts
        if drafts.accepted is None or drafts.confidences is None:
            raise ValueError("the trace has no draft_accepted / draft_confidences section")
        self.trace = trace
        self.wrap = wrap
        self.accepted: np.ndarray = drafts.accepted
        self.confidences: np.ndarray = drafts.confidences

    @property
    def draft_slots(self) -> int:
        """K, draft slots the trace records per token."""
        return int(self.accepted.shape[1])

    def outcomes(self, request_id: int, length: int, slots: int) -> tuple[np.ndarray, np.ndarray]:
        """Confidences (length, slots) and match lengths (length,) of a request's text."""
        rows = request_rows(self.trace, request_id, length, self.wrap)
        k = min(slots, self.draft_slots)
        confidence = np.zeros((length, slots))
        accepted = np.zeros((length, slots), dtype=bool)
        confidence[:, :k] = self.confidences[rows, :k]
        accepted[:, :k] = self.accepted[rows, :k]
        return confidence, match_lengths(accepted)


def request_lengths(workload: WorkloadConfig, seed: int) -> list[int]:
    """Output tokens of every request, drawn as :class:`~simspec.text.reference.ReferenceSet`
    draws them (same stream), so a trace's coverage can be checked before a run."""
    return [
        draw_lengths(workload, rngs.stream(seed, "workload", r))[1]
        for r in range(workload.num_requests)
    ]
