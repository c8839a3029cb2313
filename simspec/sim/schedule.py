"""The scheduler loop, written once for every clock: admission, prefill, decode, replacement.

:func:`schedule` is a plain generator. It decides what the GPU does next and yields a request
for each thing that takes time or waits; its driver carries the request out and sends back the
clock at its end (or, for :class:`Arrivals`, the requests that arrived):

* :class:`Arrivals` (open loop only): take the requests that have arrived since the last
  iteration; with ``block`` (nothing active, nothing waiting) wait for at least one;
* :class:`Prefill`: one prefill pass of the requests just admitted, priced
  (:meth:`~simspec.costs.base.CostModel.prefill`); the first token of each is committed at its end;
* a :class:`~simspec.sim.step.StepOutcome`: one decode iteration of the whole batch, as
  :func:`simspec.sim.step.step` decided it; its commits are applied at its end, so the batch's
  requests and positions it ran at are ``state.active``'s while the driver handles it.

At each iteration boundary the loop admits waiting requests in arrival order while the batch
limit and the KV-cache capacity allow (:meth:`~simspec.sim.step.EngineState.admissible`). In a
closed loop each finished request is replaced at once by the next one, which arrives at the end
of the pass that finished it.

A request that has arrived waits until the scheduler takes it in: at every iteration boundary by
default, else every ``setup.recv_interval`` decode iterations (SGLang's
``--scheduler-recv-interval``: its scheduler adds each decode or verify pass's weight 1 to a
counter and polls its request socket once the counter reaches the interval, then resets it; a
prefill pass weighs 1000, so a poll follows every prefill,
``python/sglang/srt/managers/scheduler_recv_skipper.py``). An idle engine polls at once. The
wait falls between the request's arrival and its prefill, so its time to first token holds it.

Two drivers: :func:`simspec.sim.engine.serve` (SimPy: a timeout per pass, a queue get per
arrival) and :func:`simspec.sim.deferred.run_deferred` (a closed loop of a policy that reads no
costs: steps unpriced, and the "clock" it sends back is the pass's index, turned into seconds
once every pass is priced). Both see the same decisions because there is only this loop. At a
batch of one the deferred driver lays out what this loop does there (each request prefilled and
stepped until it finishes, in order) without running it, stepping every request at once
(:func:`simspec.sim.deferred.in_lanes`); ``tests/sim/test_deferred.py`` holds it to the loop's
records.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from simspec.costs.offload import LoadedPass
from simspec.params import PassCost
from simspec.policies.base import BudgetPolicy
from simspec.sim.records import RequestRecord
from simspec.sim.setup import EngineSetup
from simspec.sim.step import EngineState, StepOutcome, step

__all__ = ["Arrivals", "Prefill", "Request", "Scheduler", "schedule"]


@dataclass(slots=True)
class Arrivals:
    """Take the requests that arrived (sent back: their ids, in arrival order)."""

    block: bool  # wait for one if none has arrived: the GPU is idle


@dataclass(slots=True)
class Prefill:
    """One prefill pass of ``requests`` newly admitted prompts, ``tokens`` in all."""

    requests: int
    tokens: int
    cost: PassCost
    loaded: LoadedPass | None = None  # its loads when experts are offloaded


Request = Arrivals | Prefill | StepOutcome
#: The scheduler as its drivers see it: requests out, clock times (or arrivals) back.
Scheduler = Generator[Request, Any, None]


def schedule(
    setup: EngineSetup,
    policy: BudgetPolicy,
    state: EngineState,
    finished: list[RequestRecord],
    *,
    priced: bool = True,
) -> Scheduler:
    """Run the workload under ``policy`` from ``state`` (:meth:`EngineState.start`; the driver
    reads it, only the loop changes it), appending each request's record to ``finished`` as it
    finishes; stops when every request has finished. ``priced=False`` leaves the decode
    iterations unpriced (:func:`~simspec.sim.step.step`) for the driver to price."""
    w = setup.workload
    total = w.num_requests
    closed = w.loop == "closed"
    # closed: the clients' requests beyond the engine's batch cap (max_num_seqs) wait in line
    max_batch = min(w.concurrency, w.max_batch_size) if closed else w.max_batch_size
    kv_capacity = setup.kv_capacity_bytes
    prefill = setup.cost_model.prefill
    next_closed = min(w.concurrency, total) if closed else total  # open: none to replace
    waiting: deque[int] = deque(range(next_closed) if closed else ())
    inbox: deque[int] = deque()  # arrived, not taken in by the scheduler yet
    interval = setup.recv_interval
    since_poll = interval  # decode iterations since the scheduler last took arrivals in
    while state.finished < total:
        if not closed:
            idle = not len(state.active) and not waiting and not inbox
            inbox.extend((yield Arrivals(idle)))
        if since_poll >= interval or not len(state.active):
            waiting.extend(inbox)
            inbox.clear()
            since_poll = 0
        admitted = state.admissible(waiting, max_batch, kv_capacity)
        if admitted:
            prompts = state.table.prompt[admitted]
            if setup.offload is None:
                now = yield Prefill(len(admitted), int(prompts.sum()), prefill(prompts))
            else:
                cache = state.cache.prefill if state.cache is not None else None
                loaded = setup.offload.prefill_loaded(prompts, cache)
                now = yield Prefill(len(admitted), int(prompts.sum()), loaded.cost, loaded)
            state.admit(admitted, now)
            since_poll = interval  # a prefill pass is followed by a poll
        outcome = step(state, policy, setup, priced=priced)
        now = yield outcome
        since_poll += 1
        for record in state.apply(outcome, now):
            finished.append(record)
            if next_closed < total:  # the next request takes the finished one's place
                state.arrival_s[next_closed] = now
                inbox.append(next_closed)
                next_closed += 1
