"""Many passes priced at once: the free functions every caller uses to price in bulk.

A :class:`~simspec.costs.base.CostModel` prices one pass at a time. The oracle's tables (every
state and draft count of a request) and the analysis's plain passes price thousands, so these
functions take N passes as rows of arrays and return their totals. Each entry equals what the
model's own method gives for that pass, bit for bit: the roofline (and the calibrated model's
drafter, a roofline) have an array form that runs the same term functions elementwise
(:mod:`simspec.costs.passes`); any other model, or a subclass that overrides the method, is asked
pass by pass.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from simspec.costs.base import CostModel, draft_phase_by_depth, tree_draft_phase_by_depth
from simspec.costs.calibrated import CalibratedCostModel
from simspec.costs.offload import OffloadCostModel
from simspec.costs.roofline import RooflineCostModel
from simspec.params import PassCost


def verify_totals(
    cost_model: CostModel,
    tokens_per_request: np.ndarray,
    context_tokens: np.ndarray,
    unique_experts: np.ndarray,
    *,
    counts: np.ndarray | None = None,
    unique_index: np.ndarray | None = None,
) -> np.ndarray:
    """Total seconds of N target passes: ``tokens_per_request`` and ``context_tokens`` (N, B),
    ``unique_experts`` (N, layers); returns (N,), entry p = ``verify_pass(tokens[p],
    contexts[p], unique[p]).total_s``.

    ``counts`` (B,), if given, makes column b stand for ``counts[b]`` identical requests;
    ``unique_index`` (N, layers), if given, makes ``unique_experts`` a table of values, pass p
    touching ``unique_experts[unique_index[p, l], l]`` in layer l
    (:func:`simspec.costs.passes.pass_cost_many`).
    """
    if (
        isinstance(cost_model, RooflineCostModel)
        and type(cost_model).verify_pass is RooflineCostModel.verify_pass
    ):
        return cost_model.verify_totals(
            tokens_per_request, context_tokens, unique_experts, counts, unique_index
        )
    # The base's totals, each plus its expected loads; misses computed on the CPU run beside
    # the GPU's experts, which the totals do not separate: those passes are priced one by one.
    if type(cost_model) is OffloadCostModel and cost_model.model.miss != "cpu":
        base = verify_totals(
            cost_model.base,
            tokens_per_request,
            context_tokens,
            unique_experts,
            counts=counts,
            unique_index=unique_index,
        )
        tokens = np.asarray(tokens_per_request)
        if counts is not None:
            tokens = np.repeat(tokens, counts, axis=1)
        unique = np.asarray(unique_experts, dtype=float)
        if unique_index is not None:
            unique = np.take_along_axis(unique, np.asarray(unique_index), axis=0)
        exposed = cost_model.expected_exposed_s
        rows = zip(base.tolist(), tokens, unique, strict=True)
        return np.array([t + exposed(t, n, u) for t, n, u in rows], dtype=float)
    tokens, ctx = np.asarray(tokens_per_request), np.asarray(context_tokens)
    if counts is not None:  # the batch each row stands for
        tokens, ctx = np.repeat(tokens, counts, axis=1), np.repeat(ctx, counts, axis=1)
    unique = np.asarray(unique_experts, dtype=float)
    if unique_index is not None:
        unique = np.take_along_axis(unique, np.asarray(unique_index), axis=0)
    rows = zip(tokens, ctx, unique, strict=True)
    return np.array([cost_model.verify_pass(t, c, u).total_s for t, c, u in rows], dtype=float)


def draft_step_totals(
    cost_model: CostModel, context_tokens: np.ndarray, *, counts: np.ndarray | None = None
) -> np.ndarray:
    """:meth:`~simspec.costs.base.CostModel.draft_step` of N steps, one per row of
    ``context_tokens`` (N, B); (N,). ``counts`` as in :func:`verify_totals`."""
    drafter = _drafter_roofline(cost_model)
    if drafter is not None:
        return drafter.draft_step_totals(context_tokens, counts)
    ctx = np.asarray(context_tokens)
    if counts is not None:
        ctx = np.repeat(ctx, counts, axis=1)
    return np.array([cost_model.draft_step(row) for row in ctx], dtype=float)


def draft_phase_s(
    cost_model: CostModel, context_tokens: np.ndarray, draft_tokens: np.ndarray
) -> float:
    """Time of one step's draft phase: draft step j runs for every request with k_b ≥ j, at
    its context plus the j − 1 drafts before it
    (:func:`~simspec.costs.base.draft_phase_by_depth`; the same number faster for a roofline
    drafter, :meth:`~simspec.costs.roofline.RooflineCostModel.draft_phase_s`)."""
    drafter = _drafter_roofline(cost_model)
    if drafter is not None:
        return float(drafter.draft_phase_s(context_tokens, draft_tokens))
    return draft_phase_by_depth(cost_model, context_tokens, draft_tokens)


_PASS_FIELDS = (
    *("overhead_s", "moe_s", "attention_s", "other_s", "fallback_terms"),
    *("floors_s", "collectives_s", "tree_attention_s"),
)


class StepCosts(NamedTuple):
    """The prices of N decode steps (one entry per step): draft phase, verify pass by
    component (:class:`~simspec.params.PassCost`'s fields), engine overhead."""

    draft_s: np.ndarray
    overhead_s: np.ndarray
    moe_s: np.ndarray
    attention_s: np.ndarray
    other_s: np.ndarray
    fallback_terms: np.ndarray  # int
    speculation_overhead_s: np.ndarray
    floors_s: np.ndarray
    collectives_s: np.ndarray
    tree_attention_s: np.ndarray

    @property
    def verify_s(self) -> np.ndarray:
        """Each verify pass's total, summed as :attr:`PassCost.total_s` sums it."""
        return (
            self.overhead_s
            + self.moe_s
            + self.attention_s
            + self.other_s
            + self.floors_s
            + self.collectives_s
            + self.tree_attention_s
        )

    @property
    def duration_s(self) -> np.ndarray:
        """Each step's time, summed as :func:`simspec.sim.step.step` sums it: draft phase +
        verify pass + speculation overhead."""
        return (self.draft_s + self.verify_s) + self.speculation_overhead_s

    def verify(self, step: int) -> PassCost:
        """Step ``step``'s verify pass."""
        return PassCost(
            float(self.overhead_s[step]),
            float(self.moe_s[step]),
            float(self.attention_s[step]),
            float(self.other_s[step]),
            int(self.fallback_terms[step]),
            float(self.floors_s[step]),
            float(self.collectives_s[step]),
            float(self.tree_attention_s[step]),
        )


def step_costs(
    cost_model: CostModel,
    fed_tokens: np.ndarray,
    context_tokens: np.ndarray,
    unique_experts: np.ndarray,
    draft_tokens: np.ndarray,
    committed_tokens: np.ndarray,
) -> StepCosts:
    """Price N decode steps of B requests each: row p is one step whose request b feeds
    ``fed_tokens[p, b]`` tokens at context ``context_tokens[p, b]`` after running
    ``draft_tokens[p, b]`` draft steps, and commits ``committed_tokens[p, b]``;
    ``unique_experts`` (N, layers). Entry p equals, bit for bit, what
    :func:`draft_phase_s`, :meth:`~simspec.costs.base.CostModel.verify_pass` and
    :meth:`~simspec.costs.base.CostModel.speculation_overhead_s` give for that step alone
    (the roofline's array forms run the same term functions; any other model is asked step by
    step). The overhead is priced for every row; a step where nobody drafted has none (the
    caller's choice, as in :func:`simspec.sim.step.step`).
    """
    fed, ctx = np.asarray(fed_tokens), np.asarray(context_tokens)
    unique, ks = np.asarray(unique_experts), np.asarray(draft_tokens)
    committed = np.asarray(committed_tokens)
    rows = range(len(fed))
    drafter = _drafter_roofline(cost_model)
    if drafter is not None:
        draft = drafter.draft_phase_totals(ctx, ks)
    else:
        draft = np.array([draft_phase_by_depth(cost_model, ctx[p], ks[p]) for p in rows])
    own = type(cost_model)
    if (
        isinstance(cost_model, RooflineCostModel)
        and own.verify_pass is RooflineCostModel.verify_pass
    ):
        host, moe, attention, other, floors, comm, tree = cost_model.verify_terms(fed, ctx, unique)
        zero = np.zeros(len(fed), np.int64)
        columns = [np.full(len(fed), host), moe, attention, other, zero, np.full(len(fed), floors)]
        columns += [comm, tree]
    else:
        passes = [cost_model.verify_pass(fed[p], ctx[p], unique[p]) for p in rows]
        columns = [np.array([getattr(v, name) for v in passes]) for name in _PASS_FIELDS]
    extra = speculation_overhead_totals(cost_model, committed, ctx)
    fixed_s, moe_s, attention_s, other_s = (np.asarray(c, dtype=float) for c in columns[:4])
    return StepCosts(
        np.asarray(draft, dtype=float),
        fixed_s,
        moe_s,
        attention_s,
        other_s,
        np.asarray(columns[4], dtype=np.int64),
        np.asarray(extra, dtype=float),
        np.asarray(columns[5], dtype=float),
        np.asarray(columns[6], dtype=float),
        np.asarray(columns[7], dtype=float),
    )


def speculation_overhead_totals(
    cost_model: CostModel, accepted_tokens: np.ndarray, context_tokens: np.ndarray
) -> np.ndarray:
    """:meth:`~simspec.costs.base.CostModel.speculation_overhead_s` of N steps, one per row of
    ``accepted_tokens`` and ``context_tokens`` (N, B); (N,). The roofline drafter's array form
    where the model prices it unchanged, else step by step."""
    committed, ctx = np.asarray(accepted_tokens), np.asarray(context_tokens)
    drafter = _drafter_roofline(cost_model)
    own = cost_model.base if type(cost_model) is OffloadCostModel else cost_model
    if drafter is not None and type(own).speculation_overhead_s in (
        RooflineCostModel.speculation_overhead_s,
        CalibratedCostModel.speculation_overhead_s,
    ):
        return np.asarray(drafter.speculation_overhead_totals(committed, ctx), dtype=float)
    return np.array(
        [cost_model.speculation_overhead_s(committed[p], ctx[p]) for p in range(len(ctx))],
        dtype=float,
    )


def tree_draft_phase_s(
    cost_model: CostModel,
    context_tokens: np.ndarray,
    draft_tokens: np.ndarray,
    topk: int | np.ndarray,
) -> float:
    """Draft phase of a tree (:mod:`simspec.text.tree`): ``draft_tokens`` = depth per request.

    Step 1 forwards one row per request (its root; the top ``topk`` of that one distribution
    are the depth-1 candidates); each later step forwards the ``topk`` nodes each request
    expands, i.e. ``topk`` rows per request (``topk`` (B,): each request's own). ``topk = 1`` is
    :func:`draft_phase_s`
    (:func:`~simspec.costs.base.tree_draft_phase_by_depth`; the same number faster for a
    roofline drafter, :meth:`~simspec.costs.roofline.RooflineCostModel.tree_draft_phase_s`).
    """
    drafter = _drafter_roofline(cost_model)
    if drafter is not None:
        return drafter.tree_draft_phase_s(context_tokens, draft_tokens, topk)
    return tree_draft_phase_by_depth(cost_model, context_tokens, draft_tokens, topk)


def _drafter_roofline(cost_model: CostModel) -> RooflineCostModel | None:
    """The roofline that prices ``cost_model``'s draft steps unchanged, if there is one (an
    offloading wrapper's drafts are its base model's: the drafter's weights stay resident;
    not when its runtime adds host time to each draft pass)."""
    if type(cost_model) is OffloadCostModel:
        return None if cost_model.draft_host_s else _drafter_roofline(cost_model.base)
    own = type(cost_model).draft_step
    if isinstance(cost_model, RooflineCostModel) and own is RooflineCostModel.draft_step:
        return cost_model
    if isinstance(cost_model, CalibratedCostModel) and own is CalibratedCostModel.draft_step:
        return cost_model.drafter_costs
    return None
