"""The engine's depth-by-depth batch decision, behind :meth:`BatchView.by_depth`.

Draft step j runs once for every request still drafting, so a policy that weighs a draft
against its price decides depth j for the whole batch together (:mod:`simspec.sim.marginal`):
the requests that drafted j − 1 tokens are asked at their share of extending all of them
without the step's fixed part; if the policy read that price, those that agreed are asked at
their share with it, and unless one of them still agrees, nobody drafts at depth j. Policies are
pure, so asking twice is harmless.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simspec.policies.base import DepthRule
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


def depth_decider(plan_for_step: Callable[[], StepPlan]) -> Callable[[int, DepthRule], np.ndarray]:
    """:meth:`~simspec.policies.base.BatchView.by_depth` for one step; the step's
    :class:`StepPlan` is built on first use (pure apart from updating it)."""

    def by_depth(limit: int, agree: DepthRule) -> np.ndarray:
        plan = plan_for_step()
        ks = np.zeros(len(plan.contexts), dtype=np.int64)
        drafting = np.arange(len(ks))
        for k in range(limit):
            price = _Price(plan, tuple(drafting.tolist()), step_overhead=False)
            extend = drafting[np.asarray(agree(drafting, k, price), dtype=bool)]
            if len(extend) and price.value is not None:  # does the fixed part pay for itself?
                whole = _Price(plan, tuple(extend.tolist()))
                if not np.asarray(agree(extend, k, whole), dtype=bool).any():
                    extend = extend[:0]
            plan.add_drafts(extend.tolist())
            ks[extend] += 1
            drafting = extend
            if not len(drafting):
                break
        return ks

    return by_depth
