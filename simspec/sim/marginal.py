"""What one more draft token would cost: the cost oracle behind ``DecodeState.marginal_cost_s``.

While the engine collects a step's decisions it keeps a :class:`StepPlan`: the tokens each request
will feed, the requests drafting at each depth, and an *estimate* of the batch's distinct experts
per MoE layer. The estimate is what an online policy could know before the verify pass runs the
router: it starts from the expected union of the batch's B committed tokens under independent
routing, N·(1 − (1 − k_e/N)^B), and every extra draft token adds in expectation

    ΔU = (1 − rho)·k_e·(N − U) / (N − k_e)

experts: it reuses a fraction rho (the lag-1 overlap; chance level k_e/N when routing is
independent) of its predecessor's experts, already in the union, and draws the rest from the N − k_e
other experts, of which N − U are not yet loaded. ΔU → 0 as the union covers every expert.
The marginal cost of a draft token for request b is then

    Δc = [verify(tokens + e_b, U + ΔU) − verify(tokens, U)]
       + [draft step at depth j with b − without b]

from the cost model's pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simspec.costs.base import CostModel
from simspec.physics.experts import added_experts, independent_union


@dataclass(frozen=True, slots=True)
class UnionModel:
    """Expected-union arithmetic for one model and routing (see the module docstring)."""

    num_experts: int
    experts_per_token: int
    num_layers: int
    overlap: float  # lag-1 overlap of a draft with its predecessor

    def base(self, batch_size: int) -> np.ndarray:
        """Expected distinct experts per layer of ``batch_size`` independent tokens."""
        n, k = self.num_experts, self.experts_per_token
        if n == 0:
            return np.zeros(self.num_layers)
        return np.full(self.num_layers, independent_union(n, k, batch_size))

    def added(self, union: np.ndarray) -> np.ndarray:
        """Expected new experts per layer from one more draft token."""
        return added_experts(union, self.num_experts, self.experts_per_token, self.overlap)


@dataclass
class StepPlan:
    """The decisions taken so far in one step, and the marginal cost of one more draft token."""

    cost_model: CostModel
    union_model: UnionModel
    contexts: np.ndarray  # (B,)
    tokens: np.ndarray = field(init=False)  # (B,) tokens each request feeds so far
    union: np.ndarray = field(init=False)  # (layers,) expected distinct experts
    depth_contexts: list[list[int]] = field(
        default_factory=list
    )  # per depth j-1: drafting contexts

    def __post_init__(self) -> None:
        self.tokens = np.ones(len(self.contexts), dtype=np.int64)
        self.union = self.union_model.base(len(self.contexts))

    def marginal_cost_s(self, b: int) -> float:
        """Extra draft + verify time if request ``b`` drafts one more token."""
        extra = np.zeros_like(self.tokens)
        extra[b] = 1
        grown = self.union + self.union_model.added(self.union)
        verify = self.cost_model.verify_pass(self.tokens + extra, self.contexts, grown).total_s
        verify -= self.cost_model.verify_pass(self.tokens, self.contexts, self.union).total_s
        depth = int(self.tokens[b])  # the draft this would be (1-based)
        drafting = self.depth_contexts[depth - 1] if depth <= len(self.depth_contexts) else []
        ctx = int(self.contexts[b]) + depth - 1
        draft = self.cost_model.draft_step(np.array([*drafting, ctx]))
        if drafting:
            draft -= self.cost_model.draft_step(np.array(drafting))
        return verify + draft

    def add_draft(self, b: int) -> None:
        """Record that request ``b`` drafts one more token."""
        depth = int(self.tokens[b])
        while len(self.depth_contexts) < depth:
            self.depth_contexts.append([])
        self.depth_contexts[depth - 1].append(int(self.contexts[b]) + depth - 1)
        self.tokens[b] += 1
        self.union = self.union + self.union_model.added(self.union)
