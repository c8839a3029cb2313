"""Draft trees in the engine: what a tree step feeds, costs and commits (``[speculation]``).

When ``speculation.topk > 1`` or ``speculation.num_draft_tokens > 0`` the policy's k_b is the
*depth* of request b's tree (:mod:`simspec.text.tree`), and :func:`simspec.sim.step.step`
asks :class:`TreeSpeculation` for the rest of the step:

* **fed tokens**: the root plus the n_b verified nodes of the depth-k_b tree
  (``num_draft_tokens`` when the drafter reaches full depth);
* **draft phase**: k_b draft steps, one row per request at step 1 and ``topk`` rows per request
  at each later step (:func:`simspec.costs.batch.tree_draft_phase_s`);
* **commits**: the longest accepted root path a_b + 1, from the request's rank paths
  (:func:`simspec.text.tree.draw_rank_paths`, stream ``tree_ranks``), capped like the chain's
  match lengths so every request commits exactly its output length;
* **experts**: each node continues its parent's routing, so a tree of n nodes whose accepted
  path has a drafts is fed as the chain of n + 1 tokens with a + 1 true tokens and n − a rejected
  drafts. Under lag-1 (Markov) routing the two have the same silent probability for every
  expert, P(root silent)·Π_edges P(child silent | parent silent), whatever the tree's shape, so
  the analytic union is exact there when siblings are independent given their parent. Siblings
  route alike (``routing.sibling_overlap``): the analytic mode feeds each tree's shape
  (:meth:`TreeSpeculation.shapes`) and :mod:`simspec.routing.siblings` prices their shared
  experts; with longer lag profiles the tree is the chain's answer times the lag-1 tree factor.
  Sampled routing draws rejected nodes as a chain.

A tree-aware policy (:meth:`~simspec.policies.base.Policy.tree_family`) chooses each request's
shape itself: the step hands this class every request's depth, topk and budget, and the
scenario's ``topk`` and ``num_draft_tokens`` are then not read. Chain policies price a draft
token as one more chain token (:mod:`simspec.sim.marginal`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simspec import rng as rngs
from simspec.config.speculation import SpeculationConfig
from simspec.costs.base import CostModel
from simspec.costs.batch import tree_draft_phase_s
from simspec.text.acceptance import AcceptanceConfig, slot_alphas
from simspec.text.reference import ReferenceSet
from simspec.text.tree import DraftTree, build_tree, draw_rank_paths

#: Positions averaged for the nominal per-depth alpha of a random acceptance process.
NOMINAL_POSITIONS = 4096


def nominal_slot_alphas(acceptance: AcceptanceConfig, slots: int, seed: int) -> np.ndarray:
    """Mean acceptance probability of draft slots 1..``slots`` under the acceptance process.

    Exact for ``iid`` and ``per_position`` (they draw nothing); a sample mean over
    :data:`NOMINAL_POSITIONS` positions otherwise (its own stream, nothing else changes).
    """
    stream = rngs.stream(seed, "tree_ranks")
    return slot_alphas(acceptance, NOMINAL_POSITIONS, slots, stream).mean(axis=0)


def family_trees(
    references: ReferenceSet, rank_decay: float, max_depth: int, widest: int
) -> TreeSpeculation:
    """The trees of a tree-aware policy's shapes: the scenario's text, acceptance and rank
    decay, rank paths as wide as its widest topk (its shapes carry their own topk and budget)."""
    acceptance, seed = references.acceptance, references.seed
    nominal = nominal_slot_alphas(acceptance, max(max_depth, 1), seed)
    return TreeSpeculation(max(widest, 1), 0, rank_decay, nominal, seed)


@dataclass
class TreeSpeculation:
    """Tree shapes and rank paths by request, built on first use (deterministic).

    ``topk`` and ``num_draft_tokens`` are the scenario's shape (``[speculation]``), used when a
    method is given depths only; a tree-aware policy passes each request's own topk and budget
    (:mod:`simspec.text.shapes`). Rank paths are drawn once per request with the widest topk
    asked for (``topk``): a narrower tree reads the same draws (a rank beyond its width is not
    one of its nodes), so every shape sees the same text.
    """

    topk: int
    num_draft_tokens: int
    rank_decay: float
    nominal_alphas: np.ndarray  # (K_max,) mean alpha per depth
    seed: int
    _trees: dict[tuple[int, int, int], DraftTree] = field(default_factory=dict, repr=False)
    _ranks: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _shapes: dict[tuple[int, int, int], tuple[int, ...]] = field(default_factory=dict, repr=False)

    @classmethod
    def from_config(
        cls,
        speculation: SpeculationConfig,
        acceptance: AcceptanceConfig,
        max_depth: int,
        seed: int,
        *,
        widest: int = 1,
    ) -> TreeSpeculation:
        """The tree step of a scenario's ``[speculation]`` and ``[acceptance]`` tables
        (``widest``: the widest topk a policy may ask for, if wider than the table's)."""
        return cls(
            max(speculation.topk, widest),
            speculation.num_draft_tokens,
            speculation.rank_decay,
            nominal_slot_alphas(acceptance, max(max_depth, 1), seed),
            seed,
        )

    def _key(self, depth: int, topk: int | None, budget: int | None) -> tuple[int, int, int]:
        return (
            int(depth),
            self.topk if topk is None else int(topk),
            self.num_draft_tokens if budget is None else int(budget),
        )

    def tree(self, depth: int, topk: int | None = None, budget: int | None = None) -> DraftTree:
        """The verified tree of ``depth`` steps (the scenario's topk and budget unless given)."""
        key = self._key(depth, topk, budget)
        tree = self._trees.get(key)
        if tree is None:
            alphas = [float(a) for a in self.nominal_alphas[:depth]]
            tree = build_tree(alphas, key[0], key[1], key[2], self.rank_decay)
            self._trees[key] = tree
        return tree

    def shape(
        self, depth: int, topk: int | None = None, budget: int | None = None
    ) -> tuple[int, ...]:
        """The verified tree of ``depth`` steps as parent indices: node 0 is the root, nodes by
        depth then rank, entry i the parent of node i + 1 (a chain at depth 0: no nodes)."""
        key = self._key(depth, topk, budget)
        shape = self._shapes.get(key)
        if shape is None:
            if depth <= 0:
                shape = ()
            else:
                nodes = sorted(self.tree(*key).graph.nodes, key=lambda v: (len(v), v))
                index = {v: i for i, v in enumerate(nodes)}
                shape = tuple(index[v[:-1]] for v in nodes[1:])
            self._shapes[key] = shape
        return shape

    def shapes(
        self,
        depths: np.ndarray,
        topks: np.ndarray | None = None,
        budgets: np.ndarray | None = None,
    ) -> list[tuple[int, ...]]:
        """:meth:`shape` of every request (its depth, and its topk and budget if given)."""
        if topks is None or budgets is None:
            return [self.shape(int(k)) for k in depths.tolist()]
        return [
            self.shape(k, w, n)
            for k, w, n in zip(depths.tolist(), topks.tolist(), budgets.tolist(), strict=True)
        ]

    def rank_paths(self, references: ReferenceSet, request_id: int) -> np.ndarray:
        """Rank of the target's token per (state, depth) of request ``request_id``."""
        ranks = self._ranks.get(request_id)
        if ranks is None:
            seq = references.sequence(request_id)
            ranks = draw_rank_paths(
                seq.match_lengths,
                seq.confidences,
                self.nominal_alphas,
                self.rank_decay,
                self.topk,
                rngs.stream(self.seed, "tree_ranks", request_id),
            )
            self._ranks[request_id] = ranks
        return ranks

    def verify_plan(
        self,
        references: ReferenceSet,
        states: list[tuple[int, int]],
        depths: np.ndarray,
        topks: np.ndarray | None = None,
        budgets: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Verified drafts and accepted drafts per request, for (request id, state) pairs."""
        drafts = np.zeros(len(states), dtype=np.int64)
        accepted = np.zeros(len(states), dtype=np.int64)
        shapes: list[tuple[int, int]] | None = None
        if topks is not None and budgets is not None:
            shapes = list(zip(topks.tolist(), budgets.tolist(), strict=True))
        for b, ((rid, state), k) in enumerate(
            zip(states, np.asarray(depths).tolist(), strict=True)
        ):
            if k <= 0:
                continue
            tree = self.tree(k) if shapes is None else self.tree(k, *shapes[b])
            seq = references.sequence(rid)
            room = max(seq.output_tokens - 1 - state, 0)  # the chain's match-length cap
            drafts[b] = tree.num_drafts
            ranks = self.rank_paths(references, rid)[state, :k].tolist()
            accepted[b] = min(tree.accepted_length(ranks), room)
        return drafts, accepted

    def draft_phase_s(
        self,
        cost_model: CostModel,
        contexts: np.ndarray,
        depths: np.ndarray,
        topks: np.ndarray | None = None,
    ) -> float:
        """Time of the step's draft phase (module docstring; each request's topk if given)."""
        return tree_draft_phase_s(
            cost_model, contexts, depths, self.topk if topks is None else topks
        )
