"""The SimPy engine: arrivals, continuous batching, draft -> verify -> commit.

Two processes share one ``simpy.Environment``:

* :func:`arrivals` puts request ids into the waiting queue at their arrival times (open loop),
  or all of the first ``concurrency`` at time 0 (closed loop; each finished request is then
  replaced by the next one);
* :func:`serve` is the GPU's scheduler loop. At each iteration boundary it admits waiting
  requests while the batch limit and the KV-cache capacity allow, waits one prefill pass for
  them (which commits their first token), then one decode iteration for the whole batch, whose
  decisions, commits and time :func:`simspec.sim.step.step` computes.

Processes only wait: ``yield env.timeout(...)`` the time a pure function returned, or a queue.
A resource that contends (a host link for offloaded experts, a second GPU stream) is one more
process and one more wait here; the arithmetic stays in pure functions. Requests are kept in
admission order and admitted in arrival order, so no set or dict order drives a decision.

A closed loop whose policy reads no costs needs no clock to decide anything, so
:func:`run_policy` runs it as :mod:`simspec.sim.deferred` (the same loop and step, every step
decided first and all of them priced together), with the same records.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import Any

import simpy

from simspec.policies.base import BudgetPolicy
from simspec.sim.deferred import deferrable, run_deferred
from simspec.sim.records import PrefillRecord, RunLog
from simspec.sim.setup import EngineSetup
from simspec.sim.step import EngineState, step

#: What a SimPy process generator yields (events) and is sent back (their values).
Process = Generator[simpy.Event, Any, None]

__all__ = ["EngineSetup", "RunLog", "arrivals", "run_policy", "serve"]


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
    """The GPU's scheduler loop (module docstring); stops when every request has finished.

    It only waits: for arrivals, for each prefill pass and for each decode iteration, whose
    times come from pure functions (:meth:`~simspec.costs.base.CostModel.prefill`,
    :func:`simspec.sim.step.step`).
    """
    w = setup.workload
    total = w.num_requests
    closed = w.loop == "closed"
    max_batch = w.concurrency if closed else w.max_batch_size
    state = EngineState.start(setup, policy)
    next_closed = min(w.concurrency, total)
    waiting: deque[int] = deque()
    while state.finished < total:
        while queue.items:
            rid: int = yield queue.get()
            waiting.append(rid)
        if not len(state.active) and not waiting:
            rid = yield queue.get()
            waiting.append(rid)
        admitted = state.admissible(waiting, max_batch, setup.kv_capacity_bytes)
        if admitted:
            prompts = state.table.prompt[admitted]
            cost = setup.cost_model.prefill(prompts)
            start = env.now
            yield env.timeout(cost.total_s)
            log.prefills.append(PrefillRecord(start, len(admitted), int(prompts.sum()), cost))
            state.admit(admitted, env.now)
        outcome = step(state, policy, setup)
        assert outcome.verify is not None  # priced
        start = env.now
        yield env.timeout(outcome.duration_s)
        active = state.active
        log.steps.append(
            start,
            outcome.drafted_total + len(outcome.drafts),
            outcome.drafted_total,
            outcome.accepted_total,
            outcome.draft_s,
            outcome.verify,
            outcome.unique_experts,
            outcome.probes,
            outcome.speculation_overhead_s,
            active.request_id,
            active.position,
        )
        for record in state.apply(outcome, env.now):
            log.requests.append(record)
            if closed and next_closed < total:  # the next request takes the finished one's place
                state.arrival_s[next_closed] = env.now
                queue.put(next_closed)
                next_closed += 1


def run_policy(setup: EngineSetup, policy: BudgetPolicy, *, timed: bool | None = None) -> RunLog:
    """Simulate the whole workload under ``policy``; returns the records.

    A closed loop of a policy that reads no costs is decided first and priced after
    (:mod:`simspec.sim.deferred`, the same records); ``timed=True`` runs it in SimPy anyway,
    ``timed=False`` insists on the deferred schedule.
    """
    if timed is None:
        timed = not deferrable(setup, policy)
    if not timed:
        if not deferrable(setup, policy):
            raise ValueError("only a closed loop of chains under a policy that reads no costs")
        return run_deferred(setup, policy)
    env = simpy.Environment()
    queue = simpy.Store(env)
    log = RunLog()
    env.process(arrivals(env, queue, setup))
    env.process(serve(env, queue, setup, policy, log))
    env.run()
    return log
