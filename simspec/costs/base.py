"""What the engine asks of a cost model, and the registry of cost models.

A cost model is a frozen dataclass registered with ``@COST_MODELS.register("name")`` in its own
module under :mod:`simspec.costs` (the registry finds every module of the package); the
scenario key ``costs.model`` picks one by name. All its methods are pure functions of the
tokens, contexts and unique experts of a pass.

:func:`simspec.sim.setup.build_setup` creates it with the keywords ``target``, ``drafter``,
``gpu`` (the profile's peaks when there is a profile), ``params`` (the resolved efficiencies),
``num_gpus``, ``tensor_parallel``, ``expert_parallel``, ``draft_model`` and ``profile`` (a
:class:`~simspec.profile.CalibrationProfile` or None), so those are the fields a new cost model
declares.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from simspec.costs.params import PassCost
from simspec.physics.experts import independent_union
from simspec.physics.models import ModelShape
from simspec.registry import Registry


class CostModel(Protocol):
    """What the engine asks of a cost model. All methods are pure."""

    def verify_pass(
        self, tokens_per_request: np.ndarray, context_tokens: np.ndarray, unique_experts: np.ndarray
    ) -> PassCost:
        """Time of one target pass (verify, or plain decode when every request feeds 1 token)."""
        ...

    def draft_step(self, context_tokens: np.ndarray) -> float:
        """Time of one draft step for the requests still drafting (their contexts)."""
        ...

    def prefill_pass(self, prompt_tokens: np.ndarray) -> PassCost:
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


def draft_phase_s(
    cost_model: CostModel, context_tokens: np.ndarray, draft_tokens: np.ndarray
) -> float:
    """Time of one step's draft phase: draft step j runs for every request with k_b ≥ j.

    The j-th step of request b sees its context plus the j − 1 drafts before it.
    """
    ks = np.asarray(draft_tokens)
    ctx = np.asarray(context_tokens)
    return float(
        sum(
            cost_model.draft_step(ctx[ks >= j] + (j - 1))
            for j in range(1, int(ks.max(initial=0)) + 1)
        )
    )


def tree_draft_phase_s(
    cost_model: CostModel, context_tokens: np.ndarray, draft_tokens: np.ndarray, topk: int
) -> float:
    """Draft phase of a tree (:mod:`simspec.text.tree`): ``draft_tokens`` = depth per request.

    Step 1 forwards one row per request (its root; the top ``topk`` of that one distribution
    are the depth-1 candidates); each later step forwards the ``topk`` nodes each request
    expands, i.e. ``topk`` rows per request. ``topk = 1`` is :func:`draft_phase_s`.
    """
    ks = np.asarray(draft_tokens)
    ctx = np.asarray(context_tokens)
    return float(
        sum(
            cost_model.draft_step(np.repeat(ctx[ks >= j] + (j - 1), 1 if j == 1 else topk))
            for j in range(1, int(ks.max(initial=0)) + 1)
        )
    )
