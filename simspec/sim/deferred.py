"""A closed-loop run decided first and priced after: the same steps, scheduled without a clock.

In a closed loop (every finished request replaced at once by the next) nothing the scheduler
does depends on time: admission follows the batch limit and the KV reservations, a policy that
does not read costs (``reads_costs`` False) decides from the text alone, and each step's commits
follow from its decisions and the match lengths. So :func:`run_deferred` runs the scheduler loop
of :func:`simspec.sim.engine.serve` with :func:`simspec.sim.step.step` unpriced, records each
verify pass's tokens, contexts and unique experts, prices every step of a batch size in one
array call (:func:`simspec.costs.batch.step_costs`, bounded chunks) and lays the times out with
one cumulative sum over the run's passes in order, which adds each duration to the clock as
SimPy does. The log equals the SimPy run's (``tests/sim/test_deferred.py``).

An open loop (arrivals at given times), a policy that reads costs and draft trees keep the
timed path (:func:`simspec.sim.engine.run_policy` chooses).
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

import numpy as np

from simspec.costs.batch import step_costs
from simspec.params import PassCost
from simspec.policies.base import BudgetPolicy
from simspec.sim.records import PrefillRecord, RequestRecord, RunLog
from simspec.sim.setup import EngineSetup
from simspec.sim.step import EngineState, StepOutcome, step

#: Steps held unpriced before they are priced together, at most this many.
CHUNK_STEPS = 4096


def deferrable(setup: EngineSetup, policy: BudgetPolicy) -> bool:
    """True if a run of ``policy`` may be decided before it is priced (module docstring)."""
    return setup.workload.loop == "closed" and setup.tree is None and not policy.reads_costs


class _Steps:
    """The run's steps in order: what each did, and its prices once they are known."""

    def __init__(self, setup: EngineSetup):
        self.costs = setup.cost_model
        self.outcomes: list[StepOutcome] = []  # not priced yet
        #: Per priced step: (drafted, accepted, probes, unique experts, batch size).
        self.rows: list[tuple[int, int, int, float, int]] = []
        self.draft_s: list[float] = []
        self.verify: list[PassCost] = []
        self.extra_s: list[float] = []
        self.duration_s: list[float] = []

    def add(self, outcome: StepOutcome) -> None:
        self.outcomes.append(outcome)
        if len(self.outcomes) >= CHUNK_STEPS:
            self.price()

    def price(self) -> None:
        """Price the steps not priced yet, one array call per batch size, and drop what only
        pricing needed from their outcomes (a chunk's arrays at most are held at once)."""
        todo = self.outcomes
        by_size: dict[int, list[int]] = {}
        for j, outcome in enumerate(todo):
            by_size.setdefault(len(outcome.drafts), []).append(j)
        draft_s, extra_s = [0.0] * len(todo), [0.0] * len(todo)
        verify: list[PassCost] = [None] * len(todo)  # type: ignore[list-item]
        for rows in by_size.values():
            group = [todo[j] for j in rows]
            costs = step_costs(
                self.costs,
                np.array([o.drafts for o in group]) + 1,
                np.array([o.contexts for o in group]),
                np.array([o.unique for o in group]),
                np.array([o.run for o in group]),
                np.array([o.committed for o in group]),
            )
            for j, d, v, e in zip(
                rows,
                costs.draft_s.tolist(),
                costs.verify,
                costs.speculation_overhead_s.tolist(),
                strict=True,
            ):
                draft_s[j], verify[j] = d, v
                extra_s[j] = e if todo[j].drafted_total else 0.0  # as step: none if nobody drafts
        self.draft_s += draft_s
        self.verify += verify
        self.extra_s += extra_s
        # The order of step: draft phase + verify pass + overhead.
        self.duration_s += [
            d + v.total_s + e for d, v, e in zip(draft_s, verify, extra_s, strict=True)
        ]
        self.rows += [
            (o.drafted_total, o.accepted_total, o.probes, o.unique_experts, len(o.drafts))
            for o in todo
        ]
        todo.clear()


def run_deferred(setup: EngineSetup, policy: BudgetPolicy) -> RunLog:
    """Simulate a closed-loop workload under ``policy`` (:func:`deferrable`); the records
    :func:`simspec.sim.engine.run_policy` gives."""
    w = setup.workload
    total = w.num_requests
    state = EngineState.start(setup, policy)
    first = min(w.concurrency, total)
    waiting: deque[int] = deque(range(first))
    next_closed = first
    passes: list[int] = []  # the run's passes in order: -1 - prefill index, or step index
    ids: list[bytes] = []  # each step's requests
    positions: list[bytes] = []  # and their positions
    prefills: list[tuple[int, int, PassCost]] = []
    finished: list[tuple[RequestRecord, int, int]] = []  # record, first token pass, end pass
    steps = _Steps(setup)
    prefill_end: dict[int, int] = {}
    while state.finished < total:
        admitted = state.admissible(waiting, w.concurrency, setup.kv_capacity_bytes)
        if admitted:
            prompts = state.table.prompt[admitted]
            for rid in admitted:
                prefill_end[rid] = len(passes)
            passes.append(-1 - len(prefills))
            prefills.append((len(admitted), int(prompts.sum()), setup.cost_model.prefill(prompts)))
            state.admit(admitted, 0.0)  # the first-token times are laid out below
        outcome = step(state, policy, setup, priced=False)
        index = len(passes)
        passes.append(len(ids))
        ids.append(state.active.request_id.tobytes())
        positions.append(state.active.position.tobytes())
        steps.add(outcome)
        for record in state.apply(outcome, 0.0):
            finished.append((record, prefill_end.pop(record.request_id), index))
            if next_closed < total:  # the next request takes the finished one's place
                state.arrival_s[next_closed] = index  # arrives when this pass ends
                waiting.append(next_closed)
                next_closed += 1
    steps.price()
    durations = [steps.duration_s[i] if i >= 0 else prefills[-1 - i][2].total_s for i in passes]
    ends = np.cumsum(durations).tolist()  # the clock after each pass, added in order
    starts = [0.0, *ends[:-1]]
    log = RunLog()
    step_start: list[float] = []
    for index, i in enumerate(passes):
        if i >= 0:
            step_start.append(starts[index])
        else:
            requests, tokens, cost = prefills[-1 - i]
            log.prefills.append(PrefillRecord(starts[index], requests, tokens, cost))
    drafted, accepted, probes, unique, batch = zip(*steps.rows, strict=True) if ids else [()] * 5
    log.steps.extend(
        step_start,
        [d + b for d, b in zip(drafted, batch, strict=True)],
        drafted,
        accepted,
        steps.draft_s,
        steps.verify,
        unique,
        probes,
        steps.extra_s,
        batch,
        b"".join(ids),
        b"".join(positions),
    )
    for record, first_pass, end_pass in finished:
        arrival = record.arrival_s if record.request_id < first else ends[int(record.arrival_s)]
        log.requests.append(
            replace(
                record, arrival_s=arrival, first_token_s=ends[first_pass], finish_s=ends[end_pass]
            )
        )
    return log
