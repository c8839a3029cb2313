"""Reference sequences: what the text fixes before any policy runs (common random numbers).

For request r with L output tokens y_1..y_L, state i means "y_1..y_i committed" (the prefill
commits y_1). At state i the request feeds y_i plus k drafts. The reference data are:

* ``match_lengths[i]`` = m_i, leading drafts the target would accept, capped at the drafter's
  K_max and at L − i − 1 (so every request commits exactly L tokens);
* ``confidences[i, j-1]`` = the drafter's confidence for draft slot j;
* the routing of the true token y_t (``true[t]``, a Markov chain along the text) and of the r-th
  rejected draft at state i (``rejected[r-1][i]``), which continues the chain from the last
  accepted token y_{i+m_i} with its own draws: its experts are loaded even though it is
  discarded (the counterfactual MoE cost of Amankulov & Mamatin, arXiv 2609.22156).

A verify pass at state i with k drafts therefore feeds the routing of y_i..y_{i+min(k,m_i)} and of
the first k − m_i rejected drafts: :meth:`ReferenceSet.fed_routing`. Every policy, and the oracle,
reads the same numbers. Each quantity comes from its own named stream (``simspec.rng``); routing
is generated in blocks of requests, lazily, and rejected depth r has its own stream, so asking for
deeper drafts never changes shallower ones. Each depth computes only the states that can feed
it, m_i <= K - r with K the policies' budget bound (``draft_bound``) or K_max
(:mod:`~simspec.text.rejected_levels`); a read beyond draws the block again with every state.

The routing itself comes from one :class:`~simspec.routing.model.RoutingModel` (sampled sets,
their max-entropy expectation in ``routing.mode = "analytic"``, or a recorded trace); the text
(match lengths, confidences) is drawn here, or replayed from a recorded run with
``acceptance.process = "trace"`` (:mod:`simspec.text.replay`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from simspec import rng as rngs
from simspec.physics.models import ModelShape
from simspec.routing.config import RoutingConfig
from simspec.routing.model import RoutingModel, routing_model
from simspec.routing.predictor import UniqueExpertPredictor
from simspec.routing.sets import union_sizes, union_sizes_by
from simspec.routing.trace import RoutingTrace
from simspec.text.acceptance import AcceptanceConfig, draw_acceptance
from simspec.text.rejected_levels import BlockInputs, RejectedStore
from simspec.text.replay import AcceptanceReplay
from simspec.text.workload import WorkloadConfig, draw_lengths

BLOCK_REQUESTS = 64  # requests whose routing is generated together


@dataclass(frozen=True, slots=True)
class ReferenceSequence:
    """One request's text, as far as speculation is concerned (see module docstring)."""

    request_id: int
    prompt_tokens: int
    output_tokens: int
    match_lengths: np.ndarray  # (L,), index = state i; index 0 unused
    confidences: np.ndarray  # (L, K_max)


