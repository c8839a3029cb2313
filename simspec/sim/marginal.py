"""What one more draft token would cost: the prices behind ``BatchView.by_depth``.

While the engine collects a step's decisions it keeps a :class:`StepPlan`: the tokens each request
will feed, the requests drafting at each depth, and an *estimate* of the batch's distinct experts
per MoE layer. The estimate is what an online policy could know before the verify pass runs the
router: it starts from the expected union of the batch's B committed tokens under independent
routing, N·(1 − (1 − k_e/N)^B), and every extra draft token adds in expectation

    ΔU = (1 − rho)·k_e·(N − U) / (N − k_e)

experts: it reuses a fraction rho (the lag-1 overlap; chance level k_e/N when routing is
independent) of its predecessor's experts, already in the union, and draws the rest from the N − k_e
other experts, of which N − U are not yet loaded. ΔU → 0 as the union covers every expert.

**Shared costs are priced as a batch decision.** Draft step j is one forward of the drafter for
every request drafting at depth j: its fixed part F (weights, launch) is paid once however many
requests join it. Charging it to whichever request asks first makes that request decline, then
the next, and at B = 32 nobody drafts. So the engine decides depth by depth for the whole batch
(:mod:`simspec.sim.decide`). With S the requests still drafting at depth j − 1 and
A a set of them extending to depth j, a request's *share* is

    Δc(A) = { [verify(T + e_A, U_n+|A|) − verify(T, U_n)]
              + [draft_step(D_j ∪ A) − draft_step(D_j)] } / |A|

(e_A: one more token for each request of A; D_j: requests already drafting at depth j, none when
the batch decides depth by depth). Two questions, as a batch would ask them:

1. who gains from joining a step that runs anyway? Every request of S is asked at Δc(S) without
   F (``step_overhead=False``: its verify share plus what it adds to the step); the yes-sayers
   form A;
2. does the step pay for itself? A is asked again at Δc(A), F included; if nobody in A would pay
   its share, nobody drafts at depth j (at B = 1 this is the single request's own marginal
   cost, whole draft step included, as before).

The expert union is shared across depths too: the first drafts of a step load the experts that
later ones reuse, so pricing a depth-1 draft at today's union charges it the steep start of the
union's growth. The verify term is therefore taken at the step's *expected end*: T raises every
request towards 1 + k̄ tokens, by the (B − 1)/B of the way the *other* requests account for (a
request's own later drafts are its own later decisions; at B = 1 nothing is assumed ahead), and
U_n is the union after those n extra drafts, in closed form
U_n = N − (N − U)·(1 − a)^n with a = (1 − rho)·k_e/(N − k_e). k̄ (``expected_drafts``) is the
uniform draft length that minimises the estimated time per committed token at the batch's
measured per-draft acceptance α (:meth:`StepPlan.anchor_drafts`, Leviathan's (1 − α^(k+1))/(1 − α)
tokens per request); the cap before any verify pass.

**Tree shapes.** A tree-aware policy weighs whole shapes (:mod:`simspec.text.shapes`), so it is
asked at :func:`shape_shares_s`: for each shape s of its family, each request's share of the
step if every request of the batch took s, less plain decoding's share,

    Δc(s) = { [verify(n_s tokens each, U after B·(n_s − 1) drafts) − verify(1 each, U_0)]
              + draft_phase(s for all) } / B,

the union grown by the same ΔU recursion (a tree's node continues its parent's routing, as a
chain's next draft does its predecessor's), the draft phase one row per request at step 1 and
topk rows at each later step (:func:`~simspec.costs.batch.tree_draft_phase_s`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from simspec.costs.base import CostModel
from simspec.costs.batch import verify_totals
from simspec.physics.experts import added_experts, independent_union
from simspec.text.shapes import TreeShape


@dataclass(frozen=True, slots=True)
class UnionModel:
    """Expected-union arithmetic for one model and routing (see the module docstring)."""

    num_experts: int
    experts_per_token: int
    num_layers: int
    overlap: float  # lag-1 overlap of a draft with its predecessor

    def base(self, batch_size: int) -> np.ndarray:
        """Expected distinct experts per layer of ``batch_size`` independent tokens."""
        n, k = self.num_experts, self.experts_per_token
        if n == 0:
            return np.zeros(self.num_layers)
        return np.full(self.num_layers, independent_union(n, k, batch_size))

    def added(self, union: np.ndarray) -> np.ndarray:
        """Expected new experts per layer from one more draft token."""
        return added_experts(union, self.num_experts, self.experts_per_token, self.overlap)

    def after(self, union: np.ndarray, drafts: int) -> np.ndarray:
        """Expected union after ``drafts`` more draft tokens: N − (N − U)·(1 − a)^n.

        The ΔU recursion in closed form, a = (1 − rho)·k_e/(N − k_e) (module docstring).
        """
        n, k = self.num_experts, self.experts_per_token
        if drafts <= 0 or n <= k:
            return union
        a = min(max((1 - self.overlap) * k / (n - k), 0.0), 1.0)
        return np.where(union >= n, union, n - (n - union) * (1 - a) ** drafts)


@dataclass
class StepPlan:
    """The decisions taken so far in one step, and the marginal cost of one more draft token."""

    cost_model: CostModel
    union_model: UnionModel
    contexts: np.ndarray  # (B,)
    #: Draft tokens per request the verify term is priced at (the step's expected end). None:
    #: :meth:`anchor_drafts` from ``acceptance`` on first use (0 if that is None too).
    expected_drafts: float | None = 0.0
    acceptance: float | None = None  # the batch's measured per-draft acceptance
    cap: int = 0  # the most drafts per request this step
    tokens: np.ndarray = field(init=False)  # (B,) tokens each request feeds so far
    union: np.ndarray = field(init=False)  # (layers,) expected distinct experts
    base_union: np.ndarray = field(init=False)  # the union before any draft
    depth_contexts: list[list[int]] = field(
        default_factory=list
    )  # per depth j-1: drafting contexts
    #: Pure cost-model answers reused while no draft is added (cleared by :meth:`add_drafts`):
    #: the verify pass at the expected end, and each depth's draft step as it stands.
    _memo: dict[object, float] = field(default_factory=dict, repr=False)
    _overheads: dict[int, float] = field(default_factory=dict, repr=False)  # by context

    def __post_init__(self) -> None:
        self.tokens = np.ones(len(self.contexts), dtype=np.int64)
        self.union = self.union_model.base(len(self.contexts))
        self.base_union = self.union

    def share_cost_s(self, requests: Sequence[int], *, step_overhead: bool = True) -> float:
        """Δc(A) of the module docstring: each request's share if all of ``requests`` extend.

        ``step_overhead=False`` leaves out the fixed part of a draft step nobody runs yet (what
        one more request adds to a step that runs anyway).
        """
        if not len(requests):
            return 0.0
        if self.expected_drafts is None:
            alpha = self.acceptance
            self.expected_drafts = 0 if alpha is None else self.anchor_drafts(alpha, self.cap)
        # The drafts the *other* requests are expected to add: a request's own later drafts are
        # its own later decisions (at B = 1 nothing is assumed ahead).
        batch = len(self.tokens)
        ahead = np.maximum(round(self.expected_drafts) + 1 - self.tokens, 0)
        ahead = (ahead * (batch - 1)) // batch
        end_tokens = self.tokens + ahead
        end_union = self.union_model.after(self.union, int(ahead.sum()))
        extra = np.zeros_like(self.tokens)
        extra[list(requests)] = 1
        grown = self.union_model.after(end_union, len(requests))
        verify = self.cost_model.verify_pass(end_tokens + extra, self.contexts, grown).total_s
        before = self._memo.get("end")
        if before is None:  # the same for every question until a draft is added
            before = self.cost_model.verify_pass(end_tokens, self.contexts, end_union).total_s
            self._memo["end"] = before
        verify -= before
        draft = 0.0
        new_by_depth: dict[int, list[int]] = {}
        for b in requests:  # the draft each would make is depth tokens[b] (1-based)
            depth = int(self.tokens[b])
            new_by_depth.setdefault(depth, []).append(int(self.contexts[b]) + depth - 1)
        for depth, new in sorted(new_by_depth.items()):
            drafting = self.depth_contexts[depth - 1] if depth <= len(self.depth_contexts) else []
            draft += self.cost_model.draft_step(np.array([*drafting, *new]))
            if drafting:
                step = self._memo.get(depth)
                if step is None:
                    step = self.cost_model.draft_step(np.array(drafting))
                    self._memo[depth] = step
                draft -= step
            elif not step_overhead:
                draft -= self.step_overhead_s(new[0])
        return (verify + draft) / len(requests)

    def step_overhead_s(self, context: int) -> float:
        """Fixed part of a draft step: its time extrapolated to zero requests, 2·d(1) − d(2)."""
        value = self._overheads.get(context)
        if value is None:
            one = self.cost_model.draft_step(np.array([context]))
            two = self.cost_model.draft_step(np.array([context, context]))
            value = self._overheads[context] = min(max(2 * one - two, 0.0), one)
        return value

    def anchor_drafts(self, alpha: float, cap: int) -> int:
        """The uniform draft length k* that minimises estimated time per committed token.

        (draft steps + verify(k + 1 each, U after B·k drafts)) / (B·(1 − α^(k+1))/(1 − α)), with
        α the batch's measured per-draft acceptance: the expected step end that shares are
        priced at (module docstring).
        """
        batch = len(self.contexts)
        best, best_k = float("inf"), 0
        for k in range(cap + 1):
            tokens = np.full(batch, k + 1, dtype=np.int64)
            union = self.union_model.after(self.base_union, batch * k)
            cost = self.cost_model.verify_pass(tokens, self.contexts, union).total_s
            cost += sum(self.cost_model.draft_step(self.contexts + j) for j in range(k))
            per_request = k + 1 if alpha >= 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
            if cost / (batch * per_request) < best:
                best, best_k = cost / (batch * per_request), k
        return best_k

    def marginal_cost_s(self, b: int) -> float:
        """Extra draft + verify time if request ``b`` alone drafts one more token."""
        return self.share_cost_s((b,))

    def add_draft(self, b: int) -> None:
        """Record that request ``b`` drafts one more token."""
        self.add_drafts((b,))

    def add_drafts(self, requests: Sequence[int]) -> None:
        """Record that each of ``requests`` drafts one more token."""
        self._memo.clear()
        ids = np.asarray(requests, dtype=np.int64)
        depths = self.tokens[ids]
        if len(ids) and depths.min() == depths.max() and len(set(ids.tolist())) == len(ids):
            depth = int(depths[0])  # one depth, distinct requests (a batch decision): at once
            while len(self.depth_contexts) < depth:
                self.depth_contexts.append([])
            self.depth_contexts[depth - 1].extend((self.contexts[ids] + (depth - 1)).tolist())
            self.tokens[ids] += 1
        else:
            for b in requests:
                depth = int(self.tokens[b])
                while len(self.depth_contexts) < depth:
                    self.depth_contexts.append([])
                self.depth_contexts[depth - 1].append(int(self.contexts[b]) + depth - 1)
                self.tokens[b] += 1
        self.union = self.union_model.after(self.union, len(requests))


def shape_shares_s(
    cost_model: CostModel,
    union_model: UnionModel,
    contexts: np.ndarray,
    shapes: Sequence[TreeShape],
) -> np.ndarray:
    """Δc(s) of the module docstring for every shape: (S,) seconds per request (0 for a shape
    that drafts nothing). Every verify pass is one row of one vectorised call; each draft step
    (depth, rows per request) is priced once and shared by the shapes that run it."""
    ctx = np.asarray(contexts, dtype=np.int64)
    batch = len(ctx)
    if not batch or not len(shapes):
        return np.zeros(len(shapes))
    base = union_model.base(batch)
    drafts = np.array([s.verified_drafts if s.steps > 0 else 0 for s in shapes])
    unions = np.stack([union_model.after(base, batch * int(n)) for n in drafts.tolist()])
    tokens = np.repeat(drafts[:, None] + 1, batch, axis=1)
    verify = verify_totals(cost_model, tokens, np.tile(ctx, (len(shapes), 1)), unions)
    steps: dict[tuple[int, int], float] = {}  # (depth, rows per request) -> draft step time

    def draft_step(depth: int, rows: int) -> float:
        key = (depth, rows)
        if key not in steps:
            steps[key] = cost_model.draft_step(np.repeat(ctx + depth - 1, rows))
        return steps[key]

    draft = np.array(
        [sum(draft_step(j, 1 if j == 1 else s.topk) for j in range(1, s.steps + 1)) for s in shapes]
    )
    plain = verify_totals(cost_model, np.ones((1, batch), dtype=np.int64), ctx[None], base[None])
    return np.where(drafts > 0, (verify - plain[0] + draft) / batch, 0.0)
