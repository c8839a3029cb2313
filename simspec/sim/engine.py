"""The SimPy engine: arrivals, continuous batching, draft -> verify -> commit.

Two processes share one ``simpy.Environment``:

* :func:`arrivals` puts request ids into the waiting queue at their arrival times (open loop),
  or all of the first ``concurrency`` at time 0 (closed loop; each finished request is then
  replaced by the next one);
* :func:`serve` is the GPU's scheduler loop. At each iteration boundary it admits waiting
  requests while the batch limit and the KV-cache capacity allow, runs one prefill pass for
  them (which commits their first token), then one decode iteration for the whole batch:
  every request drafts k_b tokens (its policy decides, one depth at a time for the whole batch:
  :func:`~simspec.sim.decide.decide_step`), ONE target pass verifies all Σ_b (k_b + 1) tokens,
  and each request commits min(k_b, m_b) + 1 tokens. A policy that reads the next draft's
  confidence and then declines has run that draft step: it is charged in the draft phase but not
  verified.

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
from simspec.policies.base import (
    BatchView,
    BudgetPolicy,
    StepOutcome,
    batch_draft_lengths,
    depth_decisions,
    initial_memory,
    observe,
)
from simspec.sim.decide import StepRequests, decide_step
from simspec.sim.marginal import StepPlan, UnionModel
from simspec.sim.records import PrefillRecord, RequestRecord, StepRecord
from simspec.sim.state import HISTORY_STEPS, ActiveBatch, RequestTable
from simspec.sim.tree import TreeSpeculation
from simspec.text.reference import ReferenceSet
from simspec.text.workload import WorkloadConfig

#: What a SimPy process generator yields (events) and is sent back (their values).
Process = Generator[simpy.Event, Any, None]

_add = np.add.reduce  # what ndarray.sum calls, without its Python wrapper (~0.5 us a call)


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


def serve(
    env: simpy.Environment,
    queue: simpy.Store,
    setup: EngineSetup,
    policy: BudgetPolicy,
    log: RunLog,
) -> Process:
    """The scheduler loop (module docstring); stops when every request has finished.

    The admitted requests are one :class:`~simspec.sim.state.ActiveBatch` (arrays in admission
    order), so an iteration is a fixed number of array operations whatever the batch size.
    """
    w, refs, costs = setup.workload, setup.references, setup.cost_model
    shape = refs.shape
    total = w.num_requests
    max_batch = w.concurrency if w.loop == "closed" else w.max_batch_size
    cap = min(policy.budget_cap(setup.max_draft_tokens), setup.max_draft_tokens)
    table = RequestTable(refs, total, setup.max_draft_tokens)
    fast = batch_draft_lengths(policy)
    # Per-request histories only for a policy asked with one DecodeState per request.
    active = ActiveBatch(histories=fast is None and depth_decisions(policy) is None)
    reserved = 0.0
    next_closed = min(w.concurrency, total)
    finished = 0
    waiting: deque[int] = deque()
    arrival_s = np.array(setup.arrival_s, dtype=float)  # closed loop: set when a request is queued
    union_model = UnionModel(
        shape.num_experts, shape.experts_per_token, shape.num_moe_layers, setup.mean_draft_overlap
    )
    memory = initial_memory(policy)
    analytic = refs.routing.mode == "analytic"
    plain_unique: dict[int, np.ndarray] = {}  # analytic mode: experts of the plain pass, by B
    rows: list[tuple[Any, ...]] = []  # StepRecord fields
    learns = hasattr(policy, "observe")
    recent_steps_s: deque[float] = deque(maxlen=HISTORY_STEPS)
    recent_tokens: deque[int] = deque(maxlen=HISTORY_STEPS)
    batch_history: deque[float] = deque(maxlen=HISTORY_STEPS)
    successes: deque[int] = deque(maxlen=HISTORY_STEPS)  # accepted drafts per step
    trials: deque[int] = deque(maxlen=HISTORY_STEPS)  # drafts judged per step (to 1st rejection)
    while finished < total:
        while queue.items:
            rid: int = yield queue.get()
            waiting.append(rid)
        if not len(active) and not waiting:
            rid = yield queue.get()
            waiting.append(rid)
        # Admission: arrival order, batch limit, KV capacity (reserved for the whole output).
        admitted: list[int] = []
        while waiting and len(active) + len(admitted) < max_batch:
            need = table.kv_bytes[waiting[0]]
            if reserved + need > setup.kv_capacity_bytes and (len(active) or admitted):
                break
            admitted.append(waiting.popleft())
            reserved += need
        if admitted:
            prompts = table.prompt[admitted]
            cost = costs.prefill_pass(prompts)
            start = env.now
            yield env.timeout(cost.total_s)
            log.prefills.append(PrefillRecord(start, len(admitted), int(prompts.sum()), cost))
            active.admit(table, admitted, arrival_s, env.now)
        # One decode iteration over the whole batch.
        batch = len(active.request_id)
        contexts = active.contexts()
        if not recent_steps_s:  # no history yet: price a token at a plain decode pass / B
            ones = np.ones(batch, dtype=np.int64)
            first = costs.verify_pass(ones, contexts, union_model.base(batch))
            time_per_token = first.total_s / batch
        else:
            time_per_token = sum(recent_steps_s) / max(sum(recent_tokens), 1)
        view = BatchView(
            batch, tuple(batch_history), time_per_token, memory, setup.max_draft_tokens, cap
        )
        if fast is not None:  # one call for the batch, same answer as the per-token loop
            ks = np.asarray(fast(view), dtype=np.int64)
            probes, run = 0, ks
        else:
            # Shares are priced at the step end the batch's measured acceptance makes best
            # (:meth:`StepPlan.anchor_drafts`); before any verify pass, at every request's cap.
            acceptance = sum(successes) / sum(trials) if trials else None
            plan = StepPlan(costs, union_model, contexts, None if trials else cap, acceptance, cap)
            histories = active.histories or []  # empty: the policy does not read them
            asked = StepRequests(
                active.request_id,
                active.position,
                contexts,
                active.confidence_rows(table, cap + 1),
                [tuple(h[0]) for h in histories],
                [tuple(h[1]) for h in histories],
            )
            ks, probing = decide_step(policy, asked, plan, view)
            probes, run = int(probing.sum()), ks + probing  # probes run, never verified
        matches = active.match_lengths(table)
        if setup.tree is None:
            draft_s = draft_phase_s(costs, contexts, run)
            drafts, accepted = ks, np.minimum(ks, matches)
        else:  # k_b is the depth of request b's draft tree (simspec.sim.tree)
            draft_s = setup.tree.draft_phase_s(costs, contexts, run)
            states = list(zip(active.request_id.tolist(), active.position.tolist(), strict=True))
            drafts, accepted = setup.tree.verify_plan(refs, states, ks)
        fed, committed = drafts + 1, accepted + 1  # tokens each request feeds and commits
        if analytic:  # an expectation over the fed and committed counts alone
            unique = refs.expected_unique(fed, committed)
        else:
            triples = np.array([active.request_id, active.position, drafts]).T  # (B, 3)
            unique = refs.pass_unique_experts(triples, accepted)
        verify = costs.verify_pass(fed, contexts, unique)
        extra_s = 0.0  # verify bookkeeping + the drafter's extend (engine presets; 0 if ideal)
        asked_total = int(_add(ks))  # the drafts the policy asked for (every k_b >= 0)
        if asked_total:  # the k = 0 pass at the same batch, for verify_over_decode only
            plain = plain_unique.get(batch)
            if plain is None:
                zeros = np.zeros(batch, dtype=np.int64)
                if analytic:  # an expectation over B one-token sequences: depends on B alone
                    ones = zeros + 1
                    plain = plain_unique[batch] = refs.expected_unique(ones, ones)
                else:
                    triples[:, 2] = 0
                    plain = refs.pass_unique_experts(triples, zeros)
            ones = np.ones(batch, dtype=np.int64)
            decode_s = costs.verify_pass(ones, contexts, plain).total_s
            extra_s = costs.speculation_overhead_s(committed, contexts)
        else:  # nobody drafts: the verify pass is that pass (same tokens, experts, contexts)
            decode_s = verify.total_s
        start = env.now
        step_s = draft_s + verify.total_s + extra_s
        yield env.timeout(step_s)
        accepted_total = int(_add(accepted))
        judged = accepted_total + int(np.count_nonzero(accepted < ks))
        active.advance(committed, accepted, drafts, ks)
        done = active.position >= active.output
        if np.count_nonzero(done):
            for b in np.flatnonzero(done).tolist():
                log.requests.append(
                    RequestRecord(
                        int(active.request_id[b]),
                        float(active.arrival_s[b]),
                        float(active.first_token_s[b]),
                        env.now,
                        int(active.prompt[b]),
                        int(active.output[b]),
                        int(active.position[b]),
                        int(active.steps[b]),
                        int(active.drafted[b]),
                        int(active.accepted[b]),
                    )
                )
                reserved -= float(active.kv_bytes[b])
                finished += 1
                if w.loop == "closed" and next_closed < total:
                    arrival_s[next_closed] = env.now
                    queue.put(next_closed)
                    next_closed += 1
            active.keep(~done)
        recent_steps_s.append(step_s)
        recent_tokens.append(accepted_total + batch)
        batch_history.append(accepted_total / batch)
        if judged:
            successes.append(accepted_total)
            trials.append(judged)
        drafted = int(_add(drafts))
        if learns:
            outcome = StepOutcome(batch, asked_total, accepted_total, step_s)
            memory = observe(policy, memory, outcome)
        rows.append(
            (
                start,
                batch,
                drafted + batch,
                drafted,
                accepted_total,
                draft_s,
                verify,
                decode_s,
                float(_add(unique)) / len(unique) if len(unique) else 0.0,  # = unique.mean()
                probes,
                extra_s,
            )
        )
    log.steps.extend(StepRecord(*row) for row in rows)


def run_policy(setup: EngineSetup, policy: BudgetPolicy) -> RunLog:
    """Simulate the whole workload under ``policy``; returns the records."""
    env = simpy.Environment()
    queue = simpy.Store(env)
    log = RunLog()
    env.process(arrivals(env, queue, setup))
    env.process(serve(env, queue, setup, policy, log))
    env.run()
    return log
