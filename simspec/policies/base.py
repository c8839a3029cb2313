"""The budget-policy protocol: how many draft tokens a request speculates this step.

The engine asks a policy before each draft token whether to keep drafting
(:meth:`BudgetPolicy.continue_drafting`), handing it a read-only :class:`DecodeState` snapshot.
The snapshot holds what a real serving engine would know at that moment: the request's position
and context, the confidences of the drafts made so far in this step and the drafter's confidence
for the next one (we model confidence as available before the token is drafted, like an
acceptance-prediction head), the request's recent acceptance history and the batch size. It never
holds the match length, so a policy cannot peek at the future. Policies are frozen dataclasses:
their fields are their parameters, and they keep no state between calls (any memory, such as an
EMA of accepted lengths, is recomputed from the history in the snapshot).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from simspec.registry import Registry


@dataclass(frozen=True, slots=True)
class DecodeState:
    """What a policy may look at before draft token ``drafted + 1`` of one request."""

    request_id: int
    position: int  # output tokens committed so far
    context_tokens: int  # prompt + committed output tokens
    drafted: int  # draft tokens already made this step
    confidences: tuple[float, ...]  # confidences of those drafts
    next_confidence: float  # drafter's confidence for the next draft token
    max_draft_tokens: int  # the drafter's cap K_max
    batch_size: int  # requests in this step's verify pass
    accepted_history: tuple[int, ...]  # accepted drafts per past step of this request, oldest first
    drafted_history: tuple[int, ...]  # drafted tokens per past step of this request
    #: Extension point: estimated marginal cost (s) of one more draft token, when the engine
    #: provides one (cost-aware policies); None otherwise.
    marginal_cost_s: Callable[[], float] | None = None


class BudgetPolicy(Protocol):
    """A speculation-budget policy (see the module docstring)."""

    def continue_drafting(self, state: DecodeState) -> bool:
        """True to draft one more token for this request in this step."""
        ...

    def budget_cap(self, max_draft_tokens: int) -> int:
        """The most draft tokens this policy can ask for, given the drafter's cap."""
        ...


POLICIES: Registry[BudgetPolicy] = Registry("policy")
