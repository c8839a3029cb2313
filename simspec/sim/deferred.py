"""A closed-loop run decided first and priced after: the same steps, scheduled without a clock.

In a closed loop (every finished request replaced at once by the next) nothing the scheduler
does depends on time: admission follows the batch limit and the KV reservations, a policy that
does not read costs (``reads_costs`` False) decides from the text alone, and each step's commits
follow from its decisions and the match lengths. So :func:`run_deferred` drives the scheduler
loop (:func:`simspec.sim.schedule.schedule`) without a clock, its steps unpriced, records each
verify pass's tokens, contexts and unique experts, prices every step of a batch size in one
array call (:func:`simspec.costs.batch.step_costs`, bounded chunks) and lays the times out with
one cumulative sum over the run's passes in order, which adds each duration to the clock as
SimPy does. The log equals the SimPy run's (``tests/sim/test_deferred.py``).

Batches of one (a batch cap or one client) under a policy that decides each request from its
own row (``per_request``), every expert resident, go further (:func:`in_lanes`). The loop then
serves one request at a time, in order, prefilled and stepped until it finishes, and each
step follows from that request's text alone. So every request is admitted at once as a *lane*
and each :func:`~simspec.sim.step.step` call (``lanes=True``: every row its own batch of one)
advances every unfinished lane: one call per round of steps instead of one per step. The steps
are priced together as above, put in request order (its prefill, then its steps) and laid out
by the same cumulative sum.

An open loop (arrivals at given times), a policy that reads costs, draft trees and an expert
cache with a state (offloaded experts under sampled routing: its state follows the passes in
time order) keep the timed path (:func:`simspec.sim.engine.run_policy` chooses). Offloaded
experts under analytic routing are priced here too: each step's base price in the array call,
then its expected loads (:meth:`~simspec.costs.offload.OffloadCostModel.load`).
"""

from __future__ import annotations

from array import array
from dataclasses import replace

import numpy as np

from simspec.costs.base import CostModel
from simspec.costs.batch import StepCosts, step_costs
from simspec.costs.offload import LoadedPass
from simspec.policies.base import BudgetPolicy
from simspec.sim.records import PASS_PARTS, OffloadLog, PrefillRecord, RequestRecord, RunLog
from simspec.sim.schedule import Prefill, schedule
from simspec.sim.setup import EngineSetup
from simspec.sim.step import EngineState, StepOutcome, mean_unique, step

#: Steps held unpriced before they are priced together, at most this many.
CHUNK_STEPS = 4096


def deferrable(setup: EngineSetup, policy: BudgetPolicy) -> bool:
    """True if a run of ``policy`` may be decided before it is priced (module docstring)."""
    return (
        setup.workload.loop == "closed"
        and setup.tree is None
        and not policy.reads_costs
        and policy.tree_family() is None
        # a sampled cache's state follows the passes in time order
        and (setup.offload is None or setup.references.routing.mode == "analytic")
    )


def in_lanes(setup: EngineSetup, policy: BudgetPolicy) -> bool:
    """True if a deferrable run may advance its requests as lanes (module docstring): batches
    of one, every expert resident, a policy that decides per request."""
    w = setup.workload
    return (
        deferrable(setup, policy)
        and min(w.concurrency, w.max_batch_size) == 1
        and setup.offload is None
        and policy.per_request
    )


_FLOATS = ("draft_s", *PASS_PARTS, "extra_s", "duration_s", "unique")
_INTS = ("fallback_terms", "drafted", "accepted", "probes", "batch_size")


def _priced(
    costs: CostModel,
    drafts: np.ndarray,
    contexts: np.ndarray,
    unique: np.ndarray,
    run: np.ndarray,
    committed: np.ndarray,
) -> tuple[StepCosts, np.ndarray]:
    """N steps of the same batch size priced in one array call (row p: step p, column b: its
    request b, ``unique`` (N, layers)), with no speculation overhead where nobody drafted (as
    in :func:`~simspec.sim.step.step`), and each step's mean unique experts per layer."""
    priced = step_costs(costs, drafts + 1, contexts, unique, run, committed)
    nobody = drafts.sum(axis=1) == 0
    extra = np.where(nobody, 0.0, priced.speculation_overhead_s)
    return priced._replace(speculation_overhead_s=extra), np.asarray(mean_unique(unique))


