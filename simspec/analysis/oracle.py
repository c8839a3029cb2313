"""The hindsight oracle: the best possible draft lengths for given reference sequences.

For one request, state i means i output tokens committed. Choosing k drafts at state i costs

    cost(i, k) = Σ_{j=1..k} draft_step(context + j − 1) + verify(k + 1 tokens, U_i(k))

where U_i(k) are the distinct experts of exactly the k + 1 fed tokens, rejected drafts included
(their experts are loaded although they are thrown away: the counterfactual MoE cost), and moves
to state next(i, k) = i + min(k, m_i) + 1. The fewest-seconds path from state 1 to state L is a
shortest path on a DAG, solved by backward dynamic programming (Amankulov & Mamatin, arXiv
2609.22156, pose budget selection as a stochastic shortest path; with the reference sequences
fixed it is deterministic):

    V(L) = 0,    V(i) = min_k [cost(i, k) + V(next(i, k))]

At batch size 1 (closed loop, concurrency 1) this is exact: the engine executes the plan at
exactly V(1) seconds of decode time per request. With B > 1 requests share each pass (its fixed
overhead, its expert union), which couples their choices; the joint problem is exponential in B.
The approximation used here (see :func:`batched_plan`): each request pays its share of a typical
pass plus the marginal cost its tokens add (marginal-cost attribution), solved per request by the
same DP, refined by coordinate descent over the batch statistics of the previous plan's run; every
candidate plan and every fixed k is run through the engine, and the best by mean TPOT is kept,
so the approximate oracle is never worse than the best fixed k on the same reference sequences.

Each request's cost(i, k) table is one array expression over (state, k)
(:func:`request_tables`: at batch size 1 a state's k draft steps plus its (k + 1)-token verify
pass, :func:`alone_costs`; at B > 1 the request's marginal-cost attribution inside a typical
batch, :class:`StepCost`; every pass priced by the cost model's vectorised ``verify_totals`` and
``draft_step_totals``, bit for bit what ``verify_pass`` and ``draft_step`` give pass by pass;
expert unions from :func:`unique_experts_table`), and the DPs of all requests run side by side
(:func:`solve_many`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from simspec.costs.batch import draft_step_totals, speculation_overhead_totals, verify_totals
from simspec.physics.experts import independent_union
from simspec.policies.base import BatchView, BudgetPolicy, Policy
from simspec.policies.fixed import FixedPolicy
from simspec.routing.sets import to_sets, window_union_sizes
from simspec.sim.engine import EngineSetup, RunLog, run_policy

__all__ = [
    "OraclePolicy",
    "OracleResult",
    "RequestTables",
    "StepCost",
    "alone_costs",
    "batched_plan",
    "exact_plan",
    "oracle_plan",
    "request_tables",
    "request_tables_many",
    "solve",
    "solve_many",
    "unique_experts_by_k",
    "unique_experts_table",
]


def unique_experts_by_k(setup: EngineSetup, request_id: int, state: int, kmax: int) -> np.ndarray:
    """Distinct experts per layer for k = 0..kmax drafts at ``state``: (kmax + 1, layers).

    The k-draft pass feeds the first k + 1 of the kmax + 1 tokens, so in Monte-Carlo mode one
    cumulative union over the fed tokens gives every k at once.
    """
    refs = setup.references
    if not refs.num_layers:
        return np.zeros((kmax + 1, 0))
    if refs.routing.mode != "analytic":  # sampled or replayed sets
        sets = to_sets(refs.fed_routing(request_id, state, kmax), refs.num_experts)
        return np.logical_or.accumulate(sets, axis=0).sum(axis=-1).astype(float)
    return np.stack([refs.pass_unique_experts([(request_id, state, k)]) for k in range(kmax + 1)])


def unique_experts_table(setup: EngineSetup, request_id: int, kmax: int) -> np.ndarray:
    """:func:`unique_experts_by_k` at every state of a request: (L, kmax + 1, layers).

    Row i is that function at state i (row 0 too). With sampled or replayed sets the request's
    stored tokens (:meth:`~simspec.text.reference.ReferenceSet.state_tokens`) are each read
    once: every state's union grows along its true tokens, then its rejected drafts
    (:func:`~simspec.routing.sets.window_union_sizes`, bitmasks and popcounts), not L separate
    unions, nor each true token converted once per window it is in (up to kmax + 1). The
    counts are the same integers, kept as int32 (so the tables price each count once, see
    :func:`_union_table`). Analytic routing gives expected (fractional) counts, as floats.
    """
    refs = setup.references
    last = refs.sequence(request_id).output_tokens
    if not refs.num_layers:
        return np.zeros((last, kmax + 1, 0))
    if refs.routing.mode != "analytic":
        true, rejected, accepted = refs.state_tokens(request_id, kmax)
        return window_union_sizes(true, rejected, accepted, kmax, refs.num_experts)
    return np.stack([unique_experts_by_k(setup, request_id, i, kmax) for i in range(last)])


def alone_costs(setup: EngineSetup, contexts: np.ndarray, unique: np.ndarray) -> np.ndarray:
    """cost(i, k) at batch size 1 for states with ``contexts`` (S,) and ``unique`` (S, K+1,
    layers): the k draft steps (a running sum) plus the (k + 1)-token verify pass; (S, K+1).

    Every draft step and every pass is priced in one call each
    (:func:`~simspec.costs.batch.draft_step_totals`,
    :func:`~simspec.costs.batch.verify_totals`).
    """
    costs = setup.cost_model
    states, width = unique.shape[:2]
    kmax = width - 1
    ctx = np.asarray(contexts, dtype=np.int64)
    steps = draft_step_totals(costs, (ctx[:, None] + np.arange(kmax)).reshape(-1, 1))
    draft = np.cumsum(np.hstack([np.zeros((states, 1)), steps.reshape(states, kmax)]), axis=1)
    tokens = np.tile(np.arange(1, width + 1), states).reshape(-1, 1)
    union, index = _union_table(0.0, unique.reshape(states * width, -1), 1.0)
    verify = verify_totals(
        costs, tokens, np.repeat(ctx, width).reshape(-1, 1), union, unique_index=index
    )
    return draft + verify.reshape(states, width)


def _speculation_table(
    setup: EngineSetup, contexts: np.ndarray, matches: np.ndarray, kmax: int
) -> np.ndarray:
    """The engine's speculation overhead of drafting k = 1..kmax at each state, (S, kmax): the
    request commits min(k, m) + 1 tokens (:func:`~simspec.costs.batch.
    speculation_overhead_totals`; the engine charges it whenever someone drafts)."""
    if kmax < 1:
        return np.zeros((len(contexts), 0))
    ks = np.arange(1, kmax + 1)
    committed = np.minimum(ks[None, :], np.asarray(matches)[:, None]) + 1
    ctx = np.repeat(np.asarray(contexts, dtype=np.int64), kmax)
    totals = speculation_overhead_totals(
        setup.cost_model, committed.reshape(-1, 1), ctx.reshape(-1, 1)
    )
    return totals.reshape(len(contexts), kmax)


def _union_table(
    base: np.ndarray | float, unique: np.ndarray, scale: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray | None]:
    """The passes' unions ``base + unique · scale`` (rows, layers), as a table of values per
    layer and an index into it when ``unique`` holds counts (an integer array: sampled or
    replayed routing), so the cost model evaluates its expert kernel once per value; else as
    is.
    """
    if not unique.size or not np.issubdtype(unique.dtype, np.integer):
        return base + unique * scale, None
    counts = unique
    values = np.arange(int(counts.max()) + 1, dtype=float)[:, None]
    return np.broadcast_to(base + values * scale, (len(values), unique.shape[1])), counts


class StepCost:
    """Marginal-cost attribution of one request's step inside a typical batch (B > 1).

    The other requests are summarised by their count, tokens per request, context and the
    expected union of their experts. The request pays its share of the pass without drafts
    plus everything its drafts add: verify growth (tokens, and new experts: its own union times
    the fraction of experts the others have not loaded) and draft steps it adds.
    """

    def __init__(
        self,
        setup: EngineSetup,
        others: int,
        tokens_each: float,
        context: float,
        others_union: np.ndarray,
    ):
        self.setup = setup
        self.others = others
        self.tokens_each = max(1, round(tokens_each))
        self.context = int(context)
        self.others_union = others_union
        self._others_only: dict[int, np.ndarray] = {}  # kmax -> draft steps of the others

    def _draft_extras(self, contexts: np.ndarray, kmax: int) -> np.ndarray:
        """What the request's j-th draft step adds to the batch's, j = 1..kmax: (S, kmax).

        Draft step j runs for the others still drafting (those with k ≥ j: all of them while
        j ≤ tokens_each − 1) at context + j − 1, plus this request at its own context + j − 1.
        """
        costs = self.setup.cost_model
        drafting = self.others if self.tokens_each - 1 >= 1 else 0
        depths = np.arange(kmax)
        with_me = np.empty((len(contexts), kmax, 2), dtype=np.int64)  # the others, this one
        with_me[..., 0] = self.context + depths
        with_me[..., 1] = contexts[:, None] + depths
        extra = draft_step_totals(costs, with_me.reshape(-1, 2), counts=np.array([drafting, 1]))
        extra = extra.reshape(len(contexts), kmax)
        if drafting:
            if kmax not in self._others_only:
                others = np.repeat(self.context + depths, drafting).reshape(kmax, drafting)
                self._others_only[kmax] = draft_step_totals(costs, others)
            shared = depths + 1 <= self.tokens_each - 1  # depths where the others draft too
            extra[:, shared] -= self._others_only[kmax][shared]
        return extra

    def table(self, contexts: np.ndarray, unique: np.ndarray) -> np.ndarray:
        """cost(i, k) for states with ``contexts`` (S,) and ``unique`` (S, K+1, layers): (S, K+1).

        Every (state, k) pass is one row of a single
        :func:`~simspec.costs.batch.verify_totals` call with two columns: the
        others (``counts`` = their number; their tokens and context) and this request (its
        k + 1 tokens and own context). Tokens and contexts are integers, so this prices each
        pass exactly as the batch written out request by request.
        """
        costs, n = self.setup.cost_model, self.setup.references.num_experts
        states, width = unique.shape[:2]
        rows, batch = states * width, self.others + 1
        tokens = np.empty((states, width, 2), dtype=np.int64)
        tokens[..., 0] = self.tokens_each
        tokens[..., 1] = np.arange(1, width + 1)
        ctxs = np.empty((states, width, 2), dtype=np.int64)
        ctxs[..., 0] = self.context
        ctxs[..., 1] = np.asarray(contexts, dtype=np.int64)[:, None]
        covered = self.others_union / n if n else 0.0
        union, index = _union_table(self.others_union, unique.reshape(rows, -1), 1.0 - covered)
        out = verify_totals(
            costs,
            tokens.reshape(rows, 2),
            ctxs.reshape(rows, 2),
            union,
            counts=np.array([self.others, 1]),
            unique_index=index,
        ).reshape(states, width)
        base = out[:, :1]
        out = base / batch + (out - base)
        extra = self._draft_extras(np.asarray(contexts, dtype=np.int64), width - 1)
        for j in range(1, width):  # draft step j is paid by every k >= j (a running sum)
            out[:, j:] += extra[:, j - 1 : j]
        return out

    def __call__(self, ctx: int, unique: np.ndarray) -> np.ndarray:
        """cost(i, k) of one state (context ``ctx``, ``unique`` (K+1, layers)): (K+1,)."""
        return self.table(np.array([ctx]), unique[None])[0]


@dataclass(frozen=True, slots=True)
class RequestTables:
    """One request's DP: step costs, transitions, values and the optimal choice per state."""

    request_id: int
    cost_s: np.ndarray  # (L, K+1): cost(i, k); row 0 unused
    next_state: np.ndarray  # (L, K+1): next(i, k)
    value_s: np.ndarray  # (L+1,): V(i), V(L) = 0
    choice: np.ndarray  # (L,): argmin_k, smallest k on ties
    match_lengths: np.ndarray  # (L,)
    confidences: np.ndarray  # (L, K_max)

    def path(self) -> list[int]:
        """States visited when following the optimal choices from state 1."""
        states, i, last = [], 1, len(self.choice)
        while i < last:
            states.append(i)
            i = int(self.next_state[i, self.choice[i]])
        return states


