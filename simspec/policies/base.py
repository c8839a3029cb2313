"""The budget-policy protocol: how many draft tokens a request speculates this step.

The engine asks a policy before each draft token whether to keep drafting
(:meth:`BudgetPolicy.continue_drafting`), handing it a read-only :class:`DecodeState` snapshot.
The snapshot holds what a real serving engine would know at that moment: the request's position
and context, the confidences of the drafts made so far in this step and the drafter's confidence
for the next one (we model confidence as available before the token is drafted, like an
acceptance-prediction head), the request's and the batch's recent acceptance, the batch size,
a running estimate of the time per committed token, and a cost oracle for one more draft token.
It never holds the match length, so a policy cannot peek at the future.

Policies are frozen dataclasses: their fields are their parameters. A policy that needs memory
across steps (an EMA, a current tier) threads it functionally: ``initial_memory()`` gives the
starting value, the engine passes the current value in ``DecodeState.memory`` and, after every
verify pass, replaces it with ``observe(memory, outcome)``. No policy object ever mutates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

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
    batch_accepted_history: tuple[float, ...] = ()  # mean accepted drafts per request, past steps
    time_per_token_s: float = 0.0  # running GPU time per committed token of the batch, s
    #: Estimated increase (s) of this step's draft + verify time if this request drafts one
    #: more token, including the experts it is expected to add to the batch's union.
    marginal_cost_s: Callable[[], float] | None = None
    memory: Any = None  # the policy's own memory (see the module docstring)


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What a policy with memory learns after each verify pass."""

    batch_size: int
    drafted: int  # Σ_b k_b
    accepted: int  # Σ_b min(k_b, m_b)
    step_s: float  # draft + verify time of the step


class BudgetPolicy(Protocol):
    """A speculation-budget policy (see the module docstring)."""

    def continue_drafting(self, state: DecodeState) -> bool:
        """True to draft one more token for this request in this step."""
        ...

    def budget_cap(self, max_draft_tokens: int) -> int:
        """The most draft tokens this policy can ask for, given the drafter's cap."""
        ...


def initial_memory(policy: BudgetPolicy) -> Any:
    """The policy's starting memory (None for memoryless policies)."""
    start = getattr(policy, "initial_memory", None)
    return start() if start is not None else None


def observe(policy: BudgetPolicy, memory: Any, outcome: StepOutcome) -> Any:
    """The policy's memory after ``outcome`` (unchanged for memoryless policies)."""
    update = getattr(policy, "observe", None)
    return update(memory, outcome) if update is not None else memory


POLICIES: Registry[BudgetPolicy] = Registry("policy", package="simspec.policies")