class _Steps:
    """The run's steps in order as typed columns: what each did and, once priced, its prices
    (a chunk of :class:`~simspec.sim.step.StepOutcome` at most is held at once)."""

    def __init__(self, setup: EngineSetup):
        self.costs = setup.cost_model
        self.offload = setup.offload
        if self.offload is not None:  # base prices in bulk, then each step's loads
            self.costs = self.offload.base
        self.loaded: list[LoadedPass] = []  # offloaded experts: every step's loads, in order
        self.pending: list[LoadedPass | None] = []  # those of the chunk being priced
        self.outcomes: list[StepOutcome] = []  # not priced yet
        self.floats = {name: array("d") for name in _FLOATS}
        self.ints = {name: array("q") for name in _INTS}
        self.request_id = bytearray()  # every step's requests, concatenated (int64)
        self.position = bytearray()  # their positions at the step

    def add(self, outcome: StepOutcome, request_id: np.ndarray, position: np.ndarray) -> None:
        self.outcomes.append(outcome)
        self.request_id += request_id.tobytes()
        self.position += position.tobytes()
        if len(self.outcomes) >= CHUNK_STEPS:
            self.price()

    def price(self) -> None:
        """Price the steps not priced yet, one array call per batch size."""
        todo = self.outcomes
        self.pending = [None] * len(todo)
        by_size: dict[int, list[int]] = {}
        for j, outcome in enumerate(todo):
            by_size.setdefault(len(outcome.drafts), []).append(j)
        names = ("draft_s", *PASS_PARTS, "extra_s")
        prices = {name: np.zeros(len(todo)) for name in names}
        fallback = np.zeros(len(todo), dtype=np.int64)
        means = np.zeros(len(todo))  # mean unique experts per layer (0 without MoE layers)
        for rows in by_size.values():
            group = [todo[j] for j in rows]
            unique = np.array([o.unique for o in group], dtype=float)
            costs, means[rows] = _priced(
                self.costs,
                np.array([o.drafts for o in group]),
                np.array([o.contexts for o in group]),
                unique,
                np.array([o.run for o in group]),
                np.array([o.committed for o in group]),
            )
            if self.offload is not None and self.offload.draft_host_s:
                # The runtime's host time per draft pass (the base priced the kernels): one
                # pass per draft depth, as draft_phase_by_depth runs them.
                depth = np.array([o.run for o in group]).max(axis=1, initial=0)
                costs = costs._replace(draft_s=costs.draft_s + self.offload.draft_host_s * depth)
            for name in names:
                prices[name][rows] = getattr(
                    costs, "speculation_overhead_s" if name == "extra_s" else name
                )
            fallback[rows] = costs.fallback_terms
            if self.offload is not None:
                loaded = self._load(group, costs, unique)
                prices["moe_s"][rows] = [one.cost.moe_s for one in loaded]
                for j, one in zip(rows, loaded, strict=True):
                    self.pending[j] = one
        drafted = np.array([o.drafted_total for o in todo], dtype=np.int64)
        f, n = self.floats, self.ints
        for name, column in prices.items():
            f[name].frombytes(column.tobytes())
        priced = StepCosts(
            draft_s=prices["draft_s"],
            **{name: prices[name] for name in PASS_PARTS},
            fallback_terms=fallback,
            speculation_overhead_s=prices["extra_s"],
        )
        f["duration_s"].frombytes(priced.duration_s.tobytes())
        n["fallback_terms"].frombytes(fallback.tobytes())
        f["unique"].frombytes(means.tobytes())
        n["drafted"].frombytes(drafted.tobytes())
        n["accepted"].extend([o.accepted_total for o in todo])
        n["probes"].extend([o.probes for o in todo])
        n["batch_size"].extend([len(o.drafts) for o in todo])
        if self.offload is not None:
            self.loaded.extend(one for one in self.pending if one is not None)
        todo.clear()

    def _load(
        self, group: list[StepOutcome], costs: StepCosts, unique: np.ndarray
    ) -> list[LoadedPass]:
        """Each step of ``group`` (priced as ``costs``) with its expected loads, as
        :func:`simspec.sim.step.step` prices them."""
        off = self.offload
        assert off is not None
        guided = off.model.prefetch == "draft_guided"
        out = []
        for i, outcome in enumerate(group):
            fed = outcome.drafts + 1
            misses = off.expected_misses(fed, unique[i])
            drafted = outcome.drafted_total
            out.append(
                off.load(
                    costs.verify(i),
                    unique[i],
                    misses,
                    sum(fed.tolist()),
                    lead_s=float(costs.draft_s[i]) if guided else 0.0,
                    predicted=bool(drafted) or not guided,
                )
            )
        return out


