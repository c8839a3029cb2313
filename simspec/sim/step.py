"""One decode iteration as a pure function: what the batch drafts, verifies, commits, and how
long it takes.

:func:`step` reads an :class:`EngineState` (the admitted requests, the recent steps, the
policy's memory) and returns a :class:`StepOutcome`; it never touches SimPy, never changes the
state and draws nothing of its own (the text and its routing are fixed by the reference set).
The scheduler loop (:func:`simspec.sim.schedule.schedule`) has its driver wait
``StepOutcome.duration_s`` and then applies the outcome (:meth:`EngineState.apply`). Per iteration:

* the policy decides how many drafts k_b each request makes (one call over the batch,
  :meth:`~simspec.policies.base.BudgetPolicy.decide`; depth by depth at shared prices when it
  asks, :mod:`simspec.sim.decide`); a tree-aware policy answers an index into its family of
  shapes instead, and request b's tree is that shape's (depth k_b, its topk and budget);
* the draft phase runs draft step j for every request with k_b >= j, plus a *probe* step for a
  request whose policy read the next confidence and declined (charged, never verified);
* ONE target pass verifies every request's k_b + 1 tokens; request b commits
  min(k_b, m_b) + 1, m_b being its match length (draft trees: :mod:`simspec.sim.tree`);
* a real engine's bookkeeping of a speculative step is added
  (:meth:`~simspec.costs.base.CostModel.speculation_overhead_s`).
"""

from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from simspec.costs.batch import draft_phase_s
from simspec.costs.offload import LoadedPass
from simspec.params import PassCost
from simspec.policies.base import BatchView, BudgetPolicy, StepFeedback
from simspec.sim.decide import depth_decider
from simspec.sim.expert_cache import ExpertCache
from simspec.sim.marginal import StepPlan, UnionModel, shape_shares_s
from simspec.sim.records import RequestRecord
from simspec.sim.setup import EngineSetup
from simspec.sim.state import ActiveBatch, RequestTable
from simspec.sim.tree import TreeSpeculation, family_trees
from simspec.text.shapes import TreeShape

HISTORY_STEPS = 32  # past steps of acceptance a policy can see

_add = np.add.reduce  # what ndarray.sum calls, without its Python wrapper


@dataclass
class StepHistory:
    """The batch's recent steps, as policies see them (the last :data:`HISTORY_STEPS`); the
    times, tokens and trials only for a policy that reads costs (they price its view)."""

    step_s: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_STEPS))
    tokens: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY_STEPS))
    #: Mean accepted drafts per request of each step.
    batch_accepted: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_STEPS))
    successes: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY_STEPS))
    trials: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY_STEPS))