@dataclass(frozen=True, slots=True)
class OraclePolicy(Policy):
    """Replays a precomputed plan: k for each (request, state). Not a registered policy."""

    plan: Mapping[tuple[int, int], int] = field(hash=False)
    cap: int

    def decide(self, view: BatchView) -> np.ndarray:
        """The planned k of each request at its state (within the step's cap)."""
        plan, cap = self.plan, view.cap
        keys = zip(view.request_id.tolist(), view.position.tolist(), strict=True)
        return np.array([min(plan.get(key, 0), cap) for key in keys], dtype=np.int64)

    def budget_cap(self, max_draft_tokens: int) -> int:
        """The plan's largest k."""
        return min(self.cap, max_draft_tokens)


@dataclass(frozen=True)
class OracleResult:
    """The oracle's plan, how it was found, and the per-request DP tables."""

    policy: OraclePolicy
    exact: bool
    method: str
    tables: dict[int, RequestTables]
    log: RunLog


def solve(cost_s: np.ndarray, next_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Backward DP over states 1..L−1 (module docstring) for one request; returns (V, argmin)."""
    return solve_many([cost_s], [next_state])[0]


def solve_many(
    cost_s: list[np.ndarray], next_state: list[np.ndarray]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The backward DP of many requests at once: (V, argmin) for each.

    The DP is sequential over states but independent across requests, so state i of every
    request is one vectorised step over a (requests, K+1) array (tables padded to the longest
    request; states at or past a request's end keep V = 0).
    """
    if not cost_s:
        return []
    order = np.argsort([-len(c) for c in cost_s], kind="stable")  # longest first
    lasts = np.array([len(cost_s[r]) for r in order])
    rows, longest, width = len(order), int(lasts[0]), cost_s[0].shape[1]
    cost = np.zeros((rows, longest, width))
    nxt = np.zeros((rows, longest, width), dtype=np.int64)
    for row, r in enumerate(order):
        cost[row, : lasts[row]], nxt[row, : lasts[row]] = cost_s[r], next_state[r]
    value = np.zeros((rows, longest + 1))
    flat_value = value.reshape(-1)  # next(i, k) of row r is entry r·(L + 1) + next of it
    nxt += (np.arange(rows) * (longest + 1))[:, None, None]
    choice = np.zeros((rows, longest), dtype=np.int64)
    row_index = np.arange(rows)
    live = 0
    for i in range(longest - 1, 0, -1):
        while live < rows and lasts[live] > i:  # rows [0, live) have a state i to decide
            live += 1
        totals = cost[:live, i] + flat_value.take(nxt[:live, i])
        best = np.argmin(totals, axis=1)  # first minimum: the smallest k on ties
        choice[:live, i] = best
        value[:live, i] = totals[row_index[:live], best]
    out: list[tuple[np.ndarray, np.ndarray]] = [(value[0], choice[0])] * rows
    for row, r in enumerate(order):
        out[r] = (value[row, : lasts[row] + 1].copy(), choice[row, : lasts[row]].copy())
    return out


def request_tables(
    setup: EngineSetup,
    request_id: int,
    kmax: int,
    step_cost: StepCost | None = None,
    unique: np.ndarray | None = None,
) -> RequestTables:
    """Build and solve one request's DP with the B = 1 pass cost (or ``step_cost``).

    ``unique`` is :func:`unique_experts_table` of the request, if the caller already has it.
    """
    uniques = None if unique is None else {request_id: unique}
    return request_tables_many(setup, [request_id], kmax, step_cost, uniques)[request_id]


def request_tables_many(
    setup: EngineSetup,
    request_ids: Iterable[int],
    kmax: int,
    step_cost: StepCost | None = None,
    uniques: Mapping[int, np.ndarray] | None = None,
) -> dict[int, RequestTables]:
    """:func:`request_tables` of many requests: each request's (state, k) costs as one array
    expression, then every request's DP solved together (:func:`solve_many`).

    ``uniques`` maps request ids to their :func:`unique_experts_table`, where already known.
    """
    built = []
    for rid in request_ids:
        seq = setup.references.sequence(rid)
        last = seq.output_tokens
        cost = np.zeros((last, kmax + 1))
        unique = uniques[rid] if uniques is not None and rid in uniques else None
        if unique is None:
            unique = unique_experts_table(setup, rid, kmax)
        if last > 1:  # every state i = 1..L-1 and every k at once
            contexts = seq.prompt_tokens + np.arange(1, last)
            if step_cost is None:
                cost[1:] = alone_costs(setup, contexts, unique[1:])
                cost[1:, 1:] += _speculation_table(setup, contexts, seq.match_lengths[1:], kmax)
            else:
                cost[1:] = step_cost.table(contexts, unique[1:])
        states = np.arange(last)[:, None]
        m = seq.match_lengths
        nxt = np.where(states >= 1, states + np.minimum(np.arange(kmax + 1), m[:, None]) + 1, last)
        built.append((rid, seq, cost, nxt))
    solved = solve_many([b[2] for b in built], [b[3] for b in built])
    return {
        rid: RequestTables(rid, cost, nxt, value, choice, seq.match_lengths.copy(), seq.confidences)
        for (rid, seq, cost, nxt), (value, choice) in zip(built, solved, strict=True)
    }


def _policy_from_tables(tables: dict[int, RequestTables], kmax: int) -> OraclePolicy:
    plan = {
        (rid, i): int(t.choice[i]) for rid, t in tables.items() for i in range(1, len(t.choice))
    }
    return OraclePolicy(plan, kmax)


def _batch_stats(log: RunLog, num_experts: int) -> tuple[float, float, float, np.ndarray]:
    """Mean batch size, tokens per request, context and others' union from a run."""
    steps = log.steps
    sizes = steps.column("batch_size")
    batch = float(np.mean(sizes))
    tokens = float(np.mean(steps.column("fed_tokens") / sizes))
    union = float(np.mean(steps.column("unique_experts")))
    context = float(np.mean([(r.prompt_tokens + r.output_tokens / 2) for r in log.requests]))
    others = max(batch - 1.0, 0.0)
    if num_experts and batch > 0:  # remove one request's share of an independent-union
        union = independent_union(num_experts, union, others / batch)
    return batch, tokens, context, np.array(union)


def exact_plan(setup: EngineSetup, kmax: int) -> OracleResult:
    """Exact per-request DP (valid at batch size 1)."""
    tables = request_tables_many(setup, range(setup.workload.num_requests), kmax)
    policy = _policy_from_tables(tables, kmax)
    return OracleResult(
        policy, True, "backward DP per request (B = 1)", tables, run_policy(setup, policy)
    )


def batched_plan(setup: EngineSetup, kmax: int, rounds: int = 2) -> OracleResult:
    """Approximate oracle for B > 1 (module docstring); never worse than the best fixed k."""
    n = setup.references.num_experts
    candidates: list[tuple[float, str, BudgetPolicy, RunLog, dict[int, RequestTables]]] = []
    for k in range(kmax + 1):
        fixed = FixedPolicy(draft_tokens=k)
        log = run_policy(setup, fixed)
        candidates.append((log.mean_tpot_s(), f"fixed k = {k}", fixed, log, {}))
    best_log = min(candidates, key=lambda c: c[0])[3]
    requests = range(setup.workload.num_requests)
    uniques = {rid: unique_experts_table(setup, rid, kmax) for rid in requests}  # every round's
    for r in range(rounds):
        batch, tokens, context, union = _batch_stats(best_log, n)
        step = StepCost(setup, max(round(batch) - 1, 0), tokens, context, union)
        tables = request_tables_many(setup, requests, kmax, step, uniques)
        policy = _policy_from_tables(tables, kmax)
        log = run_policy(setup, policy)
        candidates.append((log.mean_tpot_s(), f"attribution DP round {r + 1}", policy, log, tables))
        best_log = min(candidates, key=lambda c: c[0])[3]
    _, how, winner, log, tables = min(candidates, key=lambda c: c[0])
    if isinstance(winner, FixedPolicy):  # the fixed plan won: spell it out as a plan
        k = winner.draft_tokens
        refs = setup.references
        plan = {
            (rid, i): k
            for rid in range(setup.workload.num_requests)
            for i in range(1, refs.sequence(rid).output_tokens)
        }
        policy = OraclePolicy(plan, k)
    else:
        assert isinstance(winner, OraclePolicy)
        policy = winner
    method = (
        "marginal-cost attribution DP with coordinate descent (B > 1), best of "
        f"{len(candidates)} engine-evaluated plans incl. every fixed k; chosen: {how}"
    )
    return OracleResult(policy, False, method, tables, log)


def oracle_plan(setup: EngineSetup) -> OracleResult:
    """The oracle for ``setup``: exact at batch size 1, approximate otherwise."""
    kmax = setup.max_draft_tokens
    w = setup.workload
    if w.loop == "closed" and min(w.concurrency, w.num_requests) == 1:
        return exact_plan(setup, kmax)
    return batched_plan(setup, kmax)
