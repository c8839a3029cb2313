"""Confidence thresholds: stop drafting when the drafter is unsure.

``mode = "per_token"`` (EAGLE/SVIP style): stop before draft j if its confidence c_j < tau.
``mode = "cumulative"`` (SpecDec++, Huang et al., arXiv 2405.19715): stop before draft j if the
product c_1·…·c_j < tau, i.e. once the predicted probability that all drafts so far are accepted
falls below tau (SpecDec++ shows a threshold policy of this form is optimal for its MDP).
Since every c ≤ 1, the product never exceeds the last factor, so the cumulative rule never drafts
more than the per-token rule at equal tau.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from simspec.policies.base import POLICIES, DecodeState, DepthView
from simspec.schema import param


@POLICIES.register("threshold")
@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdPolicy:
    """Draft while the next token's (or the chain's) confidence is at least ``tau``."""

    #: It reads ``next_confidence``: declining after reading it costs a probe draft step.
    reads_confidence: ClassVar[bool] = True

    tau: float = param(0.5, "confidence threshold in [0, 1]", ge=0, le=1)
    mode: str = param("per_token", "per_token or cumulative", choices=("per_token", "cumulative"))
    max_tokens: int = param(8, "most draft tokens per step", ge=0, le=64)

    def continue_drafting(self, state: DecodeState) -> bool:
        """Apply the per-token or cumulative rule to the next draft."""
        if state.drafted >= min(self.max_tokens, state.max_draft_tokens):
            return False
        if self.mode == "per_token":
            return state.next_confidence >= self.tau
        return math.prod(state.confidences) * state.next_confidence >= self.tau

    def continue_drafting_batch(self, view: DepthView) -> np.ndarray:
        """:meth:`continue_drafting` for every request asked at one depth (per-depth path)."""
        if view.drafted >= min(self.max_tokens, view.max_draft_tokens):
            return np.zeros(len(view.next_confidence), dtype=bool)
        if self.mode == "per_token":
            return view.next_confidence >= self.tau
        return view.chain_confidence() >= self.tau

    def budget_cap(self, max_draft_tokens: int) -> int:
        """``max_tokens`` within the drafter's cap."""
        return min(self.max_tokens, max_draft_tokens)
