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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from simspec.physics.experts import independent_union
from simspec.policies.base import BudgetPolicy, DecodeState
from simspec.policies.fixed import FixedPolicy
from simspec.routing.sets import cumulative_union_sizes, to_sets
from simspec.sim.engine import EngineSetup, RunLog, run_policy


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
class OraclePolicy:
    """Replays a precomputed plan: k for each (request, state). Not a registered policy."""

    plan: Mapping[tuple[int, int], int] = field(hash=False)
    cap: int

    def continue_drafting(self, state: DecodeState) -> bool:
        """Draft until the planned k for this request and state."""
        return state.drafted < self.plan.get((state.request_id, state.position), 0)

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

    Row i is that function at state i (row 0 too). With sampled or replayed sets it is one
    gather of every state's fed tokens and a cumulative bitmask union over them
    (:func:`~simspec.routing.sets.cumulative_union_sizes`), not L separate unions; the counts
    are the same integers.
    """
    refs = setup.references
    last = refs.sequence(request_id).output_tokens
    if not refs.num_layers:
        return np.zeros((last, kmax + 1, 0))
    if refs.routing.mode != "analytic":
        routing = refs.state_routing(request_id, kmax)
        return cumulative_union_sizes(routing, refs.num_experts).astype(float)
    return np.stack([unique_experts_by_k(setup, request_id, i, kmax) for i in range(last)])


def solve(cost_s: np.ndarray, next_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Backward DP over states 1..L−1 (module docstring); returns (V, argmin)."""
    last = cost_s.shape[0]
    value = np.zeros(last + 1)
    choice = np.zeros(last, dtype=np.int64)
    for i in range(last - 1, 0, -1):
        totals = cost_s[i] + value[next_state[i]]
        choice[i] = int(np.argmin(totals))  # first minimum: the smallest k on ties
        value[i] = totals[choice[i]]
    value[last] = 0.0
    return value, choice


def shortest_path_networkx(cost_s: np.ndarray, next_state: np.ndarray) -> float:
    """The same optimum as :func:`solve`, as a networkx shortest path (a cross-check)."""
    import networkx as nx

    graph = nx.DiGraph()
    last = cost_s.shape[0]
    for i in range(1, last):
        for k in range(cost_s.shape[1]):
            j, w = int(next_state[i, k]), float(cost_s[i, k])
            if not graph.has_edge(i, j) or graph[i][j]["weight"] > w:
                graph.add_edge(i, j, weight=w)
    return float(nx.shortest_path_length(graph, 1, last, weight="weight"))


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
    seq = setup.references.sequence(request_id)
    last = seq.output_tokens
    ks = np.arange(kmax + 1)
    cost = np.zeros((last, kmax + 1))
    m = seq.match_lengths
    if unique is None:
        unique = unique_experts_table(setup, request_id, kmax)
    for i in range(1, last):
        ctx = seq.prompt_tokens + i
        if step_cost is None:
            cost[i] = _alone_cost(setup, ctx, unique[i], kmax)
        else:
            cost[i] = step_cost(ctx, unique[i])
    states = np.arange(last)[:, None]
    nxt = np.where(states >= 1, states + np.minimum(ks, m[:, None]) + 1, last)
    value, choice = solve(cost, nxt)
    return RequestTables(request_id, cost, nxt, value, choice, m.copy(), seq.confidences)


def _alone_cost(setup: EngineSetup, ctx: int, unique: np.ndarray, kmax: int) -> np.ndarray:
    costs = setup.cost_model
    draft = np.cumsum([0.0] + [costs.draft_step(np.array([ctx + j])) for j in range(kmax)])
    verify = np.array(
        [
            costs.verify_pass(np.array([k + 1]), np.array([ctx]), unique[k]).total_s
            for k in range(kmax + 1)
        ]
    )
    return draft + verify


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
        # Draft steps repeat across states (same depth, same own context): priced once each.
        self._with_me: dict[tuple[int, int], float] = {}
        self._others_only: dict[int, float] = {}

    def _draft_with_me(self, depth: int, own: int, drafting_others: int) -> float:
        key = (depth, own)
        if key not in self._with_me:
            with_me = np.full(drafting_others + 1, self.context + depth - 1)
            with_me[-1] = own
            self._with_me[key] = self.setup.cost_model.draft_step(with_me)
        return self._with_me[key]

    def _draft_others(self, depth: int, drafting_others: int) -> float:
        if depth not in self._others_only:
            others = np.full(drafting_others, self.context + depth - 1)
            self._others_only[depth] = self.setup.cost_model.draft_step(others)
        return self._others_only[depth]

    def __call__(self, ctx: int, unique: np.ndarray) -> np.ndarray:
        costs, n = self.setup.cost_model, self.setup.references.num_experts
        kmax = unique.shape[0] - 1
        tokens = np.full(self.others + 1, self.tokens_each, dtype=np.int64)
        contexts = np.full(self.others + 1, self.context, dtype=np.int64)
        contexts[-1] = ctx
        covered = self.others_union / n if n else 0.0
        out = np.zeros(kmax + 1)
        for k in range(kmax + 1):
            tokens[-1] = k + 1
            union = self.others_union + unique[k] * (1.0 - covered)
            out[k] = costs.verify_pass(tokens, contexts, union).total_s
        base = out[0]
        out = base / (self.others + 1) + (out - base)
        drafting_others = self.others if self.tokens_each - 1 >= 1 else 0
        for j in range(1, kmax + 1):
            extra = self._draft_with_me(j, ctx + j - 1, drafting_others)
            if drafting_others and j <= self.tokens_each - 1:
                extra -= self._draft_others(j, drafting_others)
            out[j:] += extra
        return out


def _policy_from_tables(tables: dict[int, RequestTables], kmax: int) -> OraclePolicy:
    plan = {
        (rid, i): int(t.choice[i]) for rid, t in tables.items() for i in range(1, len(t.choice))
    }
    return OraclePolicy(plan, kmax)


def _batch_stats(log: RunLog, num_experts: int) -> tuple[float, float, float, np.ndarray]:
    """Mean batch size, tokens per request, context and others' union from a run."""
    steps = log.steps
    batch = float(np.mean([s.batch_size for s in steps]))
    tokens = float(np.mean([s.fed_tokens / s.batch_size for s in steps]))
    union = float(np.mean([s.unique_experts for s in steps]))
    context = float(np.mean([(r.prompt_tokens + r.output_tokens / 2) for r in log.requests]))
    others = max(batch - 1.0, 0.0)
    if num_experts and batch > 0:  # remove one request's share of an independent-union
        union = independent_union(num_experts, union, others / batch)
    return batch, tokens, context, np.array(union)


def exact_plan(setup: EngineSetup, kmax: int) -> OracleResult:
    """Exact per-request DP (valid at batch size 1)."""
    tables = {rid: request_tables(setup, rid, kmax) for rid in range(setup.workload.num_requests)}
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
        tables = {rid: request_tables(setup, rid, kmax, step, uniques[rid]) for rid in requests}
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
