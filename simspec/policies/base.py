"""The budget-policy protocol: how many draft tokens a request speculates this step.

The engine asks a policy before each draft token whether to keep drafting
(:meth:`BudgetPolicy.continue_drafting`), handing it a read-only :class:`DecodeState` snapshot.
The snapshot holds what a real serving engine would know at that moment: the request's position
and context, the confidences of the drafts made so far in this step and the drafter's confidence
for the next one, the request's and the batch's recent acceptance, the batch size, a running
estimate of the time per committed token, and a cost oracle for one more draft token (the
request's share of the batch's extension at this depth, :mod:`simspec.sim.marginal`). It never
holds the match length, so a policy cannot peek at the future.

**Reading the next confidence costs a draft step.** A chain drafter learns the confidence of
draft k+1 only by running draft step k+1. A policy that reads ``next_confidence`` declares
``reads_confidence = True`` (class attribute); when it then declines, the engine charges that
step (a *probe*: it runs in the draft phase, its token is discarded and never verified). Today
``threshold`` and ``cost_aware`` read it; ``fixed``, ``adaptive_ema``, ``batch_table`` and the
oracle's replayed plan do not, and are never charged a probe. A policy that does not declare it
must decide the same whatever ``next_confidence`` is (``tests/policies`` checks every registered
policy).

Policies are frozen dataclasses: their fields are their parameters. A policy that needs memory
across steps (an EMA, a current tier) threads it functionally: ``initial_memory()`` gives the
starting value, the engine passes the current value in ``DecodeState.memory`` and, after every
verify pass, replaces it with ``observe(memory, feedback)``. No policy object ever mutates.

**The batch fast path.** A policy whose decision needs nothing per token (no confidence, no
price, no per-request history: ``fixed``, ``batch_table``) may also offer
``draft_lengths(view: BatchView) -> np.ndarray``: the draft tokens of every request of the
step in one call, each within ``0..view.cap``. The engine then asks it once per step instead of
once per draft token; the answer must equal what ``continue_drafting`` decides depth by depth
(``tests/sim/test_fast_path.py`` checks every registered policy that offers it).

**The per-depth fast path.** A policy that decides per token but from nothing per request
besides the step's confidences (``threshold``, ``cost_aware``) may offer
``continue_drafting_batch(view: DepthView) -> np.ndarray``: one bool per request asked at the
same depth, each what ``continue_drafting`` answers for that request's ``DecodeState`` (row b
of the view's arrays is what state b would hold). The engine then asks it once per depth
instead of once per request and builds no per-token objects (``tests/policies`` checks every
registered policy that offers it against its ``continue_drafting``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from simspec.registry import Registry


@dataclass(frozen=True, slots=True)
class DecodeState:
    """What a policy may look at before draft token ``drafted + 1`` of one request."""

    request_id: int
    position: int  # output tokens committed so far
    context_tokens: int  # prompt + committed output tokens
    drafted: int  # draft tokens already made this step
    confidences: tuple[float, ...]  # confidences of those drafts
    #: Drafter's confidence for the next draft token. Reading it runs that draft step: a policy
    #: that reads it declares ``reads_confidence = True`` and pays a probe step when it declines.
    next_confidence: float
    max_draft_tokens: int  # the drafter's cap K_max
    batch_size: int  # requests in this step's verify pass
    accepted_history: tuple[int, ...]  # accepted drafts per past step of this request, oldest first
    drafted_history: tuple[int, ...]  # drafted tokens per past step of this request
    batch_accepted_history: tuple[float, ...] = ()  # mean accepted drafts per request, past steps
    time_per_token_s: float = 0.0  # running GPU time per committed token of the batch, s
    #: Estimated increase (s) of this step's draft + verify time per request if this request and
    #: the others asked at the same depth draft one more token: the shared draft step and verify
    #: growth (incl. the experts expected to join the union) split evenly among them
    #: (:mod:`simspec.sim.marginal`); at batch size 1, this request's own marginal cost.
    marginal_cost_s: Callable[[], float] | None = None
    memory: Any = None  # the policy's own memory (see the module docstring)


@dataclass(frozen=True, slots=True)
class BatchView:
    """What every policy call of one step shares (the batch fast path's argument)."""

    batch_size: int  # requests in this step's verify pass
    batch_accepted_history: tuple[float, ...]  # mean accepted drafts per request, past steps
    time_per_token_s: float  # running GPU time per committed token of the batch, s
    memory: Any  # the policy's own memory
    max_draft_tokens: int  # the drafter's cap K_max
    cap: int  # the most drafts per request this step (policy's budget_cap within K_max)


@dataclass(frozen=True, slots=True)
class DepthView:
    """What the requests asked at one depth of one step see (the per-depth fast path).

    Scalars are shared by every request asked; row b of each array is what request b's
    :class:`DecodeState` would hold. No per-request histories: a policy that reads them decides
    through ``continue_drafting``.
    """

    drafted: int  # draft tokens each request asked has already made this step
    confidences: np.ndarray  # (n, drafted): confidences of those drafts
    next_confidence: np.ndarray  # (n,): the drafter's confidence for the next draft
    request_id: np.ndarray  # (n,)
    position: np.ndarray  # (n,)
    context_tokens: np.ndarray  # (n,)
    max_draft_tokens: int
    batch_size: int
    batch_accepted_history: tuple[float, ...] = ()
    time_per_token_s: float = 0.0
    #: The share every request asked pays if they all draft one more token (one shared price,
    #: as ``DecodeState.marginal_cost_s`` of each of them).
    marginal_cost_s: Callable[[], float] | None = None
    memory: Any = None

    def chain_confidence(self) -> np.ndarray:
        """c_1·…·c_drafted·c_next of every request, multiplied in that order (as ``math.prod``
        of the confidences times the next one)."""
        product = np.ones(len(self.next_confidence))
        for j in range(self.drafted):
            product = product * self.confidences[:, j]
        return product * self.next_confidence


@dataclass(frozen=True, slots=True)
class StepFeedback:
    """What a policy with memory learns after each verify pass."""

    batch_size: int
    drafted: int  # Σ_b k_b
    accepted: int  # Σ_b min(k_b, m_b)
    step_s: float  # draft + verify time of the step


class BudgetPolicy(Protocol):
    """A speculation-budget policy (see the module docstring)."""

    # A policy that reads ``DecodeState.next_confidence`` also sets the class attribute
    # ``reads_confidence: ClassVar[bool] = True`` (module docstring); absent means False.
    # A policy that decides per batch may also offer ``draft_lengths(view: BatchView) ->
    # np.ndarray`` (the batch fast path, module docstring); absent means per-token calls only.

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


def reads_confidence(policy: BudgetPolicy) -> bool:
    """True if ``policy`` reads the next draft's confidence (pays a probe step to decline)."""
    return bool(getattr(policy, "reads_confidence", False))


def batch_draft_lengths(policy: BudgetPolicy) -> Callable[[BatchView], np.ndarray] | None:
    """The policy's batch fast path ``draft_lengths``, or None when it decides per token."""
    if reads_confidence(policy):
        return None
    return getattr(policy, "draft_lengths", None)


def depth_decisions(policy: BudgetPolicy) -> Callable[[DepthView], np.ndarray] | None:
    """The policy's per-depth fast path ``continue_drafting_batch``, or None."""
    return getattr(policy, "continue_drafting_batch", None)


def observe(policy: BudgetPolicy, memory: Any, feedback: StepFeedback) -> Any:
    """The policy's memory after ``feedback`` (unchanged for memoryless policies)."""
    update = getattr(policy, "observe", None)
    return update(memory, feedback) if update is not None else memory


POLICIES: Registry[BudgetPolicy] = Registry("policy", package="simspec.policies")
