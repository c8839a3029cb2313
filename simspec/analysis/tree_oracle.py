"""The hindsight oracle over tree shapes: the best shape at every position, in hindsight.

The chain oracle (:mod:`simspec.analysis.oracle`) chooses a depth k per state; this one chooses
a *shape* s = (steps, topk, num_draft_tokens) from a stated family F (:mod:`simspec.text.shapes`,
entry 0 no speculation; by default :func:`default_family`). For one request, state i means i
output tokens committed, and action s at state i

* drafts the tree of s (:mod:`simspec.sim.tree`: the same trees and the same rank paths of the
  target's tokens the engine uses, so ``topk = 1`` accepts exactly what the chain does),
  accepts a_i(s) nodes (the longest root path of the tree that the target's tokens follow,
  capped so the request ends at its length) and moves to next(i, s) = i + a_i(s) + 1;
* costs

      cost(i, s) = draft_phase(s) + verify(n_s + 1 tokens, U_i(s)) + overhead(a_i(s) + 1)

  with n_s the tree's verified nodes, U_i(s) the distinct experts of exactly the tokens the pass
  feeds, rejected nodes included (the counterfactual MoE cost: analytic routing's expectation
  for that tree, or the sampled sets), the draft phase 1 row at step 1 and topk rows at each
  later step, and the engine's speculation bookkeeping whenever s drafts.

The fewest-seconds path is the chain oracle's backward DP on this DAG (the same
:func:`~simspec.analysis.oracle.solve_many`), V(L) = 0, V(i) = min_s [cost(i, s) + V(next(i, s))].

**Exactness.** At batch size 1 (closed loop, concurrency 1) each cost(i, s) is the engine's own
step time at that state for that shape (the same cost-model calls, the same trees and unions),
so V(1) is the decode time the engine spends when it replays the plan: the optimum over all
per-position shape choices from F, checked against exhaustive search over every plan run
through the engine on micro instances (``tests/reference/tree_oracle.py``). With B > 1 the
requests share passes (their fixed cost, their expert union, the draft steps), which couples
their choices; here each request's plan is its B = 1 DP (it ignores the coupling), run through
the engine beside every fixed shape of F, and the best by mean TPOT is kept, so the batched
tree oracle is never worse than the best fixed shape of its family, and is an approximation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from simspec.analysis.oracle import RequestTables, solve_many
from simspec.costs.batch import draft_step_totals, speculation_overhead_totals, verify_totals
from simspec.policies.base import BatchView, BudgetPolicy, Policy
from simspec.sim.engine import EngineSetup, RunLog, run_policy
from simspec.sim.tree import TreeSpeculation, family_trees
from simspec.text.shapes import TreeShape, family, grid_family

__all__ = [
    "FixedShapePolicy",
    "TreeOraclePolicy",
    "TreeOracleResult",
    "default_family",
    "shape_tables",
    "shape_trees",
    "tree_oracle_for",
    "tree_oracle_plan",
]


def default_family(max_steps: int) -> tuple[TreeShape, ...]:
    """Chains of 1..``max_steps`` drafts and SGLang-style trees of topk 2 and 4 with budgets 4,
    8 and 16 tokens (:func:`~simspec.text.shapes.grid_family`): the family a user tuning
    SGLang's three flags searches."""
    return grid_family(max_steps, (1, 2, 4), (4, 8, 16))


@dataclass(frozen=True, slots=True)
class TreeOraclePolicy(Policy):
    """Replays a precomputed plan: a shape index for each (request, state). Not registered."""

    family: tuple[TreeShape, ...]
    plan: Mapping[tuple[int, int], int] = field(hash=False)

    def tree_family(self) -> tuple[TreeShape, ...]:
        """The family the plan indexes."""
        return self.family

    def decide(self, view: BatchView) -> np.ndarray:
        """The planned shape of each request at its state."""
        keys = zip(view.request_id.tolist(), view.position.tolist(), strict=True)
        return np.array([self.plan.get(key, 0) for key in keys], dtype=np.int64)

    def budget_cap(self, max_draft_tokens: int) -> int:
        """The family's deepest tree."""
        return min(max(s.steps for s in self.family), max_draft_tokens)


