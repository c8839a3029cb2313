"""The budget-policy protocol: how many draft tokens each request of a step speculates.

Before each decode iteration the engine hands the policy a read-only :class:`BatchView` of the
batch and asks ONE question, :meth:`BudgetPolicy.decide`: the drafts of every request, each
within ``0..view.cap``. A per-request policy answers it request by request (batch size 1 is one
row). The view holds what a real serving engine knows at that moment: each request's id,
position and context, the batch size, the batch's recent acceptance, a running estimate of the
time per committed token, the policy's own memory, and, for a policy that reads them, the
drafter's confidence for each draft slot and a cost oracle (:meth:`BatchView.by_depth`). It
never holds the match lengths, so a policy cannot peek at the future.

**Reading a confidence costs a draft step.** A chain drafter learns the confidence of draft
k + 1 only by running draft step k + 1. A policy that reads ``view.confidences`` declares
``reads_confidence = True`` (class attribute; the view holds None otherwise); when it then
stops request b at k_b < ``view.cap``, the engine charges that step (a *probe*: it runs in the
draft phase, its token is discarded and never verified).

**Shared costs are priced as a batch decision.** A policy that weighs one more draft against
its price (``cost_aware``) decides depth by depth for the whole batch through
:meth:`BatchView.by_depth`, which asks it at each depth which requests extend, at their share
of the step's cost (:mod:`simspec.sim.marginal`).

**Tree shapes.** A *tree-aware* policy decides a shape per request, not only a depth: its
:meth:`Policy.tree_family` names a family of shapes (:mod:`simspec.text.shapes`: SGLang's
(steps, topk, num_draft_tokens), entry 0 no speculation), and its :meth:`~BudgetPolicy.decide`
answers with an index into that family per request. That is the whole change to the protocol:
the answer stays one int per request, and the engine turns each index into the request's
depth, topk and verified-token budget, drafts, feeds and prices that tree
(:mod:`simspec.sim.tree`; ``[speculation]``'s fixed shape is then not read). A tree-aware
policy that reads costs gets :attr:`BatchView.shape_prices`: each shape's price per request
if the whole batch took it. A chain policy returns None from ``tree_family`` and nothing about
it changes (a chain of k drafts is the shape (k, 1, k + 1)).

**Memory.** Policies are frozen dataclasses: their fields are their parameters. A policy that
needs memory across steps (an EMA, a current tier) threads it functionally: ``initial_memory()``
gives the starting value, the engine passes the current value in ``BatchView.memory`` and, after
every verify pass, replaces it with ``observe(memory, feedback)``. No policy object ever mutates.
:class:`Policy` gives the defaults (no confidence read, no clock read, no memory) that most
policies keep.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple, Protocol

import numpy as np

from simspec.registry import Registry
from simspec.text.shapes import TreeShape

#: A policy's answer at one depth of :meth:`BatchView.by_depth`: ``agree(ids, drafted,
#: price)`` -> one bool per request of ``ids`` (those that drafted ``drafted`` tokens so far),
#: True to draft one more; ``price()`` is each one's share of the cost if they all do.
DepthRule = Callable[[np.ndarray, int, Callable[[], float]], np.ndarray]


class BatchView(NamedTuple):
    """What a policy may look at before a step's draft phase (row b = request b); a tuple,
    so it costs little to build once per step."""

    batch_size: int  # requests in this step's verify pass
    cap: int  # the most drafts per request this step (the policy's budget_cap within K_max)
    max_draft_tokens: int  # the drafter's cap K_max
    request_id: np.ndarray  # (B,)
    position: np.ndarray  # (B,) output tokens committed so far
    context_tokens: np.ndarray  # (B,) prompt + committed output tokens
    batch_accepted_history: tuple[float, ...] = ()  # mean accepted drafts per request, past steps
    #: Running GPU time per committed token of the batch, s (NaN unless the policy reads_costs).
    time_per_token_s: float = 0.0
    memory: Any = None  # the policy's own memory (module docstring)
    #: (B, cap + 1): the drafter's confidence for draft slots 1..cap + 1 of each request; None
    #: unless the policy declares ``reads_confidence``.
    confidences: np.ndarray | None = None
    #: The engine's depth-by-depth batch decision (:meth:`by_depth`); None: nothing is priced
    #: (a policy that does not declare ``reads_costs``).
    depth_decider: Callable[[int, DepthRule], np.ndarray] | None = None
    #: A tree-aware policy that reads costs: ``shape_prices()`` -> (S,) seconds, each shape of
    #: its family priced per request as if the whole batch took it, no speculation's price
    #: subtracted (:func:`simspec.sim.marginal.shape_shares_s`); None otherwise.
    shape_prices: Callable[[], np.ndarray] | None = None

    def by_depth(self, limit: int, agree: DepthRule) -> np.ndarray:
        """Drafts per request decided depth by depth, up to ``limit``, at shared prices.

        At depth j the requests that drafted j tokens are asked ``agree(ids, j, price)`` with
        ``price`` their share of extending all of them without the fixed part of a draft step
        nobody runs yet; if the policy read that price, those that agreed are asked again at
        their share with it, and unless one of them still agrees nobody drafts at depth j + 1
        (:mod:`simspec.sim.marginal`).
        """
        if self.depth_decider is None:
            raise ValueError("this view prices nothing: built without a depth_decider")
        return self.depth_decider(limit, agree)


class StepFeedback(NamedTuple):
    """What a policy with memory learns after each verify pass."""

    batch_size: int
    drafted: int  # Σ_b k_b
    accepted: int  # Σ_b min(k_b, m_b)
    step_s: float  # draft + verify time of the step (NaN unless the policy reads_costs)
    #: (B,) what the policy answered for each request (a tree-aware policy's shape indices).
    decisions: np.ndarray | None = None


class BudgetPolicy(Protocol):
    """A speculation-budget policy (see the module docstring)."""

    #: True if the policy reads ``BatchView.confidences`` (and pays a probe to stop early).
    reads_confidence: ClassVar[bool]
    #: True if the policy reads time while deciding: ``BatchView.time_per_token_s``,
    #: :meth:`BatchView.by_depth` or ``StepFeedback.step_s``. A run of a policy that does not
    #: may decide every step before pricing any (:mod:`simspec.sim.deferred`); it then sees
    #: NaN in those fields.
    reads_costs: ClassVar[bool]
    #: True if the policy decides each request from that request's own row of the view alone
    #: (its id, position, context and confidences, within the cap): no memory, and neither the
    #: batch size nor the batch's history read. Requests that never share a batch may then be
    #: decided in one call, each as its own row (:mod:`simspec.sim.deferred`'s lanes).
    per_request: ClassVar[bool]

    def decide(self, view: BatchView) -> np.ndarray:
        """Draft tokens of every request of the step, (B,) ints within ``0..view.cap``."""
        ...

    def budget_cap(self, max_draft_tokens: int) -> int:
        """The most draft tokens this policy can ask for, given the drafter's cap."""
        ...

    def initial_memory(self) -> Any:
        """The policy's memory before the first step."""
        ...

    def observe(self, memory: Any, feedback: StepFeedback) -> Any:
        """The policy's memory after a verify pass."""
        ...

    def tree_family(self) -> tuple[TreeShape, ...] | None:
        """The shapes :meth:`decide` indexes (module docstring); None: it answers depths."""
        ...


class Policy:
    """Defaults of :class:`BudgetPolicy`: no confidence read, no memory."""

    __slots__ = ()
    reads_confidence: ClassVar[bool] = False
    reads_costs: ClassVar[bool] = False
    per_request: ClassVar[bool] = False

    def initial_memory(self) -> Any:
        """No memory."""
        return None

    def observe(self, memory: Any, feedback: StepFeedback) -> Any:
        """Memory unchanged."""
        return memory

    def tree_family(self) -> tuple[TreeShape, ...] | None:
        """A chain policy: it answers depths."""
        return None


def uniform(view: BatchView, draft_tokens: int) -> np.ndarray:
    """Every request drafts ``draft_tokens``, within the step's and the drafter's caps (a
    read-only array: the same answer is handed out again)."""
    k = min(draft_tokens, view.max_draft_tokens, view.cap)
    return _constant(view.batch_size, max(k, 0))


@functools.lru_cache(maxsize=1024)
def _constant(size: int, value: int) -> np.ndarray:
    """``np.full(size, value)`` of int64, read-only, made once per (size, value)."""
    array = np.full(size, value, dtype=np.int64)
    array.flags.writeable = False
    return array


POLICIES: Registry[BudgetPolicy] = Registry("policy", package="simspec.policies")
