"""What the engine asks of a cost model, and the registry of cost models.

A cost model is a frozen dataclass registered with ``@COST_MODELS.register("name")`` in its own
module under :mod:`simspec.costs` (the registry finds every module of the package); the
scenario key ``costs.model`` picks one by name. All its methods are pure functions of the
tokens, contexts and unique experts of a pass.

:func:`simspec.sim.setup.build_setup` creates it with the keywords ``target``, ``drafter``,
``gpu`` (the profile's peaks when there is a profile), ``params`` (the resolved efficiencies),
``num_gpus``, ``tensor_parallel``, ``expert_parallel`` and ``draft_model``, so those are the
fields a new cost model declares; a model that declares a ``profile`` field also gets the
scenario's :class:`~simspec.profile.CalibrationProfile` (a scenario with a profile needs one).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from simspec.params import PassCost
from simspec.physics.experts import independent_union
from simspec.physics.models import ModelShape
from simspec.registry import Registry


class CostModel(Protocol):
    """What the engine asks of a cost model. All methods are pure.

    Many passes at once (the oracle's tables, the analysis's plain passes) are priced by the
    free functions of :mod:`simspec.costs.batch`, which use a model's faster array form where
    it has one and these methods otherwise.
    """

    def verify_pass(
        self, tokens_per_request: np.ndarray, context_tokens: np.ndarray, unique_experts: np.ndarray
    ) -> PassCost:
        """Time of one target pass (verify, or plain decode when every request feeds 1 token)."""
        ...

    def draft_step(self, context_tokens: np.ndarray) -> float:
        """Time of one draft step for the requests still drafting (their contexts)."""
        ...

    def prefill(self, prompt_tokens: np.ndarray) -> PassCost:
        """Time of a prefill pass over newly admitted prompts."""
        ...

    def speculation_overhead_s(
        self, accepted_tokens: np.ndarray, context_tokens: np.ndarray
    ) -> float:
        """Engine work of a speculative iteration besides its draft steps and target pass.

        Verify bookkeeping and the drafter's extend over each request's committed tokens
        (``accepted_tokens[b]`` = a_b + 1); 0 for an engine without such overheads.
        """
        ...


COST_MODELS: Registry[CostModel] = Registry("cost model", package="simspec.costs")


def prefill_unique_experts(shape: ModelShape, prompt_tokens: np.ndarray) -> np.ndarray:
    """Distinct experts per MoE layer of a prefill pass.

    A prefill feeds hundreds of tokens, which touch nearly every expert whatever their overlap,
    so the independent-routing expectation is used.
    """
    u = independent_union(shape.num_experts, shape.experts_per_token, float(np.sum(prompt_tokens)))
    return np.full(shape.num_moe_layers, u)


def draft_phase_by_depth(
    cost_model: CostModel, context_tokens: np.ndarray, draft_tokens: np.ndarray
) -> float:
    """A step's draft phase from the cost model's draft steps, summed in depth order: draft
    step j runs for every request with k_b ≥ j, at its context plus the j − 1 drafts before
    it (:func:`simspec.costs.batch.draft_phase_s`)."""
    ks = np.asarray(draft_tokens)
    ctx = np.asarray(context_tokens)
    depth = int(ks.max(initial=0))
    return float(sum(cost_model.draft_step(ctx[ks >= j] + (j - 1)) for j in range(1, depth + 1)))


def tree_draft_phase_by_depth(
    cost_model: CostModel,
    context_tokens: np.ndarray,
    draft_tokens: np.ndarray,
    topk: int | np.ndarray,
) -> float:
    """A tree step's draft phase from the cost model's draft steps, summed in depth order:
    step 1 forwards one row per request with k_b ≥ 1, step j > 1 its ``topk`` rows (``topk``
    (B,): each request's own), each at its context plus j − 1
    (:func:`simspec.costs.batch.tree_draft_phase_s`)."""
    ks = np.asarray(draft_tokens)
    ctx = np.asarray(context_tokens)
    rows = np.broadcast_to(np.asarray(topk), ks.shape)  # one topk, or each request's own
    return float(
        sum(
            cost_model.draft_step(np.repeat(ctx[ks >= j] + (j - 1), 1 if j == 1 else rows[ks >= j]))
            for j in range(1, int(ks.max(initial=0)) + 1)
        )
    )
