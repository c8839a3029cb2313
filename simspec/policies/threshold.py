"""Confidence thresholds: stop drafting when the drafter is unsure.

``mode = "per_token"`` (EAGLE/SVIP style): stop before draft j if its confidence c_j < tau.
``mode = "cumulative"`` (SpecDec++, Huang et al., arXiv 2405.19715): stop before draft j if the
product c_1·…·c_j < tau, i.e. once the predicted probability that all drafts so far are accepted
falls below tau (SpecDec++ shows a threshold policy of this form is optimal for its MDP).
Since every c ≤ 1, the product never exceeds the last factor, so the cumulative rule never drafts
more than the per-token rule at equal tau.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from simspec.policies.base import POLICIES, BatchView, Policy
from simspec.schema import param


@POLICIES.register("threshold")
@dataclass(frozen=True, slots=True, kw_only=True)
class ThresholdPolicy(Policy):
    """Draft while the next token's (or the chain's) confidence is at least ``tau``."""

    #: It reads the confidences: stopping after reading one costs a probe draft step.
    reads_confidence: ClassVar[bool] = True
    #: Each request's drafts follow from its own confidences.
    per_request: ClassVar[bool] = True

    tau: float = param(0.5, "confidence threshold in [0, 1]", ge=0, le=1)
    mode: str = param("per_token", "per_token or cumulative", choices=("per_token", "cumulative"))
    max_tokens: int = param(8, "most draft tokens per step", ge=0, le=64)

    def decide(self, view: BatchView) -> np.ndarray:
        """The leading drafts whose confidence (or chain product) is at least ``tau``."""
        assert view.confidences is not None  # reads_confidence
        limit = max(min(self.max_tokens, view.max_draft_tokens, view.cap), 0)
        slots = view.confidences[:, :limit]
        if self.mode == "cumulative":
            slots = np.cumprod(slots, axis=1)  # c_1·…·c_j, multiplied in slot order
        return np.cumprod(slots >= self.tau, axis=1).sum(axis=1, dtype=np.int64)

    def budget_cap(self, max_draft_tokens: int) -> int:
        """``max_tokens`` within the drafter's cap."""
        return min(self.max_tokens, max_draft_tokens)
