"""Routing of draft trees expert by expert: the Monte-Carlo reference of simspec.routing.siblings.

Each expert is on at the root with probability p; a node is on when its uniform V falls below
its chain's transition from its parent's state (q/p after an on parent, (p − q)/(1 − p) after
an off one); the nodes of one depth take the depth's shared uniform as V with probability
``share`` and their own otherwise. Written from the law's statement, by plain sampling.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def sample_trees(
    rng: np.random.Generator,
    p: np.ndarray,
    q: np.ndarray,
    parents: Sequence[int],
    share: float,
    trees: int,
) -> np.ndarray:
    """On/off of every expert at every node, bool (trees, nodes, N); one pair law ``q``."""
    n = len(p)
    nodes = len(parents) + 1
    depth = [0] * nodes
    for i, parent in enumerate(parents):
        depth[i + 1] = depth[parent] + 1
    with np.errstate(divide="ignore", invalid="ignore"):  # p = 1: always on, never "after off"
        after_on = q / p
        after_off = np.where(p < 1, (p - q) / (1 - p), 1.0)
    out = np.zeros((trees, nodes, n), dtype=bool)
    out[:, 0] = rng.random((trees, n)) < p
    shared = {d: rng.random((trees, n)) for d in set(depth)}
    for i in range(1, nodes):
        own = rng.random((trees, n))
        v = np.where(rng.random((trees, n)) < share, shared[depth[i]], own)
        parent_on = out[:, parents[i - 1]]
        out[:, i] = v < np.where(parent_on, after_on, after_off)
    return out


def sibling_overlap(sets: np.ndarray, parents: Sequence[int]) -> float:
    """Shared experts of every pair of children of one node, over the mean experts per node."""
    shared, pairs = 0.0, 0
    for a in range(len(parents)):
        for b in range(a + 1, len(parents)):
            if parents[a] == parents[b]:
                shared += float((sets[:, a + 1] & sets[:, b + 1]).sum(axis=1).mean())
                pairs += 1
    return shared / pairs / float(sets.sum(axis=2).mean())
