"""Cost-aware threshold: the online form of the Delta-space condition.

Extending a request's draft from k to k+1 tokens buys, in expectation, P(all k+1 drafts accepted)
more committed tokens and costs Δc more GPU time: one more draft step plus the verify pass's
growth, which on an MoE target is dominated by the experts the extra token adds to the batch's
union (zero once the batch already covers every expert). Extending pays off when the expected
tokens are worth more than their cost at the current price of a token, g = GPU time per committed
token (Amankulov & Mamatin, arXiv 2609.22156: the oracle's decisions obey ΔE[cost] < g·ΔE[a]):

    extend  iff  c_1·…·c_{k+1} · g  >  Δc(k → k+1)

The confidence product estimates P(all accepted) (calibrated drafter), g is the engine's running
estimate, and Δc comes from the engine's cost oracle
(:meth:`~simspec.policies.base.BatchView.by_depth`). For a dense target Δc is about one draft
step and the rule is SpecDec++'s cumulative threshold with tau = c_d / g. ``margin`` scales the
price: > 1 drafts more boldly, < 1 more cautiously.

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

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from simspec.policies.base import POLICIES, BatchView, Policy
from simspec.schema import param


@POLICIES.register("cost_aware")
@dataclass(frozen=True, slots=True, kw_only=True)
class CostAwarePolicy(Policy):
    """Draft while expected extra tokens × time per token exceed the marginal cost."""

    #: It reads the confidences: stopping after reading one costs a probe draft step.
    reads_confidence: ClassVar[bool] = True
    #: It weighs drafts against their price and the time per token.
    reads_costs: ClassVar[bool] = True

    max_tokens: int = param(8, "most draft tokens per step", ge=0, le=64)
    margin: float = param(1.0, "multiplier on the time per token g", ge=0.01, le=100)

    def decide(self, view: BatchView) -> np.ndarray:
        """Apply the Delta-space rule depth by depth at the batch's shared prices."""
        assert view.confidences is not None  # reads_confidence
        limit = min(self.max_tokens, view.max_draft_tokens, view.cap)
        g = view.time_per_token_s
        if g <= 0 or limit <= 0:
            return np.zeros(view.batch_size, dtype=np.int64)
        chain = np.cumprod(view.confidences, axis=1)  # c_1·…·c_{k+1}, in slot order

        def agree(ids: np.ndarray, drafted: int, price: Callable[[], float]) -> np.ndarray:
            return chain[ids, drafted] * g * self.margin > price()

        return view.by_depth(limit, agree)

    def budget_cap(self, max_draft_tokens: int) -> int:
        """``max_tokens`` within the drafter's cap."""
        return min(self.max_tokens, max_draft_tokens)