@dataclass
class EngineState:
    """Everything that changes between iterations, and the run's constants derived once."""

    table: RequestTable
    active: ActiveBatch
    history: StepHistory
    memory: Any  # the policy's memory
    arrival_s: np.ndarray  # per request; closed loop: set when it is queued
    cap: int  # the most drafts per request a step asks for
    union_model: UnionModel
    analytic: bool  # analytic routing: expected unions, not sampled ones
    reads_costs: bool  # the policy's: only then are the step times and trials kept
    reserved_bytes: float = 0.0  # KV reserved by the admitted requests
    finished: int = 0
    #: A tree-aware policy's shapes (None: it answers depths), as (S, 3) ints (steps, topk,
    #: num_draft_tokens), and the trees they grow on this run's text.
    family: tuple[TreeShape, ...] | None = None
    family_table: np.ndarray | None = None
    family_trees: TreeSpeculation | None = None
    #: The GPU's expert cache when experts are offloaded and routing is sampled (analytic
    #: routing prices the expected hit rate instead).
    cache: ExpertCache | None = None

    @classmethod
    def start(cls, setup: EngineSetup, policy: BudgetPolicy) -> EngineState:
        """The state before the first arrival."""
        refs, shape = setup.references, setup.references.shape
        family = policy.tree_family()
        shapes = None if family is None else np.array(family, dtype=np.int64).reshape(-1, 3)
        return cls(
            table=RequestTable(
                refs, setup.workload.num_requests, setup.max_draft_tokens, setup.tensor_parallel
            ),
            active=ActiveBatch(),
            history=StepHistory(),
            memory=policy.initial_memory(),
            arrival_s=np.array(setup.arrival_s, dtype=float),
            cap=min(policy.budget_cap(setup.max_draft_tokens), setup.max_draft_tokens),
            union_model=UnionModel(
                shape.num_experts,
                shape.experts_per_token,
                shape.num_moe_layers,
                setup.mean_draft_overlap,
            ),
            analytic=refs.routing.mode == "analytic",
            reads_costs=policy.reads_costs,
            family=family,
            family_table=shapes,
            family_trees=(
                None
                if shapes is None
                else family_trees(
                    refs, setup.rank_decay, setup.max_draft_tokens, int(shapes[:, 1].max())
                )
            ),
            cache=(
                ExpertCache(
                    setup.offload.model.capacity,
                    setup.offload.model.policy,
                    refs.inclusion_probabilities,
                )
                if setup.offload is not None and refs.routing.mode != "analytic"
                else None
            ),
        )

    def admissible(
        self, waiting: deque[int], max_batch: int, kv_capacity_bytes: float
    ) -> list[int]:
        """Pop from ``waiting`` the requests admitted now: arrival order, batch limit, KV
        capacity (reserved for the whole output; a request alone is always admitted)."""
        admitted: list[int] = []
        while waiting and len(self.active) + len(admitted) < max_batch:
            need = self.table.kv_bytes[waiting[0]]
            if self.reserved_bytes + need > kv_capacity_bytes and (len(self.active) or admitted):
                break
            admitted.append(waiting.popleft())
            self.reserved_bytes += need
        return admitted

    def admit(self, admitted: list[int], now: float) -> None:
        """Add the requests whose prefill ended at ``now``."""
        self.active.admit(self.table, admitted, self.arrival_s, now)

    def apply(
        self, outcome: StepOutcome, now: float, *, lanes: bool = False
    ) -> list[RequestRecord]:
        """Commit ``outcome``'s tokens at ``now``; returns the requests it finished. A step of
        lanes (:func:`step`) leaves the history alone: its policy reads none."""
        active, history = self.active, self.history
        batch = len(active)
        active.advance(outcome.committed, outcome.accepted, outcome.drafts)
        done = active.position >= active.output
        finished: list[RequestRecord] = []
        if np.count_nonzero(done):
            for b in np.flatnonzero(done).tolist():
                finished.append(
                    RequestRecord(
                        int(active.request_id[b]),
                        float(active.arrival_s[b]),
                        float(active.first_token_s[b]),
                        now,
                        int(active.prompt[b]),
                        int(active.output[b]),
                        int(active.position[b]),
                        int(active.steps[b]),
                        int(active.drafted[b]),
                        int(active.accepted[b]),
                    )
                )
                self.reserved_bytes -= float(active.kv_bytes[b])
            self.finished += len(finished)
            active.keep(~done)
        if lanes:
            return finished
        accepted_total = outcome.accepted_total
        history.batch_accepted.append(accepted_total / batch)
        if self.reads_costs:  # what its time per token and its prices are estimated from
            history.step_s.append(outcome.duration_s)
            history.tokens.append(accepted_total + batch)
            judged = accepted_total + int(np.count_nonzero(outcome.accepted < outcome.asked))
            if judged:
                history.successes.append(accepted_total)
                history.trials.append(judged)
        self.memory = outcome.memory
        if self.cache is not None and outcome.needed is not None:
            self.cache.after(outcome.needed)
        return finished


def mean_unique(unique: np.ndarray) -> float | np.ndarray:
    """Mean over MoE layers of distinct routed experts: of one pass ``unique`` (layers,) (a
    float), or of each row of ``unique`` (N, layers); the same pairwise sum either way (a
    row of a C-ordered array is summed as a contiguous vector)."""
    layers = unique.shape[-1]
    if not layers:
        return 0.0 if unique.ndim == 1 else np.zeros(len(unique))
    total = _add(unique, axis=-1)
    return float(total) / layers if unique.ndim == 1 else total / layers


