"""Fixed-k: draft exactly ``draft_tokens`` every step (vLLM ``num_speculative_tokens``).

``draft_tokens = 0`` is plain autoregressive decoding, the baseline of every speedup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from simspec.policies.base import POLICIES, BatchView, Policy, uniform
from simspec.schema import param


@POLICIES.register("fixed")
@dataclass(frozen=True, slots=True, kw_only=True)
class FixedPolicy(Policy):
    """Draft the same number of tokens every step."""

    #: Every request's answer is the same constant, whatever the batch.
    per_request: ClassVar[bool] = True

    draft_tokens: int = param(3, "draft tokens per step (0 = no speculation)", ge=0, le=64)

    def decide(self, view: BatchView) -> np.ndarray:
        """Every request drafts ``draft_tokens`` (within the step's caps)."""
        return uniform(view, self.draft_tokens)

    def budget_cap(self, max_draft_tokens: int) -> int:
        """``draft_tokens``, within the drafter's cap."""
        return min(self.draft_tokens, max_draft_tokens)


#: Label of the k = 0 baseline row when a scenario does not declare one (reserved for it).
BASELINE_LABEL = "no-spec"


def is_plain_decoding(policy: object) -> bool:
    """True for the k = 0 policy (plain decoding: every step verifies one token).

    The one test of "is this the baseline": by the policy object, never by a label.
    """
    return isinstance(policy, FixedPolicy) and policy.draft_tokens == 0
