"""Draft-tree siblings in the analytic union: candidates for one position route alike.

A verify pass of a draft tree feeds, besides the root (the last committed token), every
verified node; a node's routing continues its parent's (lag-1, the Markov chain of
:mod:`simspec.routing.overlap`: P(on | parent on) = q/p, P(on | parent off) = b = (p − q)/(1 − p)).
Nodes at one depth are candidates for the *same* position after prefixes that differ only in
their last few tokens: their hidden states, and so their experts, are closer than independent
continuations of their parents would be. The *sibling overlap* s = E|S_a ∩ S_b| / k_e of two
children of one node measures that (``routing.sibling_overlap``).

**Law.** Per expert, the nodes of one depth share one uniform U: node i is on when
V_i < pi_i(x), x its parent's state, V_i = U with probability c and its own uniform otherwise
(pi_i the true or the rejected-draft chain's transition). Each node alone keeps its chain
(every root-to-node path is the chain model's Markov chain, so lag-1 and path statistics are
unchanged); two siblings share U with probability c², which adds c²·pi(1 − pi) to their
P(both on | x). Summed over experts with the draft transitions pi_1 = q/p, pi_0 = b:

    s·Σ_e p_e = Σ_e [p_e(pi_1² + c²·pi_1(1 − pi_1)) + (1 − p_e)(pi_0² + c²·pi_0(1 − pi_0))]

so c² = (s − s_0)/(1 − s_0) (:func:`sibling_share`), s_0 the overlap of siblings drawn
independently given their parent (c = 0, what a chain of the same nodes assumes) and s = 1 at
c = 1 (siblings identical). Pooled over layers like the lag overlaps. Cousins share U as
siblings do: two candidates for one position differ in one or two of thousands of context
tokens. (Sharing only among children of one node, cousins independent given their parents, is
the other bound; it prices AngelSlim's (7, 10, 64) tree at 107 of 128 experts at s = 0.8
instead of 64, and cannot put that tree's speedup above the (4, 4, 16) tree's at any s.)

**Silent over a tree.** An expert is silent over the tree when it is off at the root and at
every depth. Given every parent off, the m nodes of a depth are all off with probability

    H = ∫_0^1 Π_i [c·1{u ≥ pi_i} + (1 − c)(1 − pi_i)] du,

a sum over the intervals between the sorted pi_i (:func:`level_silent`), so
P(tree silent) = (1 − p)·Π_depths H (:func:`tree_log_silent`). At c = 0, H = Π_i (1 − pi_i)
and the tree has the chain's silent probability whatever its shape.

**Default.** No published measurement of the routing overlap of sibling draft tokens was
found (searched: MoE-Spec, arXiv 2602.16052, reports heavy-tailed expert use inside EAGLE-3
trees but no sibling statistic; Cohere's 38 % is adjacent tokens). Unset, s is the lag-1
overlap of drafts: siblings are different tokens, as adjacent tokens are, and routing follows
the token strongly; they also share their position and prefix, which adjacent tokens do not,
so the lag-1 value is the floor the data we have supports (when it is below s_0, siblings are
independent given the parent).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def transitions(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P(on | parent on), P(on | parent off)) of the chain with pair probability ``q``."""
    p = np.asarray(p, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        on = np.where(p > 0.0, q / np.where(p > 0.0, p, 1.0), 0.0)
        off = np.where(p < 1.0, (p - q) / np.where(p < 1.0, 1.0 - p, 1.0), 1.0)
    return np.clip(on, 0.0, 1.0), np.clip(off, 0.0, 1.0)


def independent_sibling_overlap(p: np.ndarray, q_draft: np.ndarray) -> float:
    """s_0: the overlap of two children drawn independently given their parent (pooled)."""
    p = np.asarray(p, dtype=float)
    on, off = transitions(p, q_draft)
    return float((p * on * on + (1.0 - p) * off * off).sum() / p.sum())


def sibling_share(p: np.ndarray, q_draft: np.ndarray, sibling_overlap: float | None) -> float:
    """c, the chance two siblings share their draw (module docstring), from the overlap s.

    ``None`` takes the lag-1 overlap of drafts, Σ q / Σ p, as s (module docstring: the
    default), and c = 0 when that is below s_0. An explicit s below s_0 or above 1 is a
    ValueError.
    """
    p = np.asarray(p, dtype=float)
    total = p.sum()
    if total <= 0:
        return 0.0
    floor = independent_sibling_overlap(p, q_draft)
    if sibling_overlap is None:
        s = float(np.asarray(q_draft).sum() / total)
        if s <= floor:
            return 0.0
    else:
        s = float(sibling_overlap)
        if not floor - 1e-12 <= s <= 1.0 + 1e-12:
            raise ValueError(
                f"sibling overlap {s:g} is outside [{floor:.4g}, 1]: below {floor:.4g} siblings "
                "would share fewer experts than two independent continuations of their parent"
            )
    if floor >= 1.0:
        return 0.0
    return float(np.sqrt(np.clip((s - floor) / (1.0 - floor), 0.0, 1.0)))


def level_silent(off_probabilities: Sequence[np.ndarray], share: float) -> np.ndarray:
    """H: P(every node of one depth off | every parent off), each node's P(on | parent off)
    ``pi_i`` (shaped like p), sharing the depth's draw with probability ``share``."""
    pi = np.sort(np.stack([np.asarray(x, dtype=float) for x in off_probabilities]), axis=0)
    m = len(pi)
    c = float(share)
    high = c + (1.0 - c) * (1.0 - pi)  # off when the shared draw u ≥ pi_i
    low = (1.0 - c) * (1.0 - pi)  # off when u < pi_i: only by the node's own draw
    edges = np.concatenate([np.zeros((1, *pi.shape[1:])), pi, np.ones((1, *pi.shape[1:]))])
    total = np.zeros(pi.shape[1:])
    for j in range(m + 1):  # u in [pi_(j), pi_(j+1)): the first j nodes are past u
        term = edges[j + 1] - edges[j]
        for i in range(m):
            term = term * (high[i] if i < j else low[i])
        total = total + term
    return total


def accepted_path(parents: Sequence[int], true_nodes: int) -> np.ndarray:
    """Which of the tree's nodes (root 0, then ``parents[i]`` is node i + 1's parent) are true
    tokens: the root and the path of first children below it, ``true_nodes`` in all."""
    n = len(parents) + 1
    true = np.zeros(n, dtype=bool)
    true[0] = True
    node = 0
    for _ in range(max(true_nodes - 1, 0)):
        children = [i + 1 for i, parent in enumerate(parents) if parent == node]
        if not children:
            break
        node = min(children)
        true[node] = True
    return true


def tree_log_silent(
    p: np.ndarray,
    q_true: np.ndarray,
    q_draft: np.ndarray,
    parents: Sequence[int],
    true_nodes: int,
    share: float,
) -> np.ndarray:
    """log P(expert silent over every node of the tree), shaped like ``p`` (module docstring).

    ``parents[i]`` is the parent of node i + 1 (node 0 is the root; parents come first);
    ``true_nodes`` of them are true tokens (:func:`accepted_path`), whose edges use ``q_true``,
    the others ``q_draft``.
    """
    p = np.asarray(p, dtype=float)
    true = accepted_path(parents, true_nodes)
    _, off_true = transitions(p, q_true)
    _, off_draft = transitions(p, q_draft)
    depth = [0] * (len(parents) + 1)
    for i, parent in enumerate(parents):
        depth[i + 1] = depth[parent] + 1
    with np.errstate(divide="ignore"):
        out = np.log1p(-p)
        for d in range(1, max(depth) + 1):
            level = [off_true if true[i] else off_draft for i, di in enumerate(depth) if di == d]
            out = out + np.log(level_silent(level, share))
    return out
