"""Cost-aware tree shapes: the shape whose expected extra tokens pay for its extra verify tokens.

The tree counterpart of ``cost_aware`` (:mod:`simspec.policies.cost_aware`). Each step it
weighs every shape s of its family (:func:`simspec.text.shapes.grid_family`: chains of
1..``max_steps`` drafts and the trees of each ``topks`` width and ``budgets`` node budget)
by the same Delta-space rule, whole shapes instead of one more draft:

    choose  argmax_s  margin · g · (E[AL_s(α̂)] − 1)  −  Δc(s),      s = 0: no speculation, 0

* Δc(s): each request's share of the step if the whole batch took s, less that of plain
  decoding: its n_s − 1 extra verify tokens, priced with the experts they add to the batch's
  union (:func:`simspec.sim.marginal.shape_shares_s`), plus its draft phase (1 row at step 1,
  topk rows at each later step);
* E[AL_s(α)]: the shape's expected accepted length at i.i.d. acceptance α
  (:mod:`simspec.text.tree`, tabulated by :func:`simspec.text.shapes.acceptance_lengths`) with
  the drafter's rank decay ``rank_decay``;
* α̂: an exponential moving average of the acceptance rate at which the shapes it chose
  would, in expectation, have accepted what the batch accepted
  (:func:`simspec.text.shapes.alpha_for_accepted`), ``initial_alpha`` before the first step;
  a step where nobody drafts gives no evidence and moves α̂ back towards ``initial_alpha`` (so
  a hard stretch that stopped speculation does not stop it for good);
* g: the engine's running GPU time per committed token.

Maximising g·tokens − seconds at the current price of a token is the ratio rule's step
(Dinkelbach): at the fixed point g is the best time per token. It reads no confidence, so it
never pays a probe; with one batch-level α̂ every request gets the same shape in a step (the
protocol allows a shape per request). An index per request into the family is its answer
(:mod:`simspec.policies.base`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from simspec.policies.base import POLICIES, BatchView, Policy, StepFeedback, _constant
from simspec.schema import param
from simspec.text.shapes import TreeShape, alpha_for_accepted, expected_lengths, grid_family

#: ``[speculation] rank_decay``'s default (simspec.config.speculation.DEFAULT_RANK_DECAY, which
#: this layer cannot import; a test checks they agree).
RANK_DECAY = 0.65


@functools.lru_cache(maxsize=64)
def _family(
    max_steps: int, topks: tuple[int, ...], budgets: tuple[int, ...]
) -> tuple[TreeShape, ...]:
    return grid_family(max_steps, topks, budgets)


@POLICIES.register("tree_cost_aware")
@dataclass(frozen=True, slots=True, kw_only=True)
class TreeCostAwarePolicy(Policy):
    """Pick the tree shape whose expected extra tokens are worth its marginal cost."""

    #: It weighs shapes against their price and the time per token.
    reads_costs: ClassVar[bool] = True

    max_steps: int = param(6, "deepest tree (speculative_num_steps) considered", ge=1, le=64)
    topks: tuple[int, ...] = param((1, 2, 4), "tree widths considered (1 = chains)", ge=1, le=64)
    budgets: tuple[int, ...] = param(
        (4, 8, 16), "verified-token budgets of the wider trees, root included", ge=2, le=1024
    )
    margin: float = param(1.0, "multiplier on the time per token g", ge=0.01, le=100)
    rank_decay: float = param(
        RANK_DECAY, "the drafter's rank decay rho assumed for E[AL]", ge=0, le=1
    )
    initial_alpha: float = param(0.7, "acceptance rate assumed before any step", ge=0, le=1)
    ema_weight: float = param(0.2, "weight of the newest step in the alpha EMA", gt=0, le=1)

    def tree_family(self) -> tuple[TreeShape, ...]:
        """:func:`~simspec.text.shapes.grid_family` of the policy's ranges."""
        return _family(self.max_steps, tuple(self.topks), tuple(self.budgets))

    def initial_memory(self) -> float:
        """The acceptance rate before any verify pass."""
        return self.initial_alpha

    def observe(self, memory: float, feedback: StepFeedback) -> float:
        """Fold the step's acceptance into the alpha EMA (the prior if nobody drafted)."""
        alpha = self.initial_alpha  # nobody drafted: no evidence, drift back to the prior
        if feedback.decisions is not None:
            shapes = self.tree_family()
            chosen = [shapes[int(s)] for s in feedback.decisions.tolist()]
            measured = alpha_for_accepted(chosen, feedback.accepted, self.rank_decay)
            alpha = measured if np.isfinite(measured) else alpha
        return (1 - self.ema_weight) * memory + self.ema_weight * alpha

    def decide(self, view: BatchView) -> np.ndarray:
        """The shape of the largest expected net gain (module docstring), for every request."""
        g = view.time_per_token_s
        if view.shape_prices is None or not g > 0 or min(view.cap, view.max_draft_tokens) <= 0:
            return _constant(view.batch_size, 0)
        alpha = float(view.memory) if view.memory is not None else self.initial_alpha
        shapes = self.tree_family()
        gain = expected_lengths(shapes, alpha, self.rank_decay) - 1.0
        net = self.margin * g * gain - view.shape_prices()
        net[0] = 0.0
        deep = np.array([s.steps > min(view.cap, view.max_draft_tokens) for s in shapes])
        net[deep] = -np.inf
        return _constant(view.batch_size, int(np.argmax(net)))

    def budget_cap(self, max_draft_tokens: int) -> int:
        """``max_steps`` within the drafter's cap."""
        return min(self.max_steps, max_draft_tokens)