@dataclass(frozen=True, slots=True)
class FixedShapePolicy(Policy):
    """One shape of a family for every request and step (the oracle's fixed candidates)."""

    family: tuple[TreeShape, ...]
    index: int

    def tree_family(self) -> tuple[TreeShape, ...]:
        """The family ``index`` points into."""
        return self.family

    def decide(self, view: BatchView) -> np.ndarray:
        """``index`` for every request."""
        return np.full(view.batch_size, self.index, dtype=np.int64)

    def budget_cap(self, max_draft_tokens: int) -> int:
        """The shape's depth."""
        return min(self.family[self.index].steps, max_draft_tokens)


@dataclass(frozen=True)
class TreeOracleResult:
    """The tree oracle's plan, how it was found, its per-request DP tables, its run and the
    engine's mean TPOT of every fixed shape of the family (seconds, by shape)."""

    policy: TreeOraclePolicy | FixedShapePolicy
    exact: bool
    method: str
    tables: dict[int, RequestTables]
    log: RunLog
    fixed_tpot_s: dict[TreeShape, float]


def _check(setup: EngineSetup, family: Sequence[TreeShape]) -> None:
    if not family or family[0].steps != 0:
        raise ValueError("a family starts with no speculation (simspec.text.shapes.family)")
    deepest = max(s.steps for s in family)
    if deepest > setup.max_draft_tokens:
        raise ValueError(
            f"a shape of {deepest} steps is deeper than the drafter's {setup.max_draft_tokens}"
        )


def shape_trees(setup: EngineSetup, family: Sequence[TreeShape]) -> TreeSpeculation:
    """The trees a run of a policy with this family grows (``EngineState.family_trees``)."""
    widest = max(s.topk for s in family)
    return family_trees(setup.references, setup.rank_decay, setup.max_draft_tokens, widest)


def shape_tables(
    setup: EngineSetup, family: Sequence[TreeShape], request_ids: Sequence[int]
) -> dict[int, RequestTables]:
    """Every request's cost(i, s) and next(i, s) over the family (module docstring), solved."""
    _check(setup, family)
    refs, costs = setup.references, setup.cost_model
    trees = shape_trees(setup, family)
    analytic = refs.routing.mode == "analytic"
    width = len(family)
    built = []
    for rid in request_ids:
        seq = refs.sequence(rid)
        last = seq.output_tokens
        cost = np.zeros((last, width))
        nxt = np.full((last, width), last, dtype=np.int64)
        if last > 1:
            states = np.arange(1, last)
            ctx = seq.prompt_tokens + states
            fed = np.ones((len(states), width), dtype=np.int64)
            accepted = np.zeros((len(states), width), dtype=np.int64)
            rows = []
            sampled: dict[tuple[int, int, int], np.ndarray] = {}  # (state, drafts, accepted)
            for s, shape in enumerate(family):
                d, w, n = shape
                if d > 0:
                    pairs = [(rid, int(i)) for i in states]
                    drafts, taken = trees.verify_plan(
                        refs, pairs, np.full(len(states), d), np.full(len(states), w),
                        np.full(len(states), n),
                    )  # fmt: skip
                    fed[:, s], accepted[:, s] = drafts + 1, taken
                tree_shape = [trees.shape(d, w, n)] if d > 0 else None
                for j, i in enumerate(states.tolist()):
                    if analytic:
                        unique = refs.expected_unique(
                            fed[j, s : s + 1], accepted[j, s : s + 1] + 1, tree_shape
                        )
                    else:  # the pass feeds the same tokens for every shape with these counts
                        key = (i, int(fed[j, s]) - 1, int(accepted[j, s]))
                        if key not in sampled:
                            sampled[key] = refs.pass_unique_experts(
                                np.array([[rid, key[0], key[1]]]), [key[2]]
                            )
                        unique = sampled[key]
                    rows.append(unique)
            layers = len(rows[0]) if rows else 0
            unique_table = np.array(rows, dtype=float).reshape(width, len(states), layers)
            verify = verify_totals(
                costs,
                fed.T.reshape(-1, 1),
                np.tile(ctx, width).reshape(-1, 1),
                unique_table.reshape(width * len(states), layers),
            ).reshape(width, len(states))
            overhead = speculation_overhead_totals(
                costs, (accepted.T + 1).reshape(-1, 1), np.tile(ctx, width).reshape(-1, 1)
            ).reshape(width, len(states))
            steps: dict[tuple[int, int], np.ndarray] = {}  # (depth j, rows) -> (S,) seconds
            for s, (d, w, _) in enumerate(family):
                draft = np.zeros(len(states))
                for j in range(1, d + 1):  # summed in the engine's order
                    per_request = 1 if j == 1 else w
                    if (j, per_request) not in steps:
                        steps[j, per_request] = draft_step_totals(
                            costs, (ctx + j - 1)[:, None], counts=np.array([per_request])
                        )
                    draft = draft + steps[j, per_request]
                cost[1:, s] = draft + verify[s] + (overhead[s] if d > 0 else 0.0)
            nxt[1:] = states[:, None] + accepted + 1
        built.append((rid, seq, cost, nxt))
    solved = solve_many([b[2] for b in built], [b[3] for b in built])
    return {
        rid: RequestTables(rid, cost, nxt, value, choice, seq.match_lengths.copy(), seq.confidences)
        for (rid, seq, cost, nxt), (value, choice) in zip(built, solved, strict=True)
    }


