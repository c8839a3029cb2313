"""Exhaustive search for the tree oracle: every plan, each run through the engine itself.

A plan maps every state 1..L−1 of one request to a shape of the family; the search covers all
S^(L−1) of them, each through :func:`simspec.sim.engine.run_policy` (the engine's own costs,
trees and unions; nothing of the DP's tables), and keeps the fewest decode seconds. A run reads
the plan only at the states it visits, and two plans that agree there give the same run; so
the search walks the tree of decisions at visited states (depth first, each branch one engine
run) instead of running every plan: every plan is some branch's, none is run twice.
Exponential in the request's length: micro instances only.
"""

from __future__ import annotations

from collections.abc import Sequence

from simspec.analysis.tree_oracle import TreeOraclePolicy
from simspec.sim.engine import EngineSetup, RunLog, run_policy
from simspec.text.shapes import TreeShape


def decode_s(log: RunLog) -> float:
    """Decode time of a run: Σ over requests of finish − first token."""
    return sum(r.finish_s - r.first_token_s for r in log.requests)


class _ReadPlan(dict[tuple[int, int], int]):
    """A plan (unset states: shape 0) that records the states a run reads, in order."""

    def __init__(self, choices: dict[tuple[int, int], int]) -> None:
        super().__init__(choices)
        self.read: list[tuple[int, int]] = []

    def get(self, key, default=None):  # type: ignore[override]
        self.read.append(key)
        return super().get(key, 0)


def exhaustive_best(
    setup: EngineSetup, family: Sequence[TreeShape], request_id: int = 0
) -> tuple[float, dict[tuple[int, int], int]]:
    """The fewest decode seconds of one request (a setup with that one request) over every
    plan, and the first plan (depth first; at its visited states) that reaches it."""
    shapes = tuple(family)
    best, best_plan = float("inf"), {}
    choices: dict[tuple[int, int], int] = {}
    while True:
        plan = _ReadPlan(choices)
        time = decode_s(run_policy(setup, TreeOraclePolicy(shapes, plan)))
        visited = [key for key in dict.fromkeys(plan.read) if key[0] == request_id]
        if time < best:
            best, best_plan = time, {key: choices.get(key, 0) for key in visited}
        # the next branch: the deepest visited state with an untried shape takes the next one;
        # the states after it are decided afresh by the run
        while visited and choices.get(visited[-1], 0) == len(shapes) - 1:
            choices.pop(visited.pop(), None)
        if not visited:
            return best, best_plan
        choices[visited[-1]] = choices.get(visited[-1], 0) + 1
