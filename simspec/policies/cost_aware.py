"""Cost-aware threshold: the online form of the Delta-space condition.

Extending a request's draft from k to k+1 tokens buys, in expectation, P(all k+1 drafts accepted)
more committed tokens and costs Δc more GPU time: one more draft step plus the verify pass's
growth, which on an MoE target is dominated by the experts the extra token adds to the batch's
union (zero once the batch already covers every expert). Extending pays off when the expected
tokens are worth more than their cost at the current price of a token, g = GPU time per committed
token (Amankulov & Mamatin, arXiv 2609.22156: the oracle's decisions obey ΔE[cost] < g·ΔE[a]):

    extend  iff  c_1·…·c_{k+1} · g  >  Δc(k → k+1)

The confidence product estimates P(all accepted) (calibrated drafter), g is the engine's running
estimate, and Δc comes from the engine's cost oracle (``DecodeState.marginal_cost_s``). For a dense
target Δc is about one draft step and the rule is SpecDec++'s cumulative threshold with
tau = c_d / g. ``margin`` scales the price: > 1 drafts more boldly, < 1 more cautiously.

At batch size B > 1 the draft step at depth k+1 and the verify pass are shared, so Δc is the
request's share of extending the requests that go on to depth k+1, priced at the step's expected
end (:mod:`simspec.sim.marginal`; the engine asks depth by depth for the whole batch):

    Δc = [Δverify(A) + draft_step(A at depth k+1)] / |A|

first without the step's fixed part (who joins a step that runs anyway), then with it (does the
step pay for itself). Charging the whole draft step to the first request to ask made every
request decline at B = 32. Reading c_{k+1} runs draft step k+1 (a chain drafter), so a declined
extension still pays that step (a probe).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from simspec.policies.base import POLICIES, DecodeState, DepthView
from simspec.schema import param


@POLICIES.register("cost_aware")
@dataclass(frozen=True, slots=True, kw_only=True)
class CostAwarePolicy:
    """Draft while expected extra tokens × time per token exceed the marginal cost."""

    #: It reads ``next_confidence``: declining after reading it costs a probe draft step.
    reads_confidence: ClassVar[bool] = True

    max_tokens: int = param(8, "most draft tokens per step", ge=0, le=64)
    margin: float = param(1.0, "multiplier on the time per token g", ge=0.01, le=100)

    def continue_drafting(self, state: DecodeState) -> bool:
        """Apply the Delta-space rule to the next draft token."""
        if state.drafted >= min(self.max_tokens, state.max_draft_tokens):
            return False
        if state.marginal_cost_s is None or state.time_per_token_s <= 0:
            return False
        gain = math.prod(state.confidences) * state.next_confidence
        return gain * state.time_per_token_s * self.margin > state.marginal_cost_s()

    def continue_drafting_batch(self, view: DepthView) -> np.ndarray:
        """:meth:`continue_drafting` for every request asked at one depth (per-depth path):
        they share one price, read once."""
        n = len(view.next_confidence)
        if view.drafted >= min(self.max_tokens, view.max_draft_tokens) or not n:
            return np.zeros(n, dtype=bool)
        if view.marginal_cost_s is None or view.time_per_token_s <= 0:
            return np.zeros(n, dtype=bool)
        gain = view.chain_confidence()
        return gain * view.time_per_token_s * self.margin > view.marginal_cost_s()

    def budget_cap(self, max_draft_tokens: int) -> int:
        """``max_tokens`` within the drafter's cap."""
        return min(self.max_tokens, max_draft_tokens)