class StepOutcome(NamedTuple):
    """What one iteration did (row b = request b of the batch, admission order)."""

    duration_s: float  # draft phase + verify pass + speculation overhead (NaN: not priced)
    draft_s: float
    verify: PassCost | None  # None: not priced
    speculation_overhead_s: float
    asked: np.ndarray  # (B,) drafts the policy asked for
    drafts: np.ndarray  # (B,) draft tokens verified (a tree's nodes for draft trees)
    accepted: np.ndarray  # (B,) accepted drafts
    committed: np.ndarray  # (B,) accepted + 1
    # The next three: one per lane for a step of lanes (:func:`step`).
    drafted_total: Any  # Σ_b drafts
    accepted_total: Any  # Σ_b accepted
    probes: Any  # draft steps run only to read a declined confidence
    #: Mean over MoE layers of distinct routed experts in the pass (NaN: not priced; the
    #: deferred schedule takes the mean of ``unique`` with the prices).
    unique_experts: float
    memory: Any  # the policy's memory after this step
    contexts: np.ndarray  # (B,) context tokens at the step
    run: np.ndarray  # (B,) draft steps run (drafts + probes)
    unique: np.ndarray  # (layers,) distinct routed experts of the verify pass; lanes: (B, layers)
    #: Offloaded experts: the verify pass's loads (None: every expert resident) and, with
    #: sampled routing, the experts it used per layer ((layers, N), the cache's update).
    loaded: LoadedPass | None = None
    needed: np.ndarray | None = None


def decide(
    state: EngineState, policy: BudgetPolicy, setup: EngineSetup, contexts: np.ndarray
) -> np.ndarray:
    """The drafts each request asks for: the policy's answer to the step's batch view
    (``contexts``: the requests' context tokens)."""
    active, history, costs = state.active, state.history, setup.cost_model
    batch = len(active.request_id)
    if not policy.reads_costs:  # the steps may not be priced yet (simspec.sim.deferred)
        time_per_token = math.nan
    elif not history.step_s:  # no history yet: price a token at a plain decode pass / B
        ones = np.ones(batch, dtype=np.int64)
        first = costs.verify_pass(ones, contexts, state.union_model.base(batch))
        time_per_token = first.total_s / batch
    else:
        time_per_token = sum(history.step_s) / max(sum(history.tokens), 1)
    cap = state.cap

    def plan() -> StepPlan:
        # Shares are priced at the step end the batch's measured acceptance makes best
        # (:meth:`StepPlan.anchor_drafts`); before any verify pass, at every request's cap.
        trials = history.trials
        acceptance = sum(history.successes) / sum(trials) if trials else None
        return StepPlan(
            costs, state.union_model, contexts, None if trials else cap, acceptance, cap
        )

    view = BatchView(
        batch_size=batch,
        cap=cap,
        max_draft_tokens=setup.max_draft_tokens,
        request_id=active.request_id,
        position=active.position,
        context_tokens=contexts,
        batch_accepted_history=tuple(history.batch_accepted),
        time_per_token_s=time_per_token,
        memory=state.memory,
        confidences=(
            active.confidence_rows(state.table, cap + 1) if policy.reads_confidence else None
        ),
        depth_decider=depth_decider(plan) if policy.reads_costs else None,
        shape_prices=(
            (lambda: shape_shares_s(costs, state.union_model, contexts, family))
            if policy.reads_costs and (family := state.family) is not None
            else None
        ),
    )
    return np.asarray(policy.decide(view), dtype=np.int64)


