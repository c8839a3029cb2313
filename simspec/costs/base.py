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

from simspec.params import PassCost
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

    def verify_pass_many(
        self,
        tokens_per_request: np.ndarray,
        context_tokens: np.ndarray,
        unique_experts: np.ndarray,
        counts: np.ndarray | None = None,
        unique_index: np.ndarray | None = None,
    ) -> np.ndarray:
        """Total times of N target passes, one per row: ``tokens_per_request`` and
        ``context_tokens`` (N, B), ``unique_experts`` (N, layers); returns (N,).

        ``counts`` (B,), if given, makes column b stand for ``counts[b]`` identical requests;
        ``unique_index`` (N, layers), if given, makes ``unique_experts`` a table of values,
        pass p touching ``unique_experts[unique_index[p, l], l]`` in layer l
        (:func:`simspec.costs.many.pass_cost_many`). Entry p must equal
        ``verify_pass(tokens[p], contexts[p], unique[p]).total_s`` (of the expanded batch); a
        model with nothing faster returns :func:`verify_pass_loop`. The oracle prices every
        (state, k) of a request through it.
        """
        ...

    def draft_step_many(
        self, context_tokens: np.ndarray, counts: np.ndarray | None = None
    ) -> np.ndarray:
        """:meth:`draft_step` of N steps, one per row of ``context_tokens`` (N, B); (N,).

        ``counts`` as in :meth:`verify_pass_many`.
        """
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


def verify_pass_loop(
    cost_model: CostModel,
    tokens_per_request: np.ndarray,
    context_tokens: np.ndarray,
    unique_experts: np.ndarray,
    counts: np.ndarray | None = None,
    unique_index: np.ndarray | None = None,
) -> np.ndarray:
    """:meth:`CostModel.verify_pass_many` as a loop over :meth:`CostModel.verify_pass`."""
    tokens, ctx = np.asarray(tokens_per_request), np.asarray(context_tokens)
    if counts is not None:  # the batch each row stands for
        tokens, ctx = np.repeat(tokens, counts, axis=1), np.repeat(ctx, counts, axis=1)
    unique = np.asarray(unique_experts, dtype=float)
    if unique_index is not None:
        unique = np.take_along_axis(unique, np.asarray(unique_index), axis=0)
    rows = zip(tokens, ctx, unique, strict=True)
    return np.array([cost_model.verify_pass(t, c, u).total_s for t, c, u in rows], dtype=float)


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

    The j-th step of request b sees its context plus the j − 1 drafts before it. A cost model
    with a ``draft_phase_s(context_tokens, draft_tokens)`` method of its own (the same number,
    computed faster: :meth:`simspec.costs.roofline.RooflineCostModel.draft_phase_s`) is asked
    through it; any other through :func:`draft_phase_by_depth`.
    """
    own = getattr(cost_model, "draft_phase_s", None)
    if own is not None:
        return float(own(context_tokens, draft_tokens))
    return draft_phase_by_depth(cost_model, context_tokens, draft_tokens)


def draft_phase_by_depth(
    cost_model: CostModel, context_tokens: np.ndarray, draft_tokens: np.ndarray
) -> float:
    """:func:`draft_phase_s` from the cost model's draft steps, summed in depth order."""
    ks = np.asarray(draft_tokens)
    ctx = np.asarray(context_tokens)
    depth = int(ks.max(initial=0))
    return float(sum(cost_model.draft_step(ctx[ks >= j] + (j - 1)) for j in range(1, depth + 1)))


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
