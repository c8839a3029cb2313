"""Exhaustive search for the tree oracle: every plan, each run through the engine itself.

A plan maps every state 1..L−1 of one request to a shape of the family; the search runs all
S^(L−1) of them through :func:`simspec.sim.engine.run_policy` (the engine's own costs, trees
and unions; nothing of the DP's tables) and keeps the fewest decode seconds. Exponential in
the request's length: micro instances only.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from simspec.analysis.tree_oracle import TreeOraclePolicy
from simspec.sim.engine import EngineSetup, RunLog, run_policy
from simspec.text.shapes import TreeShape


def decode_s(log: RunLog) -> float:
    """Decode time of a run: Σ over requests of finish − first token."""
    return sum(r.finish_s - r.first_token_s for r in log.requests)


def exhaustive_best(
    setup: EngineSetup, family: Sequence[TreeShape], request_id: int = 0
) -> tuple[float, dict[tuple[int, int], int]]:
    """The fewest decode seconds of one request (a setup with that one request) over every
    plan, and the first plan that reaches it."""
    shapes = tuple(family)
    last = setup.references.sequence(request_id).output_tokens
    best, best_plan = float("inf"), {}
    for choice in itertools.product(range(len(shapes)), repeat=last - 1):
        plan = {(request_id, i + 1): s for i, s in enumerate(choice)}
        time = decode_s(run_policy(setup, TreeOraclePolicy(shapes, plan)))
        if time < best:
            best, best_plan = time, plan
    return best, best_plan