class ReferenceSet:
    """The reference sequences of every request of a scenario, built lazily and cached."""

    def __init__(
        self,
        *,
        seed: int,
        workload: WorkloadConfig,
        acceptance: AcceptanceConfig,
        routing: RoutingConfig,
        shape: ModelShape,
        max_draft_tokens: int,
        routing_trace: RoutingTrace | None = None,
        acceptance_trace: RoutingTrace | None = None,
        draft_bound: int | None = None,
        trees: bool = False,
    ):
        self.seed = seed
        self.workload = workload
        self.acceptance = acceptance
        self.routing = routing
        self.shape = shape
        self.max_draft_tokens = max_draft_tokens
        self._sequences: dict[int, ReferenceSequence] = {}
        self._true: dict[int, np.ndarray] = {}
        #: The most drafts a chain reader feeds at one state (every policy's budget cap), if
        #: known and below K_max: rejected depths then keep only the rows it can read.
        self.draft_bound = (
            draft_bound if draft_bound is not None and draft_bound < max_draft_tokens else None
        )
        #: Whether draft trees read these sequences: a tree feeds the nodes off its accepted
        #: path as rejected depths up to its size − 1 at any state, which no chain's K_max
        #: caps, so every depth keeps every row (a cap would leave out rows a tree reads and
        #: make each block draw its depths twice).
        self.trees = trees
        self._rejected = RejectedStore(
            self._rejected_inputs,
            self._draw_rejected,
            self.draft_bound,
            self._draft_memory,
            cap=None if trees else max_draft_tokens,
        )
        self.num_layers = shape.num_moe_layers
        self.num_experts = shape.num_experts
        self._replayed_acceptance = (
            None
            if acceptance_trace is None
            else AcceptanceReplay(acceptance_trace, acceptance.trace_wrap)
        )
        #: How the text routes to experts (:mod:`simspec.routing.model`).
        self.model: RoutingModel = routing_model(
            routing,
            shape,
            seed=seed,
            max_draft_tokens=max_draft_tokens,
            trace=routing_trace,
        )
        #: Inclusion probability of each expert per MoE layer, (layers, N).
        self.inclusion_probabilities: np.ndarray = self.model.inclusion_probabilities
        # expected_unique_alone: row of (fed, true) in _alone_rows, -1 where not asked yet
        self._alone_index = np.full((0, 0), -1, dtype=np.int64)
        self._alone_rows = np.zeros((0, self.num_layers))

    @property
    def predictor(self) -> UniqueExpertPredictor:
        """The analytic unique-expert predictor of these statistics (built on first use)."""
        return self.model.predictor

    def __len__(self) -> int:
        return self.workload.num_requests

    def sequence(self, request_id: int) -> ReferenceSequence:
        """Lengths, confidences and match lengths of request ``request_id``."""
        seq = self._sequences.get(request_id)
        if seq is None:
            prompt, output = draw_lengths(
                self.workload, rngs.stream(self.seed, "workload", request_id)
            )
            if self._replayed_acceptance is not None:  # a recorded run's outcomes
                replay = self._replayed_acceptance
                confidence, match = replay.outcomes(request_id, output, self.max_draft_tokens)
            else:
                rng = rngs.stream(self.seed, "acceptance", request_id)
                confidence, match = draw_acceptance(
                    self.acceptance, output, self.max_draft_tokens, rng
                )
            cap = np.maximum(output - 1 - np.arange(output), 0)
            match = np.minimum(match, cap)
            match[0] = 0
            seq = ReferenceSequence(request_id, prompt, output, match, confidence)
            self._sequences[request_id] = seq
        return seq

    # -- routing -----------------------------------------------------------------------------
    def _block_requests(self, block: int) -> range:
        return range(block * BLOCK_REQUESTS, min((block + 1) * BLOCK_REQUESTS, len(self)))

    def _block_true(self, block: int) -> np.ndarray:
        masks = self._true.get(block)
        if masks is None:
            ids = self._block_requests(block)
            lengths = [self.sequence(r).output_tokens for r in ids]
            rng = rngs.stream(self.seed, "routing", block)
            masks = self._true[block] = self.model.true_block(rng, ids, lengths)
        return masks

    def _rejected_inputs(self, block: int) -> BlockInputs:
        """What drawing ``block``'s rejected depths reads (:class:`BlockInputs`)."""
        true = self._block_true(block)
        nseq, length = true.shape[:2]
        matches = np.zeros((nseq, length), dtype=np.int64)
        outputs = np.zeros(nseq, dtype=np.int64)
        for q in range(nseq):
            seq = self.sequence(block * BLOCK_REQUESTS + q)
            outputs[q] = seq.output_tokens
            matches[q, : outputs[q]] = seq.match_lengths
        # Predecessor of the first rejected draft at state i: y_{i+m_i}.
        anchor = np.where(np.arange(length) < outputs[:, None], np.arange(length) + matches, 0)
        return BlockInputs(true, matches, outputs, anchor)

    def _draft_memory(self) -> int:
        return self.model.draft_memory

    def _draw_rejected(
        self,
        block: int,
        level: int,
        inputs: BlockInputs,
        full: list[np.ndarray],
        keep: np.ndarray | None,
    ) -> np.ndarray:
        """Rejected depth ``level`` + 1 of ``block``, from its own stream, after the shallower
        depths ``full``: every row, or at least the rows ``keep`` marks."""
        rng = rngs.stream(self.seed, "rejected_routing", block, level)
        ids, lengths = self._block_requests(block), inputs.outputs.tolist()
        return self.model.rejected_level(
            rng, ids, lengths, inputs.true, inputs.anchor, full[:level], keep
        )

    def fed_routing(
        self, request_id: int, state: int, draft_tokens: int, accepted: int | None = None
    ) -> np.ndarray:
        """Expert ids of the k + 1 tokens fed at ``state`` with k = ``draft_tokens``.

        ``accepted`` overrides the accepted drafts min(k, m_i) (a draft tree accepts its own
        count: the nodes off its accepted path are fed as the rejected drafts of the chain).
        Returns ids (k + 1, num_moe_layers, k_e) (uint8 up to 256 experts, else int16,
        :func:`~simspec.routing.sets.id_dtype`); zero layers for a dense model.
        """
        seq = self.sequence(request_id)
        if not self.num_layers:
            return np.zeros((draft_tokens + 1, 0, 0), dtype=np.int16)
        block, q = divmod(request_id, BLOCK_REQUESTS)
        true = self._block_true(block)[q]
        if accepted is None:
            accepted = min(draft_tokens, int(seq.match_lengths[state]))
        parts = [true[state : state + accepted + 1]]
        rejected = draft_tokens - accepted
        if rejected:
            ids = [self._rejected.ids(block, r, q, state) for r in range(1, rejected + 1)]
            parts.append(np.stack(ids))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def state_routing(self, request_id: int, draft_tokens: int) -> np.ndarray:
        """``fed_routing(request_id, i, draft_tokens)`` for every state i at once, stacked:
        (L, k + 1, num_moe_layers, k_e), one gather per rejected depth (the oracle's tables)."""
        seq = self.sequence(request_id)
        states = np.arange(seq.output_tokens)
        if not self.num_layers:
            return np.zeros((len(states), draft_tokens + 1, 0, 0), dtype=np.int16)
        block, q = divmod(request_id, BLOCK_REQUESTS)
        true = self._block_true(block)[q]
        depth = (
            np.arange(draft_tokens + 1)[None, :]
            - np.minimum(draft_tokens, seq.match_lengths[states])[:, None]
        )  # <= 0: a true token; r > 0: the rejected draft of depth r
        position = np.minimum(states[:, None] + np.arange(draft_tokens + 1), len(true) - 1)
        out = true[position]
        deepest = int(depth.max(initial=0))
        for r in range(1, deepest + 1):
            state, j = np.nonzero(depth == r)
            out[state, j] = self._rejected.ids(block, r, q, state)
        return out

    def state_tokens(
        self, request_id: int, draft_tokens: int
    ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """What :meth:`state_routing` gathers, before gathering (views where every row is
        stored): the ids of the true tokens (L, layers, k_e) and of the rejected drafts of
        depth r = 1..deepest ((L, layers, k_e) each, row i: state i; rows no pass feeds may
        hold anything), and the accepted drafts min(k, m_i) per state
        (L,), from which :func:`~simspec.routing.sets.window_union_sizes` counts every state's
        unions (each stored token read once)."""
        seq = self.sequence(request_id)
        last = seq.output_tokens
        accepted = np.minimum(draft_tokens, seq.match_lengths).astype(np.int64)
        block, q = divmod(request_id, BLOCK_REQUESTS)
        true = self._block_true(block)[q, :last]
        rejected = draft_tokens - accepted  # rejected drafts fed at each state
        return true, self._rejected.states(block, q, last, rejected), accepted

    def pass_unique_experts(
        self,
        fed: list[tuple[int, int, int]] | np.ndarray,
        accepted: Sequence[int] | np.ndarray | None = None,
    ) -> np.ndarray:
        """Distinct routed experts per MoE layer of one pass.

        ``fed`` lists, for every request in the pass, (request id, state, draft tokens) (or is
        an int array (B, 3)). The pass loads, per layer, the union of the experts of all the
        tokens it feeds. Returns a float array (num_moe_layers,); empty for a dense model. In
        analytic routing mode it is the max-entropy expectation (read-only, cached per batch
        composition). ``accepted``, one per request, overrides the accepted drafts of each (a
        draft tree's accepted path; the engine also passes a chain's min(k, m_i) to save lookups).
        """
        if not self.num_layers:
            return np.zeros(0)
        triples = np.asarray(fed, dtype=np.int64).reshape(-1, 3)
        if self.model.analytic:
            if accepted is None:  # a chain's min(k, m_i)
                rows = triples.tolist()
                accepted = [min(k, int(self.sequence(r).match_lengths[i])) for r, i, k in rows]
            return self.expected_unique(triples[:, 2] + 1, np.asarray(accepted, dtype=np.int64) + 1)
        routing, _ = self._pass_routing(fed if isinstance(fed, list) else fed.tolist(), accepted)
        return union_sizes(routing, self.num_experts).astype(float)

    def pass_experts(
        self, fed: np.ndarray, accepted: Sequence[int] | np.ndarray | None = None
    ) -> np.ndarray:
        """The experts one pass loads, per MoE layer, as membership (num_moe_layers, N): the
        union of its tokens' experts (sampled routing; ``fed`` and ``accepted`` as
        :meth:`pass_unique_experts`, whose counts are this table's row sums)."""
        routing, _ = self._pass_routing(fed, accepted)
        tokens, layers = routing.shape[:2]
        member = np.zeros((layers, self.num_experts), dtype=bool)
        if tokens and layers:
            member[np.arange(layers)[None, :, None], routing.astype(np.int64)] = True
        return member

    def expected_unique(
        self, fed: np.ndarray, true: np.ndarray, trees: Sequence[tuple[int, ...]] | None = None
    ) -> np.ndarray:
        """Analytic mode: :meth:`pass_unique_experts` of a pass whose request b feeds ``fed[b]``
        tokens (k_b + 1), ``true[b]`` of them true (a_b + 1): all the expectation reads. With
        ``trees`` request b feeds the nodes of a draft tree (parent indices per node after the
        root, :mod:`simspec.routing.siblings`)."""
        if not self.num_layers:
            return np.zeros(0)
        if trees is None:
            return self.model.expected_unique(fed, true)
        return self.model.expected_unique(fed, true, trees)

    def expected_unique_alone(self, fed: np.ndarray, true: np.ndarray) -> np.ndarray:
        """Analytic mode, chains: (N, layers), row n being :meth:`expected_unique` of a pass
        that request n feeds alone, ``fed[n]`` >= 1 tokens, ``true[n]`` of them true (the same
        numbers: each distinct pair is asked once, then looked up)."""
        fed = np.asarray(fed, dtype=np.int64)
        true = np.minimum(np.maximum(np.asarray(true, dtype=np.int64), 0), fed)
        size = int(fed.max(initial=0)) + 1
        if size > len(self._alone_index):
            index = np.full((size, size), -1, dtype=np.int64)
            old = len(self._alone_index)
            index[:old, :old] = self._alone_index
            self._alone_index = index
        rows = self._alone_index[fed, true]
        if len(rows) and rows.min() < 0:
            missing = np.unique(np.stack([fed[rows < 0], true[rows < 0]], axis=1), axis=0)
            new = [self.expected_unique(np.array([t]), np.array([a])) for t, a in missing.tolist()]
            start = len(self._alone_rows)
            self._alone_rows = np.concatenate(
                [self._alone_rows, np.array(new).reshape(len(new), -1)]
            )
            self._alone_index[missing[:, 0], missing[:, 1]] = np.arange(start, start + len(new))
            rows = self._alone_index[fed, true]
        return self._alone_rows[rows]

    def pass_unique_experts_each(
        self, fed: np.ndarray, accepted: np.ndarray, passes: np.ndarray | None = None
    ) -> np.ndarray:
        """Sampled routing: :meth:`pass_unique_experts` of many passes at once, (P, layers).
        Row b of ``fed`` (B, 3) and of ``accepted`` belongs to pass ``passes[b]`` (0..P - 1;
        default: every row its own pass, P = B)."""
        count = len(fed) if passes is None else int(passes.max(initial=-1)) + 1
        if not self.num_layers:
            return np.zeros((count, 0))
        routing, owner = self._pass_routing(fed, accepted, owners=True)
        assert owner is not None
        group = owner if passes is None else passes[owner]
        return union_sizes_by(routing, group, count, self.num_experts).astype(float)

    def _pass_routing(
        self,
        fed: list[tuple[int, int, int]] | np.ndarray,
        accepted: Sequence[int] | np.ndarray | None,
        *,
        owners: bool = False,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Every token a pass feeds (its requests' :meth:`fed_routing`, in another order),
        gathered per block at once, and with ``owners`` each one's request (:func:`gather_pass`)."""
        triples = np.asarray(fed, dtype=np.int64).reshape(-1, 3)
        if accepted is None:
            matches = [self.sequence(r).match_lengths[i] for r, i, _ in triples.tolist()]
            taken = np.minimum(triples[:, 2], np.array(matches, dtype=np.int64))
        else:
            taken = np.asarray(accepted, dtype=np.int64)
        return gather_pass(
            self._block_true, self._rejected.ids, triples, taken, BLOCK_REQUESTS, owners=owners
        )


def gather_pass(
    true_block: Callable[[int], np.ndarray],
    rejected_ids: Callable[[int, int, np.ndarray, np.ndarray], np.ndarray],
    triples: np.ndarray,
    accepted: np.ndarray,
    block_size: int,
    *,
    owners: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Every token a verify pass feeds, gathered per block at once: (tokens, layers, k_e), and
    with ``owners`` the row of ``triples`` each token is fed by (tokens,) (else None).

    ``triples`` (B, 3) holds (request id, state i, drafts k) and ``accepted`` the accepted
    drafts a of each request: the pass feeds the true tokens y_i..y_{i+a} (cut at the block's
    end, as :meth:`~simspec.text.reference.ReferenceSet.fed_routing`'s slice) and the rejected
    drafts of depths 1..k − a at state i. ``true_block(b)`` returns block b's true tokens and
    ``rejected_ids(b, r, q, i)`` the ids of its rejected depth r at rows q, states i. The order
    of the tokens differs from fed_routing's; their union does not.
    """
    request, state, drafts = triples.T
    block, row = np.divmod(request, block_size)
    parts, whose = [], []
    blocks = [int(block[0])] if (block == block[0]).all() else np.unique(block).tolist()
    for b in blocks:
        mine = slice(None) if len(blocks) == 1 else block == b
        q, i, acc = row[mine], state[mine], accepted[mine]
        owner = np.arange(len(triples))[mine] if owners else None
        true = true_block(b)
        count = acc + 1  # true tokens y_i..y_{i+a}
        offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        position = np.repeat(i, count) + offset
        sequence = np.repeat(q, count)
        inside = position < true.shape[1]
        whole = bool(inside.all())
        if not whole:
            sequence, position = sequence[inside], position[inside]
        parts.append(true[sequence, position])
        if owner is not None:
            fed_by = np.repeat(owner, count)
            whose.append(fed_by if whole else fed_by[inside])
        rejected = drafts[mine] - acc
        for r in range(1, int(rejected.max()) + 1):
            deep = rejected >= r
            parts.append(rejected_ids(b, r, q[deep], i[deep]))
            if owner is not None:
                whose.append(owner[deep])
    ids = np.concatenate(parts) if len(parts) > 1 else parts[0]
    return ids, (np.concatenate(whose) if owners else None)