def run_deferred(setup: EngineSetup, policy: BudgetPolicy) -> RunLog:
    """Simulate a closed-loop workload under ``policy`` (:func:`deferrable`); the records
    :func:`simspec.sim.engine.run_policy` gives."""
    if in_lanes(setup, policy):
        return _lay_out(setup, *_run_lanes(setup, policy))
    passes = array("q")  # the run's passes in order: step index, or -1 - prefill index
    prefills: list[Prefill] = []
    finished: list[RequestRecord] = []  # their times are pass indices until laid out below
    steps = _Steps(setup)
    state = EngineState.start(setup, policy)
    scheduler = schedule(setup, policy, state, finished, priced=False)
    count = 0  # steps so far
    index = -1  # the pass whose end the scheduler is told: the clock of this schedule
    try:
        request = next(scheduler)
        while True:
            index += 1
            if type(request) is StepOutcome:
                passes.append(count)
                count += 1
                steps.add(request, state.active.request_id, state.active.position)
            else:
                assert type(request) is Prefill  # a closed loop waits for no arrival
                passes.append(-1 - len(prefills))
                prefills.append(request)
            request = scheduler.send(float(index))
    except StopIteration:
        pass
    steps.price()
    order = np.frombuffer(passes, dtype=np.int64) if passes else np.zeros(0, dtype=np.int64)
    return _lay_out(setup, order, prefills, finished, steps)


def _lay_out(
    setup: EngineSetup,
    order: np.ndarray,
    prefills: list[Prefill],
    finished: list[RequestRecord],
    steps: _Steps,
) -> RunLog:
    """The records of a schedule decided without a clock: ``order`` holds the run's passes in
    order (step index into ``steps``' columns, or -1 - index into ``prefills``), the times of
    ``finished`` are pass indices (a closed loop's first requests keep their arrival)."""
    first = min(setup.workload.concurrency, setup.workload.num_requests)
    is_step = order >= 0
    durations = np.empty(len(order))
    durations[is_step] = np.frombuffer(steps.floats["duration_s"], dtype=float)[order[is_step]]
    prefill_s = np.array([prefill.cost.total_s for prefill in prefills], dtype=float)
    durations[~is_step] = prefill_s[-1 - order[~is_step]]
    ends = np.cumsum(durations)  # the clock after each pass, added in order as SimPy does
    starts = np.concatenate([[0.0], ends[:-1]])
    log = RunLog()
    if steps.offload is not None:
        log.offload = _offload_log(order, starts, prefills, steps)
    for index in np.flatnonzero(~is_step).tolist():
        prefill = prefills[-1 - int(order[index])]
        start = float(starts[index])
        log.prefills.append(PrefillRecord(start, prefill.requests, prefill.tokens, prefill.cost))
    f, n = steps.floats, steps.ints
    drafted = np.frombuffer(n["drafted"], dtype=np.int64)
    batch = np.frombuffer(n["batch_size"], dtype=np.int64)
    log.steps.extend(
        array("d", starts[is_step].tobytes()),
        array("q", (drafted + batch).tobytes()),
        n["drafted"],
        n["accepted"],
        f["draft_s"],
        (*(f[name] for name in PASS_PARTS), n["fallback_terms"]),
        f["unique"],
        n["probes"],
        f["extra_s"],
        n["batch_size"],
        bytes(steps.request_id),
        bytes(steps.position),
    )
    end_s = ends.tolist()
    for record in finished:
        arrival = record.arrival_s if record.request_id < first else end_s[int(record.arrival_s)]
        first_token, finish = end_s[int(record.first_token_s)], end_s[int(record.finish_s)]
        log.requests.append(
            replace(record, arrival_s=arrival, first_token_s=first_token, finish_s=finish)
        )
    return log


