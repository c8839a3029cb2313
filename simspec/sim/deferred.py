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


class _Pending:
    """Unpriced steps, their durations filled in once priced."""

    def __init__(self, setup: EngineSetup, durations: list[float]):
        self.costs = setup.cost_model
        self.durations = durations  # every pass of the run, in order
        self.steps: list[tuple[int, StepOutcome]] = []  # (pass index, outcome) awaiting prices
        self.priced: list[tuple[int, StepOutcome, float, PassCost, float]] = []

    def add(self, index: int, outcome: StepOutcome) -> None:
        self.steps.append((index, outcome))
        if len(self.steps) >= CHUNK_STEPS:
            self.flush()

    def flush(self) -> None:
        """Price the pending steps, one array call per batch size."""
        by_size: dict[int, list[tuple[int, StepOutcome]]] = {}
        for item in self.steps:
            by_size.setdefault(len(item[1].drafts), []).append(item)
        for group in by_size.values():
            outcomes = [o for _, o in group]
            costs = step_costs(
                self.costs,
                np.array([o.drafts for o in outcomes]) + 1,
                np.array([o.contexts for o in outcomes]),
                np.array([o.unique for o in outcomes]),
                np.array([o.run for o in outcomes]),
                np.array([o.committed for o in outcomes]),
            )
            draft_s = costs.draft_s.tolist()
            extra_s = costs.speculation_overhead_s.tolist()
            for j, (index, outcome) in enumerate(group):
                verify = costs.verify[j]
                # As in step: no overhead when nobody drafts (chains: drafts = asks).
                extra = extra_s[j] if outcome.drafted_total else 0.0
                self.durations[index] = draft_s[j] + verify.total_s + extra
                self.priced.append((index, outcome, draft_s[j], verify, extra))
        self.steps.clear()


def run_deferred(setup: EngineSetup, policy: BudgetPolicy) -> RunLog:
    """Simulate a closed-loop workload under ``policy`` (:func:`deferrable`); the records
    :func:`simspec.sim.engine.run_policy` gives."""
    w = setup.workload
    total = w.num_requests
    state = EngineState.start(setup, policy)
    first = min(w.concurrency, total)
    waiting: deque[int] = deque(range(first))
    next_closed = first
    durations: list[float] = []  # each pass's duration; a pass's index stands for its end
    members: list[tuple[np.ndarray, np.ndarray]] = []  # each step's requests and positions
    prefills: list[tuple[int, int, int, PassCost]] = []
    finished: list[tuple[RequestRecord, int, int]] = []  # record, first token pass, end pass
    pending = _Pending(setup, durations)
    prefill_end: dict[int, int] = {}
    while state.finished < total:
        admitted = state.admissible(waiting, w.concurrency, setup.kv_capacity_bytes)
        if admitted:
            prompts = state.table.prompt[admitted]
            cost = setup.cost_model.prefill(prompts)
            prefills.append((len(durations), len(admitted), int(prompts.sum()), cost))
            for rid in admitted:
                prefill_end[rid] = len(durations)
            durations.append(cost.total_s)
            state.admit(admitted, 0.0)  # the first-token times are laid out below
        outcome = step(state, policy, setup, priced=False)
        index = len(durations)
        durations.append(0.0)
        members.append((state.active.request_id.copy(), state.active.position.copy()))
        pending.add(index, outcome)
        for record in state.apply(outcome, 0.0):
            finished.append((record, prefill_end.pop(record.request_id), index))
            if next_closed < total:  # the next request takes the finished one's place
                state.arrival_s[next_closed] = index  # arrives when this pass ends
                waiting.append(next_closed)
                next_closed += 1
    pending.flush()
    ends = np.cumsum(durations).tolist()  # the clock after each pass, added in order
    starts = [0.0, *ends[:-1]]
    log = RunLog()
    for index, requests, tokens, cost in prefills:
        log.prefills.append(PrefillRecord(starts[index], requests, tokens, cost))
    for (index, outcome, draft_s, verify, extra), (ids, position) in zip(
        sorted(pending.priced, key=lambda item: item[0]), members, strict=True
    ):
        log.steps.append(
            starts[index],
            outcome.drafted_total + len(outcome.drafts),
            outcome.drafted_total,
            outcome.accepted_total,
            draft_s,
            verify,
            outcome.unique_experts,
            outcome.probes,
            extra,
            ids,
            position,
        )
    for record, first_pass, end_pass in finished:
        arrival = record.arrival_s if record.request_id < first else ends[int(record.arrival_s)]
        log.requests.append(
            replace(
                record, arrival_s=arrival, first_token_s=ends[first_pass], finish_s=ends[end_pass]
            )
        )
    return log
