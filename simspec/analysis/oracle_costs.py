"""The oracle's cost tables: cost(i, k) of every state i and draft count k of a request.

At batch size 1 a state's cost is its k draft steps plus the (k + 1)-token verify pass
(:func:`alone_costs`); at B > 1 it is the request's marginal-cost attribution inside a typical
batch (:class:`StepCost`). Both price every (state, k) of a request as one array expression:
one :func:`~simspec.costs.batch.verify_totals` call and one
:func:`~simspec.costs.batch.draft_step_totals` call, which give bit for bit what the
scalar ``verify_pass`` and ``draft_step`` give pass by pass. The expert unions come from
:func:`unique_experts_table`. The DP over these tables is :mod:`simspec.analysis.oracle`.
"""

from __future__ import annotations

import numpy as np

from simspec.costs.batch import draft_step_totals, verify_totals
from simspec.routing.sets import to_sets, window_union_sizes
from simspec.sim.engine import EngineSetup


def unique_experts_by_k(setup: EngineSetup, request_id: int, state: int, kmax: int) -> np.ndarray:
    """Distinct experts per layer for k = 0..kmax drafts at ``state``: (kmax + 1, layers).

    The k-draft pass feeds the first k + 1 of the kmax + 1 tokens, so in Monte-Carlo mode one
    cumulative union over the fed tokens gives every k at once.
    """
    refs = setup.references
    if not refs.num_layers:
        return np.zeros((kmax + 1, 0))
    if refs.routing.mode != "analytic":  # sampled or replayed sets
        sets = to_sets(refs.fed_routing(request_id, state, kmax), refs.num_experts)
        return np.logical_or.accumulate(sets, axis=0).sum(axis=-1).astype(float)
    return np.stack([refs.pass_unique_experts([(request_id, state, k)]) for k in range(kmax + 1)])


def unique_experts_table(setup: EngineSetup, request_id: int, kmax: int) -> np.ndarray:
    """:func:`unique_experts_by_k` at every state of a request: (L, kmax + 1, layers).

    Row i is that function at state i (row 0 too). With sampled or replayed sets the request's
    stored tokens (:meth:`~simspec.text.reference.ReferenceSet.state_tokens`) are each read
    once: every state's union grows along its true tokens, then its rejected drafts
    (:func:`~simspec.routing.sets.window_union_sizes`, bitmasks and popcounts), not L separate
    unions, nor each true token converted once per window it is in (up to kmax + 1). The
    counts are the same integers, kept as int32 (so the tables price each count once, see
    :func:`_union_table`). Analytic routing gives expected (fractional) counts, as floats.
    """
    refs = setup.references
    last = refs.sequence(request_id).output_tokens
    if not refs.num_layers:
        return np.zeros((last, kmax + 1, 0))
    if refs.routing.mode != "analytic":
        true, rejected, accepted = refs.state_tokens(request_id, kmax)
        return window_union_sizes(true, rejected, accepted, kmax, refs.num_experts)
    return np.stack([unique_experts_by_k(setup, request_id, i, kmax) for i in range(last)])


def alone_costs(setup: EngineSetup, contexts: np.ndarray, unique: np.ndarray) -> np.ndarray:
    """cost(i, k) at batch size 1 for states with ``contexts`` (S,) and ``unique`` (S, K+1,
    layers): the k draft steps (a running sum) plus the (k + 1)-token verify pass; (S, K+1).

    Every draft step and every pass is priced in one call each
    (:func:`~simspec.costs.batch.draft_step_totals`,
    :func:`~simspec.costs.batch.verify_totals`).
    """
    costs = setup.cost_model
    states, width = unique.shape[:2]
    kmax = width - 1
    ctx = np.asarray(contexts, dtype=np.int64)
    steps = draft_step_totals(costs, (ctx[:, None] + np.arange(kmax)).reshape(-1, 1))
    draft = np.cumsum(np.hstack([np.zeros((states, 1)), steps.reshape(states, kmax)]), axis=1)
    tokens = np.tile(np.arange(1, width + 1), states).reshape(-1, 1)
    union, index = _union_table(0.0, unique.reshape(states * width, -1), 1.0)
    verify = verify_totals(
        costs, tokens, np.repeat(ctx, width).reshape(-1, 1), union, unique_index=index
    )
    return draft + verify.reshape(states, width)