def _run_lanes(
    setup: EngineSetup, policy: BudgetPolicy
) -> tuple[np.ndarray, list[Prefill], list[RequestRecord], _Steps]:
    """A run of batches of one (:func:`in_lanes`) as :func:`_lay_out` takes it.

    One request at a time is served, in order, each prefilled and then stepped until it
    finishes: its steps depend on nothing but its own text. So every request is admitted at
    once as a lane, every lane advances by one step per :func:`~simspec.sim.step.step` call
    until it finishes, and the steps are priced together and then put in request order.
    """
    n = setup.workload.num_requests
    first = min(setup.workload.concurrency, n)
    state = EngineState.start(setup, policy)
    prompts = [state.table.prompt[[r]] for r in range(n)]  # as the scheduler admits them
    prefill = setup.cost_model.prefill
    prefills = [Prefill(1, int(p.sum()), prefill(p)) for p in prompts]
    state.admit(list(range(n)), 0.0)
    finished: list[RequestRecord] = []
    held: list[tuple[np.ndarray, np.ndarray, StepOutcome]] = []  # lanes' steps not priced yet
    size = 0  # steps held
    columns: dict[str, list[np.ndarray]] = {}  # every step's, round by round
    lap = 0  # the round: what the records' times are until they are set below
    while len(state.active):
        outcome = step(state, policy, setup, priced=False, lanes=True)
        active = state.active
        held.append((active.request_id, active.position.copy(), outcome))
        size += len(active)
        finished += state.apply(outcome, float(lap), lanes=True)
        lap += 1
        if size >= CHUNK_STEPS or not len(state.active):
            for name, column in _price_lanes(setup, held).items():
                columns.setdefault(name, []).append(column)
            held, size = [], 0
    request = np.concatenate(columns.pop("request_id"))
    by_request = np.argsort(request, kind="stable")  # rounds were in order: so are the steps
    steps = _Steps(setup)
    for table in (steps.floats, steps.ints):  # one column at a time: bounded memory
        for name, target in table.items():
            target.frombytes(np.concatenate(columns.pop(name))[by_request].tobytes())
    steps.request_id += request[by_request].tobytes()
    steps.position += np.concatenate(columns.pop("position"))[by_request].tobytes()
    # request r's prefill, then its steps: pass p of step j (in request order) is j + r + 1
    counts = np.bincount(request, minlength=n)
    prefill_pass = np.arange(n) + np.cumsum(counts) - counts
    order = np.empty(n + len(request), dtype=np.int64)
    order[prefill_pass] = -1 - np.arange(n)
    order[np.arange(len(request)) + request[by_request] + 1] = np.arange(len(request))
    last = (prefill_pass + counts).tolist()  # each request's last pass
    first_token = prefill_pass.tolist()
    records = sorted(finished, key=lambda record: record.request_id)
    for i, record in enumerate(records):
        r = record.request_id
        arrival = record.arrival_s if r < first else float(last[r - first])
        records[i] = replace(
            record, arrival_s=arrival, first_token_s=float(first_token[r]), finish_s=float(last[r])
        )
    return order, prefills, records, steps


def _price_lanes(
    setup: EngineSetup, held: list[tuple[np.ndarray, np.ndarray, StepOutcome]]
) -> dict[str, np.ndarray]:
    """The columns of :class:`_Steps` (and ``request_id``, ``position``) of lanes' steps
    (request, position and outcome per round), priced in one array call: each a batch of one."""
    lanes = [outcome for _, _, outcome in held]
    drafts = np.concatenate([o.drafts for o in lanes])
    costs, means = _priced(
        setup.cost_model,
        drafts[:, None],
        np.concatenate([o.contexts for o in lanes])[:, None],
        np.concatenate([o.unique for o in lanes]),
        np.concatenate([o.run for o in lanes])[:, None],
        np.concatenate([o.committed for o in lanes])[:, None],
    )
    out = {name: getattr(costs, name) for name in PASS_PARTS}
    out.update(
        draft_s=costs.draft_s,
        extra_s=costs.speculation_overhead_s,
        duration_s=costs.duration_s,
        unique=means,
        fallback_terms=costs.fallback_terms,
        drafted=drafts,
        accepted=np.concatenate([o.accepted for o in lanes]),
        probes=np.concatenate([o.probes for o in lanes]),
        batch_size=np.ones(len(drafts), dtype=np.int64),
        request_id=np.concatenate([rid for rid, _, _ in held]),
        position=np.concatenate([position for _, position, _ in held]),
    )
    return out


def _offload_log(
    order: np.ndarray, starts: np.ndarray, prefills: list[Prefill], steps: _Steps
) -> OffloadLog:
    """The link's work in time order, as :func:`simspec.sim.engine.serve` records it."""
    log = OffloadLog()
    draft = steps.floats["draft_s"]
    for index, which in enumerate(order.tolist()):
        start = float(starts[index])
        if which >= 0:
            log.append(start + draft[which], steps.loaded[which], True)
        else:
            loaded = prefills[-1 - which].loaded
            if loaded is not None:
                log.append(start, loaded, False)
    return log
