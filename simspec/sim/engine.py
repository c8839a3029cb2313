"""The SimPy engine: arrivals and the GPU, the scheduler loop driven on a SimPy clock.

Two processes share one ``simpy.Environment``:

* :func:`arrivals` puts request ids into the waiting queue at their arrival times (open loop;
  a closed loop starts with its first ``concurrency`` requests waiting and replaces each
  finished request by the next one inside the scheduler);
* :func:`serve` is the GPU: it drives the scheduler loop (:func:`simspec.sim.schedule.schedule`),
  turning each of its requests into a wait: a queue get for arrivals, a timeout of the priced
  time for each prefill pass and each decode iteration (:func:`simspec.sim.step.step`).

Processes only wait; the arithmetic stays in pure functions. A resource that contends (a second
GPU stream) is one more process and one more wait here. Offloaded experts (``[offload]``) keep
one process: the host link serves only this GPU's passes, whose copy and compute streams are one
pure pipeline (:mod:`simspec.costs.offload`), so each pass's wait already holds its loads and
the link's work is recorded beside it (:class:`~simspec.sim.records.OffloadLog`).
Requests are kept in admission order and admitted in arrival order, so no set or dict order
drives a decision.

A closed loop whose policy reads no costs needs no clock to decide anything, so
:func:`run_policy` drives the same scheduler loop with :mod:`simspec.sim.deferred` (every step
decided first and all of them priced together), with the same records.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from simspec.policies.base import BudgetPolicy
from simspec.sim.deferred import deferrable, run_deferred
from simspec.sim.records import OffloadLog, PrefillRecord, RunLog
from simspec.sim.schedule import Arrivals, Prefill, schedule
from simspec.sim.setup import EngineSetup
from simspec.sim.step import EngineState, StepOutcome

#: What a SimPy process generator yields (events) and is sent back (their values).
Process = Generator[simpy.Event, Any, None]

__all__ = ["EngineSetup", "RunLog", "arrivals", "run_policy", "serve"]


def arrivals(env: simpy.Environment, queue: simpy.Store, setup: EngineSetup) -> Process:
    """Put request ids into ``queue`` when they arrive (open loop; a closed loop's requests are
    queued by the scheduler itself)."""
    if setup.workload.loop == "closed":
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
    """The GPU (module docstring): waits out each request of the scheduler loop and records
    each pass; stops when every request has finished."""
    state = EngineState.start(setup, policy)
    scheduler = schedule(setup, policy, state, log.requests)
    steps = log.steps
    reply: Any = None
    while True:
        try:
            request = scheduler.send(reply)
        except StopIteration:
            return
        if type(request) is StepOutcome:
            outcome = request
            assert outcome.verify is not None  # priced
            start = env.now
            if outcome.loaded is not None and log.offload is not None:
                log.offload.append(start + outcome.draft_s, outcome.loaded, True)
            yield env.timeout(outcome.duration_s)
            steps.append(
                start,
                outcome.drafted_total + len(outcome.drafts),
                outcome.drafted_total,
                outcome.accepted_total,
                outcome.draft_s,
                outcome.verify,
                outcome.unique_experts,
                outcome.probes,
                outcome.speculation_overhead_s,
                state.active.request_id,
                state.active.position,
            )
            reply = env.now
        elif type(request) is Prefill:
            start = env.now
            if request.loaded is not None and log.offload is not None:
                log.offload.append(start, request.loaded, False)
            yield env.timeout(request.cost.total_s)
            log.prefills.append(
                PrefillRecord(start, request.requests, request.tokens, request.cost)
            )
            reply = env.now
        else:
            assert isinstance(request, Arrivals)
            arrived: list[int] = []
            while queue.items:
                arrived.append((yield queue.get()))
            if request.block and not arrived:
                arrived.append((yield queue.get()))
            reply = arrived


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
    log = RunLog(offload=OffloadLog() if setup.offload is not None else None)
    env.process(arrivals(env, queue, setup))
    env.process(serve(env, queue, setup, policy, log))
    env.run()
    return log
