"""The SimPy engine: arrivals, continuous batching, draft -> verify -> commit.

Two processes share one ``simpy.Environment``:

* :func:`arrivals` puts request ids into the waiting queue at their arrival times (open loop),
  or all of the first ``concurrency`` at time 0 (closed loop; each finished request is then
  replaced by the next one);
* :func:`serve` is the GPU's scheduler loop. At each iteration boundary it admits waiting
  requests while the batch limit and the KV-cache capacity allow, runs one prefill pass for
  them (which commits their first token), then one decode iteration for the whole batch:
  every request drafts k_b tokens (its policy decides, one depth at a time for the whole batch:
  :func:`decide_step`), ONE target pass verifies all Σ_b (k_b + 1) tokens, and each request
  commits min(k_b, m_b) + 1 tokens. A policy that reads the next draft's confidence and then
  declines has run that draft step: it is charged in the draft phase but not verified.

Processes only decide what happens and ``yield env.timeout(...)`` the time a pure cost function
returned; they never do cost arithmetic. Requests are kept in admission order and admitted in
arrival order, so no set or dict order drives a decision.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from simspec.costs.base import CostModel, draft_phase_s
from simspec.physics.models import kv_bytes_for_context
from simspec.policies.base import (
    BatchView,
    BudgetPolicy,
    DecodeState,
    StepOutcome,
    batch_draft_lengths,
    initial_memory,
    observe,
    reads_confidence,
)
from simspec.sim.marginal import StepPlan, UnionModel
from simspec.sim.records import PrefillRecord, RequestRecord, StepRecord
from simspec.sim.tree import TreeSpeculation
from simspec.text.reference import ReferenceSet
from simspec.text.workload import WorkloadConfig

#: What a SimPy process generator yields (events) and is sent back (their values).
Process = Generator[simpy.Event, Any, None]

HISTORY_STEPS = 32  # past steps of acceptance a policy can see


@dataclass
class _Active:
    """Mutable decode state of one admitted request (owned by :func:`serve`)."""

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    kv_reserved_bytes: float
    position: int = 0
    first_token_s: float = 0.0
    steps: int = 0
    drafted: int = 0
    accepted: int = 0
    accepted_history: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY_STEPS))
    drafted_history: deque[int] = field(default_factory=lambda: deque(maxlen=HISTORY_STEPS))

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.position


@dataclass
class RunLog:
    """Everything one simulation run recorded."""

    steps: list[StepRecord] = field(default_factory=list)
    prefills: list[PrefillRecord] = field(default_factory=list)
    requests: list[RequestRecord] = field(default_factory=list)

    def mean_tpot_s(self) -> float:
        """Mean time per output token after the first, over the finished requests."""
        tpots = [(r.finish_s - r.first_token_s) / (r.output_tokens - 1) for r in self.requests]
        return float(np.mean(tpots)) if tpots else 0.0


@dataclass(frozen=True)
class EngineSetup:
    """What a run needs besides the policy: the text, the costs and the batching limits."""

    references: ReferenceSet
    cost_model: CostModel
    workload: WorkloadConfig
    arrival_s: np.ndarray  # arrival time of each request (open loop)
    kv_capacity_bytes: float
    max_draft_tokens: int
    mean_draft_overlap: float  # mean lag-1 overlap of a draft with its predecessor (estimates)
    tree: TreeSpeculation | None = None  # draft trees ([speculation]); None: chains


def arrivals(env: simpy.Environment, queue: simpy.Store, setup: EngineSetup) -> Process:
    """Put request ids into ``queue`` when they arrive."""
    w = setup.workload
    if w.loop == "closed":
        for rid in range(min(w.concurrency, w.num_requests)):
            queue.put(rid)
        return
    for rid, t in enumerate(setup.arrival_s):
        if t > env.now:
            yield env.timeout(t - env.now)
        queue.put(rid)


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


def decide_step(
    policy: BudgetPolicy,
    active: list[_Active],
    confidences: list[np.ndarray],
    plan: StepPlan,
    view: BatchView,
) -> tuple[np.ndarray, np.ndarray]:
    """Ask ``policy`` depth by depth how many drafts each request makes this step.

    Draft step j runs once for every request still drafting, so the whole batch decides depth j
    together (:mod:`simspec.sim.marginal`): the requests that drafted j − 1 tokens are asked at
    their share of extending all of them without the step's fixed part; if the policy read that
    price, those that agreed are asked at their share with it, and unless one of them still
    agrees, nobody drafts at depth j. Policies are pure, so asking twice is harmless.

    Returns ``(draft_tokens, probes)``: ``probes[b] = 1`` when ``b`` was asked, declined and the
    policy reads confidences, i.e. draft step k_b + 1 ran to show the confidence it declined on
    (charged in the draft phase, its token never verified). Pure apart from updating ``plan``.
    """
    ks = np.zeros(len(active), dtype=np.int64)
    probes = np.zeros(len(active), dtype=np.int64)
    probing = reads_confidence(policy)
    histories = [(tuple(a.accepted_history), tuple(a.drafted_history)) for a in active]
    slot_confidences = [[float(c) for c in conf[: view.cap + 1]] for conf in confidences]

    def asks(b: int, k: int, price: _Price) -> bool:
        req, conf = active[b], slot_confidences[b]
        return policy.continue_drafting(
            DecodeState(
                request_id=req.request_id,
                position=req.position,
                context_tokens=req.context_tokens,
                drafted=k,
                confidences=tuple(conf[:k]),
                next_confidence=conf[k],
                max_draft_tokens=view.max_draft_tokens,
                batch_size=view.batch_size,
                accepted_history=histories[b][0],
                drafted_history=histories[b][1],
                batch_accepted_history=view.batch_accepted_history,
                time_per_token_s=view.time_per_token_s,
                marginal_cost_s=price,
                memory=view.memory,
            )
        )

    drafting = list(range(len(active)))
    for k in range(view.cap):
        price = _Price(plan, tuple(drafting), step_overhead=False)
        extend = [b for b in drafting if asks(b, k, price)]
        if extend and price.value is not None:  # does the step's fixed part pay for itself?
            whole = _Price(plan, tuple(extend))
            if not any(asks(b, k, whole) for b in extend):
                extend = []
        if probing:
            chosen = set(extend)
            for b in drafting:
                if b not in chosen:
                    probes[b] = 1
        plan.add_drafts(extend)
        ks[extend] += 1
        drafting = extend
        if not drafting:
            break
    return ks, probes


def serve(
    env: simpy.Environment,
    queue: simpy.Store,
    setup: EngineSetup,
    policy: BudgetPolicy,
    log: RunLog,
) -> Process:
    """The scheduler loop (module docstring); stops when every request has finished."""
    w, refs, costs = setup.workload, setup.references, setup.cost_model
    shape = refs.shape
    total = w.num_requests
    max_batch = w.concurrency if w.loop == "closed" else w.max_batch_size
    cap = min(policy.budget_cap(setup.max_draft_tokens), setup.max_draft_tokens)
    active: list[_Active] = []
    reserved = 0.0
    next_closed = min(w.concurrency, total)
    finished = 0
    waiting: deque[int] = deque()
    arrival_s = np.array(setup.arrival_s, dtype=float)  # closed loop: set when a request is queued
    union_model = UnionModel(
        shape.num_experts, shape.experts_per_token, shape.num_moe_layers, setup.mean_draft_overlap
    )
    memory = initial_memory(policy)
    fast = batch_draft_lengths(policy)
    recent_steps_s: deque[float] = deque(maxlen=HISTORY_STEPS)
    recent_tokens: deque[int] = deque(maxlen=HISTORY_STEPS)
    batch_history: deque[float] = deque(maxlen=HISTORY_STEPS)
    successes: deque[int] = deque(maxlen=HISTORY_STEPS)  # accepted drafts per step
    trials: deque[int] = deque(maxlen=HISTORY_STEPS)  # drafts judged per step (to 1st rejection)
    while finished < total:
        while queue.items:
            rid: int = yield queue.get()
            waiting.append(rid)
        if not active and not waiting:
            rid = yield queue.get()
            waiting.append(rid)
        # Admission: arrival order, batch limit, KV capacity (reserved for the whole output).
        admitted: list[_Active] = []
        while waiting and len(active) + len(admitted) < max_batch:
            seq = refs.sequence(waiting[0])
            need = kv_bytes_for_context(
                shape, seq.prompt_tokens + seq.output_tokens + setup.max_draft_tokens
            )
            if reserved + need > setup.kv_capacity_bytes and (active or admitted):
                break
            rid = waiting.popleft()
            admitted.append(
                _Active(rid, float(arrival_s[rid]), seq.prompt_tokens, seq.output_tokens, need)
            )
            reserved += need
        if admitted:
            prompts = np.array([a.prompt_tokens for a in admitted])
            cost = costs.prefill_pass(prompts)
            start = env.now
            yield env.timeout(cost.total_s)
            log.prefills.append(PrefillRecord(start, len(admitted), int(prompts.sum()), cost))
            for a in admitted:
                a.position = 1
                a.first_token_s = env.now
            active.extend(admitted)
        # One decode iteration over the whole batch.
        batch = len(active)
        contexts = np.array([a.context_tokens for a in active], dtype=np.int64)
        # Shares are priced at the step end the batch's measured acceptance makes best
        # (:meth:`StepPlan.anchor_drafts`); before any verify pass, at every request's cap.
        acceptance = sum(successes) / sum(trials) if trials else None
        plan = StepPlan(costs, union_model, contexts, None if trials else cap, acceptance, cap)
        if not recent_steps_s:  # no history yet: price a token at a plain decode pass / B
            first = costs.verify_pass(np.ones(batch, dtype=np.int64), contexts, plan.union)
            time_per_token = first.total_s / batch
        else:
            time_per_token = sum(recent_steps_s) / max(sum(recent_tokens), 1)
        view = BatchView(
            batch, tuple(batch_history), time_per_token, memory, setup.max_draft_tokens, cap
        )
        if fast is not None:  # one call for the batch, same answer as the per-token loop
            ks = np.asarray(fast(view), dtype=np.int64)
            probes = np.zeros_like(ks)
        else:
            confidences = [refs.sequence(a.request_id).confidences[a.position] for a in active]
            ks, probes = decide_step(policy, active, confidences, plan, view)
        if setup.tree is None:
            draft_s = draft_phase_s(costs, contexts, ks + probes)  # probes run, never verified
            drafts, tree_accepted = ks, None
        else:  # k_b is the depth of request b's draft tree (simspec.sim.tree)
            draft_s = setup.tree.draft_phase_s(costs, contexts, ks + probes)
            states = [(a.request_id, a.position) for a in active]
            drafts, tree_accepted = setup.tree.verify_plan(refs, states, ks)
        fed = [(a.request_id, a.position, int(k)) for a, k in zip(active, drafts, strict=True)]
        unique = refs.pass_unique_experts(fed, tree_accepted)
        verify = costs.verify_pass(drafts + 1, contexts, unique)
        if ks.any():  # the k = 0 pass at the same batch, for verify_over_decode only
            plain = refs.pass_unique_experts([(rid, state, 0) for rid, state, _ in fed])
            decode_s = costs.verify_pass(np.ones_like(ks), contexts, plain).total_s
        else:  # nobody drafts: the verify pass is that pass (same tokens, experts, contexts)
            decode_s = verify.total_s
        extra_s = 0.0  # verify bookkeeping + the drafter's extend (engine presets; 0 if ideal)
        if ks.any():
            committed = [
                1 + (min(int(k), int(refs.sequence(a.request_id).match_lengths[a.position])))
                if tree_accepted is None
                else 1 + int(tree_accepted[b])
                for b, (a, k) in enumerate(zip(active, ks, strict=True))
            ]
            extra_s = costs.speculation_overhead_s(np.array(committed), contexts)
        start = env.now
        yield env.timeout(draft_s + verify.total_s + extra_s)
        accepted_total = judged = 0
        still: list[_Active] = []
        for b, (a, k) in enumerate(zip(active, ks, strict=True)):
            m = int(refs.sequence(a.request_id).match_lengths[a.position])
            acc = min(int(k), m) if tree_accepted is None else int(tree_accepted[b])
            a.position += acc + 1
            a.steps += 1
            a.drafted += int(drafts[b])
            a.accepted += acc
            a.accepted_history.append(acc)
            a.drafted_history.append(int(k))
            accepted_total += acc
            judged += acc + int(acc < k)
            if a.position >= a.output_tokens:
                log.requests.append(
                    RequestRecord(
                        a.request_id,
                        a.arrival_s,
                        a.first_token_s,
                        env.now,
                        a.prompt_tokens,
                        a.output_tokens,
                        a.position,
                        a.steps,
                        a.drafted,
                        a.accepted,
                    )
                )
                reserved -= a.kv_reserved_bytes
                finished += 1
                if w.loop == "closed" and next_closed < total:
                    arrival_s[next_closed] = env.now
                    queue.put(next_closed)
                    next_closed += 1
            else:
                still.append(a)
        active = still
        step_s = draft_s + verify.total_s + extra_s
        recent_steps_s.append(step_s)
        recent_tokens.append(accepted_total + batch)
        batch_history.append(accepted_total / batch)
        if judged:
            successes.append(accepted_total)
            trials.append(judged)
        memory = observe(policy, memory, StepOutcome(batch, int(ks.sum()), accepted_total, step_s))
        log.steps.append(
            StepRecord(
                start,
                batch,
                int((drafts + 1).sum()),
                int(drafts.sum()),
                accepted_total,
                draft_s,
                verify,
                decode_s,
                float(unique.mean()) if len(unique) else 0.0,
                int(probes.sum()),
                speculation_overhead_s=extra_s,
            )
        )


def run_policy(setup: EngineSetup, policy: BudgetPolicy) -> RunLog:
    """Simulate the whole workload under ``policy``; returns the records."""
    env = simpy.Environment()
    queue = simpy.Store(env)
    log = RunLog()
    env.process(arrivals(env, queue, setup))
    env.process(serve(env, queue, setup, policy, log))
    env.run()
    return log
