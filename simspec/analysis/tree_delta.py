"""Delta space over tree shapes: one more verified node at a time (SGLang's num_draft_tokens).

The Delta-space analysis (:mod:`simspec.analysis.delta`) needs actions that extend one another:
k → k+1 drafts of a chain. Among tree shapes that holds along a *node ladder*: at fixed depth
(``steps``) and width (``topk``), the shapes with budgets n = 2, 3, ... verify the n − 1 most
likely nodes of the same grown tree, so each tree is the previous one plus its next most likely
node (:func:`simspec.text.tree.build_tree` ranks them once). A ladder is the family
(no speculation, (d, w, 2), (d, w, 3), ..., (d, w, N)) (:func:`node_ladder`), which is what a
user tuning ``--speculative-num-draft-tokens`` at fixed steps and topk walks. Its first rung
adds the whole draft phase and one node, every later rung one more node of the verify pass.

For every state i on the tree oracle's path over a ladder and every rung s → s + 1:

* Δa = a_i(s + 1) − a_i(s): the extra accepted drafts in hindsight (0 or 1: a node added to a
  tree lengthens the accepted root path by at most itself);
* ΔE[a] = E[AL_{s+1}] − E[AL_s] with the drafter's calibrated confidences c_{i,j} as the
  acceptance at depth j: the new node's Π over its root path of c·(ρ(1 − c))^(rank − 1), the
  tree's sibling model (:mod:`simspec.text.tree`);
* ΔE[cost] = cost(i, s + 1) − cost(i, s) from the tree oracle's tables (its verify pass with
  one more token and that token's experts, rejected or not);
* the local condition's right-hand side V(next(i, s)) − V(next(i, s + 1)) (0 when the node is
  not accepted: both rungs then move to the same state).

These are :class:`~simspec.analysis.delta.DeltaPoints`, so the separation, the controls (random
cost tables re-solved by the same DP on the same transitions, shuffled labels) and the summary
are :func:`simspec.analysis.delta.analyse`'s (:func:`analyse_ladder`). On a ladder of width 1
the points are the chain's, at the ladder's fixed depth's draft phase.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simspec.analysis.delta import DeltaPoints, analyse, points_from_columns
from simspec.analysis.oracle import RequestTables
from simspec.sim.tree import TreeSpeculation
from simspec.text.shapes import NO_SPECULATION, TreeShape, validate

__all__ = ["analyse_ladder", "ladder_points", "node_ladder", "path_probabilities"]


def node_ladder(steps: int, topk: int, max_tokens: int) -> tuple[TreeShape, ...]:
    """No speculation, then (steps, topk, n) for n = 2..``max_tokens`` within the tree's room."""
    shapes = [NO_SPECULATION]
    for n in range(2, max_tokens + 1):
        shape = TreeShape(steps, topk, n)
        if validate(shape) is not None:
            break
        shapes.append(shape)
    return tuple(shapes)


def _new_nodes(trees: TreeSpeculation, ladder: tuple[TreeShape, ...]) -> list[tuple[int, ...]]:
    """The node each rung adds (rank tuples); ValueError if the family is not a ladder."""
    added: list[tuple[int, ...]] = []
    before: set[tuple[int, ...]] = set()
    for shape in ladder[1:]:
        nodes = set(trees.tree(*shape).graph.nodes) - {()}
        new = nodes - before
        if not before <= nodes or len(new) != 1:
            raise ValueError(f"{shape.label()} does not add one node to the previous shape")
        added.append(new.pop())
        before = nodes
    return added


def path_probabilities(
    node: tuple[int, ...], confidences: np.ndarray, rank_decay: float
) -> np.ndarray:
    """P(``node``'s root path is the target's tokens) at each state: Π_j q(c_{·,j}, r_j),
    q(c, r) = c·(ρ(1 − c))^(r − 1) (``confidences`` (states, ≥ depth))."""
    prob = np.ones(len(confidences))
    for j, rank in enumerate(node):
        c = confidences[:, j]
        prob = prob * c * (rank_decay * (1.0 - c)) ** (rank - 1)
    return prob


def ladder_points(
    tables: dict[int, RequestTables], trees: TreeSpeculation, ladder: tuple[TreeShape, ...]
) -> DeltaPoints:
    """Every rung s → s + 1 at every state of every tree-oracle path (module docstring)."""
    added = _new_nodes(trees, ladder)
    cols: dict[str, list[np.ndarray]] = {name: [] for name in DeltaPoints.__dataclass_fields__}
    rungs = len(ladder) - 1
    for rid in sorted(tables):
        t = tables[rid]
        states = np.array(t.path(), dtype=np.int64)
        if len(states) == 0 or rungs < 1:
            continue
        conf = t.confidences[states]
        expected = np.stack([path_probabilities(v, conf, trees.rank_decay) for v in added], 1)
        i = np.repeat(states, rungs)
        k = np.tile(np.arange(rungs), len(states))
        taken = t.next_state[states] - states[:, None] - 1  # a_i(s), (states, S)
        delta_a = (taken[:, 1:] - taken[:, :-1]).ravel().astype(float)
        nxt = t.next_state[states]
        gain = (t.value_s[nxt[:, :-1]] - t.value_s[nxt[:, 1:]]).ravel()
        best = t.choice[i]
        cols["request_id"].append(np.full(len(i), rid))
        cols["state"].append(i)
        cols["k"].append(k)
        cols["delta_a"].append(delta_a)
        cols["delta_a_expected"].append(expected.ravel())
        cols["delta_cost_s"].append(t.cost_s[i, k + 1] - t.cost_s[i, k])
        cols["local_slope_s"].append(np.where(delta_a > 0, gain / np.maximum(delta_a, 1), 0.0))
        cols["chosen"].append(k + 1 <= best)
        cols["binding"].append((k == best - 1) | (k == best))
        cols["cost_s"].append(t.cost_s[i, k])
    return points_from_columns(cols)


def analyse_ladder(
    tables: dict[int, RequestTables],
    trees: TreeSpeculation,
    ladder: tuple[TreeShape, ...],
    rng: np.random.Generator | None = None,
) -> tuple[DeltaPoints, dict[str, Any]]:
    """:func:`simspec.analysis.delta.analyse` of the tree oracle's tables over a ladder."""
    return analyse(tables, rng, lambda ts: ladder_points(ts, trees, ladder))
