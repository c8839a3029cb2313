"""How many drafts each request of a step makes: the policy asked depth by depth for the batch.

Draft step j runs once for every request still drafting, so the whole batch decides depth j
together (:mod:`simspec.sim.marginal`): the requests that drafted j − 1 tokens are asked at
their share of extending all of them without the step's fixed part; if the policy read that
price, those that agreed are asked at their share with it, and unless one of them still agrees,
nobody drafts at depth j. Policies are pure, so asking twice is harmless.

A policy is asked in one of three ways, all giving the same answer
(``tests/sim/test_fast_path.py``, ``tests/policies``):

* once per step (``draft_lengths``, the batch fast path: ``fixed``, ``batch_table``,
  ``adaptive_ema``; the engine calls it directly);
* once per depth (``continue_drafting_batch`` with a :class:`~simspec.policies.base.DepthView`:
  ``threshold``, ``cost_aware``);
* once per request and depth, with a :class:`~simspec.policies.base.DecodeState` each (any
  other policy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simspec.policies.base import (
    BatchView,
    BudgetPolicy,
    DecodeState,
    DepthView,
    depth_decisions,
    reads_confidence,
)
from simspec.sim.marginal import StepPlan


@dataclass
class _Price:
    """The share Δc(A) of one depth's extension set A, computed only if a policy reads it."""

    plan: StepPlan
    requests: tuple[int, ...]
    step_overhead: bool = True
    value: float | None = None

    def __call__(self) -> float:
        if self.value is None:
            self.value = self.plan.share_cost_s(self.requests, step_overhead=self.step_overhead)
        return self.value


@dataclass(frozen=True)
class StepRequests:
    """What the per-token questions read of each request of the batch (row b = request b)."""

    request_id: np.ndarray  # (B,)
    position: np.ndarray  # (B,) output tokens committed
    context_tokens: np.ndarray  # (B,)
    confidences: np.ndarray  # (B, >= cap): the drafter's confidence of each draft slot
    #: Per request, accepted and drafted tokens of its past steps (oldest first); read only by
    #: policies asked per request (may be empty for the others).
    accepted_history: Sequence[tuple[int, ...]]
    drafted_history: Sequence[tuple[int, ...]]


def decide_step(
    policy: BudgetPolicy, requests: StepRequests, plan: StepPlan, view: BatchView
) -> tuple[np.ndarray, np.ndarray]:
    """Ask ``policy`` depth by depth how many drafts each request makes this step.

    Returns ``(draft_tokens, probes)``: ``probes[b] = 1`` when ``b`` was asked, declined and the
    policy reads confidences, i.e. draft step k_b + 1 ran to show the confidence it declined on
    (charged in the draft phase, its token never verified). Pure apart from updating ``plan``.
    """
    batch = len(requests.request_id)
    ks = np.zeros(batch, dtype=np.int64)
    probes = np.zeros(batch, dtype=np.int64)
    probing = reads_confidence(policy)
    per_depth = depth_decisions(policy)
    conf = requests.confidences

    def asks(ids: np.ndarray, k: int, price: _Price) -> np.ndarray:
        """The policy's answer for requests ``ids`` at depth ``k`` (bool per request)."""
        if per_depth is not None:
            return np.asarray(
                per_depth(
                    DepthView(
                        drafted=k,
                        confidences=conf[ids, :k],
                        next_confidence=conf[ids, k],
                        request_id=requests.request_id[ids],
                        position=requests.position[ids],
                        context_tokens=requests.context_tokens[ids],
                        max_draft_tokens=view.max_draft_tokens,
                        batch_size=view.batch_size,
                        batch_accepted_history=view.batch_accepted_history,
                        time_per_token_s=view.time_per_token_s,
                        marginal_cost_s=price,
                        memory=view.memory,
                    )
                ),
                dtype=bool,
            )
        answers = []
        for b in ids.tolist():
            slots = conf[b].tolist()
            answers.append(
                policy.continue_drafting(
                    DecodeState(
                        request_id=int(requests.request_id[b]),
                        position=int(requests.position[b]),
                        context_tokens=int(requests.context_tokens[b]),
                        drafted=k,
                        confidences=tuple(slots[:k]),
                        next_confidence=slots[k],
                        max_draft_tokens=view.max_draft_tokens,
                        batch_size=view.batch_size,
                        accepted_history=requests.accepted_history[b],
                        drafted_history=requests.drafted_history[b],
                        batch_accepted_history=view.batch_accepted_history,
                        time_per_token_s=view.time_per_token_s,
                        marginal_cost_s=price,
                        memory=view.memory,
                    )
                )
            )
        return np.array(answers, dtype=bool)

    drafting = np.arange(batch)
    for k in range(view.cap):
        price = _Price(plan, tuple(drafting.tolist()), step_overhead=False)
        extend = drafting[asks(drafting, k, price)]
        if len(extend) and price.value is not None:  # does the step's fixed part pay for itself?
            whole = _Price(plan, tuple(extend.tolist()))
            if not asks(extend, k, whole).any():
                extend = extend[:0]
        if probing:
            declined = np.ones(batch, dtype=bool)
            declined[extend] = False
            probes[drafting[declined[drafting]]] = 1
        plan.add_drafts(extend.tolist())
        ks[extend] += 1
        drafting = extend
        if not len(drafting):
            break
    return ks, probes