def _union_table(
    base: np.ndarray | float, unique: np.ndarray, scale: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray | None]:
    """The passes' unions ``base + unique · scale`` (rows, layers), as a table of values per
    layer and an index into it when ``unique`` holds counts (an integer array: sampled or
    replayed routing), so the cost model evaluates its expert kernel once per value; else as
    is.
    """
    if not unique.size or not np.issubdtype(unique.dtype, np.integer):
        return base + unique * scale, None
    counts = unique
    values = np.arange(int(counts.max()) + 1, dtype=float)[:, None]
    return np.broadcast_to(base + values * scale, (len(values), unique.shape[1])), counts


class StepCost:
    """Marginal-cost attribution of one request's step inside a typical batch (B > 1).

    The other requests are summarised by their count, tokens per request, context and the
    expected union of their experts. The request pays its share of the pass without drafts
    plus everything its drafts add: verify growth (tokens, and new experts: its own union times
    the fraction of experts the others have not loaded) and draft steps it adds.
    """

    def __init__(
        self,
        setup: EngineSetup,
        others: int,
        tokens_each: float,
        context: float,
        others_union: np.ndarray,
    ):
        self.setup = setup
        self.others = others
        self.tokens_each = max(1, round(tokens_each))
        self.context = int(context)
        self.others_union = others_union
        self._others_only: dict[int, np.ndarray] = {}  # kmax -> draft steps of the others

    def _draft_extras(self, contexts: np.ndarray, kmax: int) -> np.ndarray:
        """What the request's j-th draft step adds to the batch's, j = 1..kmax: (S, kmax).

        Draft step j runs for the others still drafting (those with k ≥ j: all of them while
        j ≤ tokens_each − 1) at context + j − 1, plus this request at its own context + j − 1.
        """
        costs = self.setup.cost_model
        drafting = self.others if self.tokens_each - 1 >= 1 else 0
        depths = np.arange(kmax)
        with_me = np.empty((len(contexts), kmax, 2), dtype=np.int64)  # the others, this one
        with_me[..., 0] = self.context + depths
        with_me[..., 1] = contexts[:, None] + depths
        extra = draft_step_totals(costs, with_me.reshape(-1, 2), counts=np.array([drafting, 1]))
        extra = extra.reshape(len(contexts), kmax)
        if drafting:
            if kmax not in self._others_only:
                others = np.repeat(self.context + depths, drafting).reshape(kmax, drafting)
                self._others_only[kmax] = draft_step_totals(costs, others)
            shared = depths + 1 <= self.tokens_each - 1  # depths where the others draft too
            extra[:, shared] -= self._others_only[kmax][shared]
        return extra

    def table(self, contexts: np.ndarray, unique: np.ndarray) -> np.ndarray:
        """cost(i, k) for states with ``contexts`` (S,) and ``unique`` (S, K+1, layers): (S, K+1).

        Every (state, k) pass is one row of a single
        :func:`~simspec.costs.batch.verify_totals` call with two columns: the
        others (``counts`` = their number; their tokens and context) and this request (its
        k + 1 tokens and own context). Tokens and contexts are integers, so this prices each
        pass exactly as the batch written out request by request.
        """
        costs, n = self.setup.cost_model, self.setup.references.num_experts
        states, width = unique.shape[:2]
        rows, batch = states * width, self.others + 1
        tokens = np.empty((states, width, 2), dtype=np.int64)
        tokens[..., 0] = self.tokens_each
        tokens[..., 1] = np.arange(1, width + 1)
        ctxs = np.empty((states, width, 2), dtype=np.int64)
        ctxs[..., 0] = self.context
        ctxs[..., 1] = np.asarray(contexts, dtype=np.int64)[:, None]
        covered = self.others_union / n if n else 0.0
        union, index = _union_table(self.others_union, unique.reshape(rows, -1), 1.0 - covered)
        out = verify_totals(
            costs,
            tokens.reshape(rows, 2),
            ctxs.reshape(rows, 2),
            union,
            counts=np.array([self.others, 1]),
            unique_index=index,
        ).reshape(states, width)
        base = out[:, :1]
        out = base / batch + (out - base)
        extra = self._draft_extras(np.asarray(contexts, dtype=np.int64), width - 1)
        for j in range(1, width):  # draft step j is paid by every k >= j (a running sum)
            out[:, j:] += extra[:, j - 1 : j]
        return out

    def __call__(self, ctx: int, unique: np.ndarray) -> np.ndarray:
        """cost(i, k) of one state (context ``ctx``, ``unique`` (K+1, layers)): (K+1,)."""
        return self.table(np.array([ctx]), unique[None])[0]
