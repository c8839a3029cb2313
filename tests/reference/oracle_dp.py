"""Reference solvers of the oracle's per-request DP, written for clarity, not speed.

The package solves every request's backward DP in one vectorised sweep
(:func:`simspec.analysis.oracle.solve_many`); the tests check it against these two independent
formulations of the same shortest path: a plain loop over states, and a networkx shortest path
on the explicit DAG.
"""

from __future__ import annotations

import networkx as nx
import numpy as np


def plain_solve(cost_s: np.ndarray, next_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """V(L) = 0, V(i) = min_k cost(i, k) + V(next(i, k)); the smallest k on ties."""
    last = cost_s.shape[0]
    value = np.zeros(last + 1)
    choice = np.zeros(last, dtype=np.int64)
    for i in range(last - 1, 0, -1):
        totals = [
            float(cost_s[i, k]) + value[int(next_state[i, k])] for k in range(cost_s.shape[1])
        ]
        best = min(totals)
        choice[i] = totals.index(best)
        value[i] = best
    return value, choice


def shortest_path_networkx(cost_s: np.ndarray, next_state: np.ndarray) -> float:
    """The least cost from state 1 to state L as a networkx shortest path."""
    graph = nx.DiGraph()
    last = cost_s.shape[0]
    for i in range(1, last):
        for k in range(cost_s.shape[1]):
            j, w = int(next_state[i, k]), float(cost_s[i, k])
            if not graph.has_edge(i, j) or graph[i][j]["weight"] > w:
                graph.add_edge(i, j, weight=w)
    return float(nx.shortest_path_length(graph, 1, last, weight="weight"))