def _plan(tables: dict[int, RequestTables]) -> dict[tuple[int, int], int]:
    return {
        (rid, i): int(t.choice[i]) for rid, t in tables.items() for i in range(1, len(t.choice))
    }


def tree_oracle_plan(
    setup: EngineSetup, family: Sequence[TreeShape] | None = None, *, fixed_shapes: bool = True
) -> TreeOracleResult:
    """The tree oracle of ``setup`` over ``family`` (default: :func:`default_family` up to the
    drafter's depth): exact at batch size 1, the best of the per-request plan and every fixed
    shape otherwise (module docstring). ``fixed_shapes=False`` skips running every fixed shape
    where the oracle does not need them (batch size 1; ``fixed_tpot_s`` is then empty)."""
    shapes = tuple(family) if family is not None else default_family(setup.max_draft_tokens)
    requests = range(setup.workload.num_requests)
    tables = shape_tables(setup, shapes, requests)
    oracle = TreeOraclePolicy(shapes, _plan(tables))
    log = run_policy(setup, oracle)
    w = setup.workload
    alone = w.loop == "closed" and min(w.concurrency, w.num_requests) == 1
    fixed: dict[TreeShape, tuple[float, FixedShapePolicy, RunLog]] = {}
    for s, shape in enumerate(shapes if fixed_shapes or not alone else ()):
        policy = FixedShapePolicy(shapes, s)
        run = run_policy(setup, policy)
        fixed[shape] = (run.mean_tpot_s(), policy, run)
    fixed_tpot = {shape: v[0] for shape, v in fixed.items()}
    if alone:
        return TreeOracleResult(
            oracle, True, "backward DP per request over tree shapes (B = 1)", tables, log,
            fixed_tpot,
        )  # fmt: skip
    best_shape = min(fixed, key=lambda s: fixed[s][0])
    tpot, policy, best_log = fixed[best_shape]
    if tpot < log.mean_tpot_s():
        how = f"fixed shape {best_shape.label()}"
        return TreeOracleResult(
            policy, False, _batched(len(shapes), how), tables, best_log, fixed_tpot
        )
    return TreeOracleResult(
        oracle, False, _batched(len(shapes), "per-request DP"), tables, log, fixed_tpot
    )


def tree_oracle_for(
    setup: EngineSetup, policies: Sequence[BudgetPolicy]
) -> TreeOracleResult | None:
    """The tree oracle a scenario's experiment runs beside the chain oracle: None unless one of
    ``policies`` chooses tree shapes; its family is :func:`default_family` and every shape
    those policies can choose within the drafter's depth (so it holds every chain, and at
    B = 1 it is never slower than the chain oracle)."""
    kmax = setup.max_draft_tokens
    chosen = [f for p in policies if (f := p.tree_family()) is not None]
    if not chosen:
        return None
    own = [s for f in chosen for s in f[1:] if s.steps <= kmax]
    return tree_oracle_plan(setup, family([*default_family(kmax)[1:], *own]), fixed_shapes=False)


def _batched(shapes: int, chosen: str) -> str:
    return (
        "per-request backward DP over tree shapes (B > 1: coupling ignored), best of it and "
        f"the {shapes} fixed shapes by mean TPOT; chosen: {chosen}"
    )