def step(
    state: EngineState,
    policy: BudgetPolicy,
    setup: EngineSetup,
    *,
    priced: bool = True,
    lanes: bool = False,
) -> StepOutcome:
    """One decode iteration of the admitted batch (module docstring); changes nothing.

    ``priced=False`` leaves the times NaN (``verify`` None) for the caller to price later from
    the outcome's ``contexts``, ``run``, ``drafts``, ``committed`` and ``unique``
    (:mod:`simspec.sim.deferred`); only for a policy that does not read costs.

    ``lanes=True`` (unpriced chains, no expert cache, a ``per_request`` policy) takes every
    admitted request as its own batch of one, a *lane*: the lanes' steps are one iteration of
    as many separate batches, decided together. The totals (``drafted_total``,
    ``accepted_total``, ``probes``) are then one per lane, ``unique`` is (lanes, layers) and the
    policy observes nothing (it keeps no memory).
    """
    active, refs, costs = state.active, setup.references, setup.cost_model
    contexts = active.contexts()
    ks = decide(state, policy, setup, contexts)
    decisions, tree, topks, budgets = ks, setup.tree, None, None
    if state.family_table is not None:  # a tree-aware policy: ks are indices into its shapes
        chosen = state.family_table[ks]
        ks = np.minimum(chosen[:, 0], state.cap)  # its depths, within the step's cap
        tree, topks, budgets = state.family_trees, chosen[:, 1], chosen[:, 2]
    run: np.ndarray = ks
    probes: int | np.ndarray = 0
    if policy.reads_confidence:  # a request stopped below the cap read one more confidence:
        probing = ks < state.cap  # that draft step ran, its token is never verified
        run = ks + probing
        probes = probing.astype(np.int64) if lanes else int(np.count_nonzero(probing))
    elif lanes:
        probes = _zeros(len(ks))
    matches = active.match_lengths(state.table)
    if tree is None:
        drafts, accepted = ks, np.minimum(ks, matches)
    else:
        states = list(zip(active.request_id.tolist(), active.position.tolist(), strict=True))
        drafts, accepted = tree.verify_plan(refs, states, ks, topks, budgets)
    fed, committed = drafts + 1, accepted + 1  # tokens each request feeds and commits
    needed: np.ndarray | None = None
    if lanes and state.analytic:  # each lane's pass alone
        unique = refs.expected_unique_alone(fed, committed)
    elif state.analytic and tree is not None:  # trees: their siblings route alike
        unique = refs.expected_unique(fed, committed, tree.shapes(ks, topks, budgets))
    elif state.analytic:  # an expectation over the fed and committed counts
        unique = refs.expected_unique(fed, committed)
    else:
        triples = np.array([active.request_id, active.position, drafts]).T  # (B, 3)
        if lanes:
            unique = refs.pass_unique_experts_each(triples, accepted)
        elif state.cache is not None:  # the cache needs the sets themselves
            needed = refs.pass_experts(triples, accepted)
            unique = np.count_nonzero(needed, axis=1).astype(float)
        else:
            unique = refs.pass_unique_experts(triples, accepted)
    if lanes:  # one batch of one per lane: its totals are its own
        assert not priced and tree is None
        nan = math.nan
        return StepOutcome(
            nan,
            nan,
            None,
            nan,
            ks,
            drafts,
            accepted,
            committed,
            ks,
            accepted,
            probes,
            nan,
            state.memory,
            contexts,
            run,
            unique,
        )
    asked_total = sum(ks.tolist())  # small int arrays: faster than a numpy reduction
    loaded: LoadedPass | None = None
    verify: PassCost | None = None
    draft_s = extra_s = duration_s = math.nan
    if priced:
        if tree is None:
            draft_s = draft_phase_s(costs, contexts, run)
        else:  # k_b is the depth of request b's draft tree (simspec.sim.tree)
            draft_s = tree.draft_phase_s(costs, contexts, run, topks)
        if setup.offload is None:
            verify = costs.verify_pass(fed, contexts, unique)
        else:
            loaded = _loaded(state, setup, fed, contexts, unique, needed, draft_s, asked_total)
            verify = loaded.cost
        # Verify bookkeeping + the drafter's extend (engine presets; 0 if ideal or nobody drafts).
        extra_s = costs.speculation_overhead_s(committed, contexts) if asked_total else 0.0
        duration_s = draft_s + verify.total_s + extra_s
    accepted_total = sum(accepted.tolist())
    memory = policy.observe(
        state.memory, StepFeedback(len(ks), asked_total, accepted_total, duration_s, decisions)
    )
    return StepOutcome(
        duration_s,
        draft_s,
        verify,
        extra_s,
        ks,
        drafts,
        accepted,
        committed,
        asked_total if tree is None else sum(drafts.tolist()),  # chains: drafts = asks
        accepted_total,
        probes,
        float(mean_unique(unique)) if priced else math.nan,
        memory,
        contexts,
        run,
        unique,
        loaded,
        needed,
    )


@functools.lru_cache(maxsize=64)
def _zeros(size: int) -> np.ndarray:
    """``size`` int64 zeros, read-only, made once per size."""
    array = np.zeros(size, dtype=np.int64)
    array.flags.writeable = False
    return array


def _loaded(
    state: EngineState,
    setup: EngineSetup,
    fed: np.ndarray,
    contexts: np.ndarray,
    unique: np.ndarray,
    needed: np.ndarray | None,
    draft_s: float,
    drafted: int,
) -> LoadedPass:
    """The verify pass with its offloaded experts loaded: the misses against the cache
    (sampled routing) or their expectation (analytic); draft-guided prefetch overlaps the
    draft phase and predicts nothing in a step without drafts."""
    off = setup.offload
    assert off is not None
    base = off.base.verify_pass(fed, contexts, unique)
    if state.cache is not None and needed is not None:
        misses = state.cache.misses(needed)
    else:
        misses = off.expected_misses(fed, unique)
    guided = off.model.prefetch == "draft_guided"
    return off.load(
        base,
        unique,
        misses,
        sum(fed.tolist()),
        lead_s=draft_s if guided else 0.0,
        predicted=bool(drafted) or not guided,
    )
