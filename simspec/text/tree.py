"""Draft trees: which nodes an EAGLE-style drafter proposes, and how many of them the target keeps.

A chain drafts one token per step; a *tree* keeps ``topk`` candidates per step. SGLang's EAGLE
worker (``speculative_num_steps``, ``speculative_eagle_topk``, ``speculative_num_draft_tokens``)
grows it as follows, and so does :func:`build_tree`: the root (the last committed token) gets
its ``topk`` most likely children; at every later step each of the ``topk`` best nodes of the
previous depth gets ``topk`` children, and the ``topk`` best of those ``topk²`` candidates are
the ones expanded next. Of all candidates, ``topk + (steps − 1)·topk²``, the best
``num_draft_tokens − 1`` by cumulative draft probability are verified together with the root
(SGLang counts the root in ``num_draft_tokens``: a chain of 3 steps verifies 4 tokens).

**Per-node acceptance.** The target has one next token, so at most one child of a node can be
it: siblings are mutually exclusive. The r-th ranked child of an accepted node is the target's
token with probability

    q_r = α · (ρ·(1 − α))^(r − 1),        Σ_r q_r = α / (1 − ρ·(1 − α)) ≤ 1,

with α the chain's acceptance probability at that depth (the acceptance process) and the
*rank decay* ρ ∈ [0, 1]: ρ = 0 makes only the top candidate useful (the tree accepts what the
chain does), ρ = 1 makes the target token's rank geometric, each further candidate hitting with
the same α once the better ones missed. q_r decreases in r, so ranking candidates by their
root-path probability Π q (a calibrated drafter's cumulative probability) is ranking them by
rank tuple as SGLang's re-ranking does.

**Accepted length.** The accepted nodes form one root path (exclusivity), so the tokens a
verify pass commits are 1 + the number of accepted nodes, and

    E[AL] = 1 + Σ_{verified nodes v} Π_{u on the root path of v} q_u.

For a chain (``topk = 1``) this is Leviathan et al.'s (1 − α^(k+1)) / (1 − α).
:func:`fit_alpha` and :func:`fit_rank_decay` invert it for a measured AL (scipy's brentq).

**Common random numbers.** :func:`draw_rank_paths` turns a request's chain reference (match
lengths, calibrated confidences) into the rank of the target's token at every depth: rank 1
exactly where the chain would accept, so a tree with ``topk = 1`` accepts what the chain does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # networkx is imported when a tree is built (a slow import: not at start-up)
    import networkx as nx

ROOT: tuple[int, ...] = ()
#: Bisection stops when the bracket is this narrow.
FIT_TOLERANCE = 1e-13


def sibling_probabilities(alpha: float, topk: int, rank_decay: float) -> np.ndarray:
    """q_r, r = 1..topk: P(the r-th ranked child is the target's token | parent accepted)."""
    ratio = rank_decay * (1.0 - alpha)
    return alpha * ratio ** np.arange(topk)


def tree_capacity(depth: int, topk: int) -> int:
    """Draft nodes a tree of ``depth`` steps can verify: topk + (depth − 1)·topk² (0 if depth 0)."""
    return 0 if depth <= 0 else topk + (depth - 1) * topk * topk


def verified_drafts(depth: int, topk: int, num_draft_tokens: int) -> int:
    """Draft nodes verified: ``num_draft_tokens − 1`` clamped to the tree's capacity (0 = all)."""
    capacity = tree_capacity(depth, topk)
    return capacity if num_draft_tokens <= 0 else min(num_draft_tokens - 1, capacity)


@dataclass(frozen=True)
class DraftTree:
    """A verified draft tree: a DiGraph on rank tuples, root ``()``.

    Node ``(r_1, ..., r_d)`` is the r_d-th ranked child of ``(r_1, ..., r_{d-1})``. Node
    attributes: ``depth``, ``rank``, ``q`` (acceptance given the parent) and ``path_probability``
    (Π q along the root path).
    """

    graph: nx.DiGraph
    depth: int
    topk: int

    @property
    def num_drafts(self) -> int:
        """Draft nodes verified (the root excluded)."""
        return self.graph.number_of_nodes() - 1

    def expected_acceptance_length(self) -> float:
        """1 + Σ_v Π q on v's root path: the mean tokens a verify pass commits (module doc)."""
        return 1.0 + sum(p for v, p in self.graph.nodes(data="path_probability") if v)

    def accepted_length(self, ranks: Sequence[int]) -> int:
        """Accepted drafts when the target's token has rank ``ranks[j]`` at depth j + 1.

        The longest prefix of ``ranks`` that is a root path of the tree (rank 0: the target's
        token is none of the drafter's candidates).
        """
        nodes = self._nodes
        node: tuple[int, ...] = ROOT
        for rank in ranks[: self.depth]:
            child = (*node, int(rank))
            if rank <= 0 or child not in nodes:
                break
            node = child
        return len(node)

    @cached_property
    def _nodes(self) -> frozenset[tuple[int, ...]]:
        """The tree's nodes, for membership tests."""
        return frozenset(self.graph.nodes)


def build_tree(
    alphas: Sequence[float], depth: int, topk: int, num_draft_tokens: int, rank_decay: float
) -> DraftTree:
    """The verified tree of ``depth`` steps (module docstring), ``alphas[j]`` at depth j + 1.

    Ties between equally likely candidates go to the shallower, then the better-ranked one, so
    the verified set is always closed under taking parents.
    """
    if len(alphas) < depth:
        raise ValueError(f"{len(alphas)} per-depth alphas for a tree of depth {depth}")
    q = [sibling_probabilities(float(alphas[j]), topk, rank_decay) for j in range(depth)]
    prob: dict[tuple[int, ...], float] = {}
    expanded = [ROOT]
    path_probability = {ROOT: 1.0}
    for j in range(depth):
        level = {
            (*parent, r + 1): path_probability[parent] * float(q[j][r])
            for parent in expanded
            for r in range(topk)
        }
        prob.update(level)
        path_probability.update(level)
        expanded = sorted(level, key=lambda v: (-level[v], v))[:topk]
    keep = verified_drafts(depth, topk, num_draft_tokens)
    chosen = sorted(prob, key=lambda v: (-prob[v], len(v), v))[:keep]
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_node(ROOT, depth=0, rank=0, q=1.0, path_probability=1.0)
    for v in sorted(chosen, key=lambda v: (len(v), v)):
        graph.add_node(
            v, depth=len(v), rank=v[-1], q=float(q[len(v) - 1][v[-1] - 1]), path_probability=prob[v]
        )
        graph.add_edge(v[:-1], v)
    return DraftTree(graph, depth, topk)


def expected_acceptance_length(
    alphas: Sequence[float] | float,
    depth: int,
    topk: int,
    num_draft_tokens: int,
    rank_decay: float,
) -> float:
    """E[AL] of the tree :func:`build_tree` verifies (one alpha for every depth if a number)."""
    per_depth = [float(alphas)] * depth if isinstance(alphas, int | float) else list(alphas)
    tree = build_tree(per_depth, depth, topk, num_draft_tokens, rank_decay)
    return tree.expected_acceptance_length()


def _solve(f: Callable[[float], float], target: float, lo: float, hi: float) -> float:
    """x in [lo, hi] with f(x) = target, f(lo) <= target <= f(hi) (Brent's root finder)."""
    from scipy.optimize import brentq

    return float(brentq(lambda x: f(x) - target, lo, hi, xtol=FIT_TOLERANCE))


def fit_alpha(
    acceptance_length: float, depth: int, topk: int, num_draft_tokens: int, rank_decay: float
) -> float:
    """The i.i.d. alpha whose tree has E[AL] = ``acceptance_length`` (a root find).

    E[AL] rises from 1 (alpha = 0) to the number of tree levels + 1 (alpha = 1). Raises
    ValueError outside that range.
    """

    def al(alpha: float) -> float:
        return expected_acceptance_length(alpha, depth, topk, num_draft_tokens, rank_decay)

    top = al(1.0)
    if not 1.0 <= acceptance_length <= top:
        raise ValueError(f"acceptance length {acceptance_length} outside [1, {top:g}]")
    return _solve(al, acceptance_length, 0.0, 1.0)


def fit_rank_decay(
    acceptance_length: float, alpha: float, depth: int, topk: int, num_draft_tokens: int
) -> float:
    """The rank decay rho whose tree has E[AL] = ``acceptance_length`` at this ``alpha``.

    E[AL] rises with rho from the chain-like value (rho = 0) to its rho = 1 value; raises
    ValueError outside that range (e.g. a measured tree AL below the chain's).
    """

    def al(rho: float) -> float:
        return expected_acceptance_length(alpha, depth, topk, num_draft_tokens, rho)

    low, high = al(0.0), al(1.0)
    if not low <= acceptance_length <= high:
        raise ValueError(
            f"acceptance length {acceptance_length} outside [{low:g}, {high:g}] at alpha {alpha:g}"
        )
    return _solve(al, acceptance_length, 0.0, 1.0)


def draw_miss_ranks(
    alphas: np.ndarray, rank_decay: float, topk: int, rng: np.random.Generator
) -> np.ndarray:
    """Rank of the target's token given the top candidate missed (0 = beyond ``topk``).

    P(rank r | rank ≠ 1) = q_r / (1 − α) for r ≥ 2: a hit among ranks ≥ 2 with probability
    h = ρ·α / (1 − ρ·(1 − α)), then r − 2 geometric with ratio x = ρ·(1 − α). One uniform per
    entry; ``alphas`` has any shape.
    """
    a = np.asarray(alphas, dtype=float)
    x = rank_decay * (1.0 - a)
    hit = np.where(1.0 - x > 0, rank_decay * a / np.maximum(1.0 - x, 1e-300), 0.0)
    u = rng.random(a.shape)
    # Inverse CDF: P(rank ≤ 2 + m | miss) = h·(1 − x^(m+1)).
    ranks = np.zeros(a.shape, dtype=np.int64)
    inside = u < hit
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = 1.0 - u / np.where(hit > 0, hit, 1.0)  # the smallest m with x^(m+1) < tail
        m = np.where(x > 0, np.floor(np.log(np.maximum(tail, 1e-300)) / np.log(x)), 0)
    m = np.maximum(m, 0)
    ranks[inside] = 2 + m[inside].astype(np.int64)
    ranks[ranks > topk] = 0
    return ranks


def draw_rank_paths(
    match_lengths: np.ndarray,
    confidences: np.ndarray,
    nominal_alphas: np.ndarray,
    rank_decay: float,
    topk: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Rank of the target's token at every (state, depth) of one request, int array (L, K).

    Consistent with the chain reference: rank 1 at depths 1..m_i, not 1 at depth m_i + 1; a
    later depth's top candidate hits with the slot's confidence c (as the chain's draws would);
    a miss takes a rank from :func:`draw_miss_ranks` with the depth's nominal alpha, so that over
    the Beta-distributed confidences P(rank r) = q_r(α) exactly.
    """
    states, slots = confidences.shape
    depth = np.arange(slots)[None, :]
    m = np.asarray(match_lengths)[:, None]
    top_hit = rng.random((states, slots)) < confidences
    top_hit = np.where(depth < m, True, np.where(depth == m, False, top_hit))
    alphas = np.broadcast_to(np.asarray(nominal_alphas, dtype=float)[:slots], (states, slots))
    misses = draw_miss_ranks(alphas, rank_decay, topk, rng)
    return np.where(top_hit, 1, misses)
